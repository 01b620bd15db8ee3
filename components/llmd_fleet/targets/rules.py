"""Rules and ranges the kinds that run on an existing cluster (onprem, local) share. Pure."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.onprem.config import OnPremTargetConfig

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


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
