"""The gateway section's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.specs import kinds_where
from llmd_fleet.versions import version_tuple, versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

AGENTGATEWAY_MULTI_PORT_POOLS = (1, 2, 0)
"""First agentgateway release whose InferencePool backends take every target port: PR #1445
(commit e17b713, in v1.2.0 and later). Before it a pool with more than one target port is
ResolvedRefs=False and only targetPorts[0] is a backend (v1.1.0
controller/pkg/agentgateway/plugins/inference_plugin.go ~145-147, reference_indexes.go ~160), so
on EPP fail-open every request lands on one port. Every pool the stacks render has more than one
target port (one per local DP rank, and prefill and decode listen on different ports)."""


def gateway_problems(config: StackConfig) -> list[Problem]:
    """A gateway class a target's platform provides (GKE's managed one) exists only there
    (`TargetSpec.platform_gateways`); agentgateway must handle multi-port pools."""
    problems: list[Problem] = []
    implementation = config.gateway.implementation
    owners = kinds_where(lambda spec: implementation in spec.platform_gateways)
    if owners and config.target.kind not in owners:
        where = key(config, "gateway", "implementation")
        problems.append(Problem(where, f"{implementation} exists only on kind {' or '.join(owners)}"))
    if implementation == "agentgateway":
        pinned = versions().chart("agentgateway").version
        if version_tuple(pinned) < AGENTGATEWAY_MULTI_PORT_POOLS:
            problems.append(
                Problem(
                    key(config, "gateway", "implementation"),
                    f"agentgateway {pinned} (images/versions.toml) backs only targetPorts[0] of a "
                    "multi-port InferencePool (fixed by agentgateway PR #1445, v1.2.0); pin 1.2.0 "
                    "or newer or use istio",
                )
            )
    return problems
