"""Kind onprem's rules. Pure."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.onprem.config import OnPremTarget, OnPremTargetConfig
from llmd_fleet.targets.rules import preinstalled_platform_problems, range_problems

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def onprem_problems(config: StackConfig) -> list[Problem]:
    return range_problems(config) + preinstalled_platform_problems(config)


def backup_endpoint_problems(config: StackConfig) -> list[Problem]:
    """The response store's backup store, given by an IPv4 address, lies outside the pod and
    Service ranges: the database pods may reach its port there and nowhere else outside the cluster
    (the NetworkPolicy's egress rule excludes both ranges), so a store inside them is unreachable.
    A host name cannot be resolved offline and is taken as given."""
    backup = config.responses.backup if config.responses is not None else None
    if not isinstance(config.target, OnPremTarget) or backup is None or isinstance(backup, str):
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
