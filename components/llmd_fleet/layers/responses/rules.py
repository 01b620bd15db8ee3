"""The responses section's rules against the rest of the stack. Pure."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.responses.config import S3BackupConfig, responses_section_problems
from llmd_fleet.targets.gke.config import GkeTarget
from llmd_fleet.targets.onprem.config import OnPremTarget, OnPremTargetConfig

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def responses_problems(config: StackConfig) -> list[Problem]:
    """The response store fits the target (its database, the GKE gateway's address, a backup
    store outside the cluster's ranges)."""
    if config.responses is None:
        return []
    return [
        *responses_section_problems(
            config.responses,
            config.target.kind,
            config.target.gke if isinstance(config.target, GkeTarget) else None,
            config.gateway.implementation,
            key(config, "responses"),
        ),
        *_backup_endpoint_problems(config),
    ]


def _backup_endpoint_problems(config: StackConfig) -> list[Problem]:
    """An on-prem backup store given by an IPv4 address must lie outside the pod and Service
    ranges: the database pods may reach its port there and nowhere else outside the cluster (the
    NetworkPolicy's egress rule excludes both ranges), so a store inside them is unreachable.
    A host name cannot be resolved offline and is taken as given."""
    backup = config.responses.backup if config.responses is not None else None
    if not isinstance(config.target, OnPremTarget) or not isinstance(backup, S3BackupConfig):
        return []
    host = urlsplit(backup.endpoint).hostname or ""
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        return []
    ranges = config.target.onprem or OnPremTargetConfig()
    for name, cidr in (("podCidr", ranges.pod_cidr), ("serviceCidr", ranges.service_cidr)):
        if address in ipaddress.IPv4Network(cidr):
            return [
                Problem(
                    key(config, "responses", "backup", "endpoint"),
                    f"{host} is inside target.onprem.{name} {cidr}: the store must lie outside the "
                    "cluster's pod and Service ranges (the database's egress rule excludes them)",
                )
            ]
    return []
