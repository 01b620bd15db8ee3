"""Rules and ranges the kinds that run on an existing cluster (onprem, local) share, and the GPU
kinds' rules of the node groups and the engine. Pure."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from llmd_fleet.config.rules import gpu_node_group_problems
from llmd_fleet.core.netpol import ClusterRanges
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.onprem.config import OnPremTargetConfig

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def gpu_fleet_problems(config: StackConfig) -> list[Problem]:
    """A GPU kind's `TargetSpec.fleet_problems`: its node groups carry GPUs and the engine is vLLM
    (the simulator is kind local's, llmd_fleet/targets/local/rules.py)."""
    kind = config.target.kind
    problems: list[Problem] = []
    for name, group in config.fleet.node_groups.items():
        problems += gpu_node_group_problems(config, name, group, kind)
    if config.serving.engine == "simulator":
        problems.append(
            Problem(
                key(config, "serving", "engine"),
                f"simulator is only for kind local (the target is {kind}): on GPU nodes it "
                "would hold every H100 without using one; try the layout on a kind cluster "
                "(docs/local-sim.md)",
            )
        )
    return problems


def range_problems(config: StackConfig) -> list[Problem]:
    """The onprem section's two ranges are distinct networks."""
    section = getattr(config.target, "onprem", None)
    if section is None:
        return []
    pods, services = (ipaddress.IPv4Network(c) for c in (section.pod_cidr, section.service_cidr))
    if pods.overlaps(services):
        return [
            Problem(
                key(config, "target", "onprem", "service_cidr"),
                f"must not overlap podCidr {pods} (got {services})",
            )
        ]
    return []


def preinstalled_platform_problems(config: StackConfig) -> list[Problem]:
    """A preinstalled platform installs no third-party chart: a section asking for one is a
    contradiction, not a choice to guess at."""
    if config.target.installs_platform:
        return []
    why = "with target.platform: preinstalled the stack releases no third-party chart"
    problems = []
    if config.observability.prometheus == "install":
        problems.append(
            Problem(
                key(config, "observability", "prometheus"),
                f"must not be install (kube-prometheus-stack) {why}; use operator (the cluster's "
                "prometheus-operator) or none",
            )
        )
    scaling = config.serving.autoscaling
    if scaling is not None and "keda" in scaling.model_fields_set and scaling.keda == "install":
        problems.append(
            Problem(
                key(config, "serving", "autoscaling", "keda"),
                f"must be preinstalled (or unset) {why}",
            )
        )
    return problems


def existing_cluster_ranges(config: StackConfig) -> ClusterRanges:
    section = getattr(config.target, "onprem", None) or OnPremTargetConfig()
    return ClusterRanges(pods=(section.pod_cidr,), services=(section.service_cidr,))
