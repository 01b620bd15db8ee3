"""Kind gke's rules, defaults and cluster ranges. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.targets.base import SystemPool, managed_cluster_problems
from llmd_fleet.targets.gke.config import GkeTarget, gke_problems
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

GCP_HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
"""Google Cloud load-balancer health-check probes (Cloud Load Balancing "Firewall rules"); the
regional internal Application Load Balancer's own traffic comes from the proxy-only subnet."""


def _target(config: StackConfig) -> GkeTarget:
    assert isinstance(config.target, GkeTarget), "a gke rule ran on another kind"
    return config.target


def gke_target_problems(config: StackConfig) -> list[Problem]:
    """The cluster the stack creates, and the gke section against the fleet it carries."""
    target = _target(config)
    problems = managed_cluster_problems(
        target, "gke", versions().kubernetes.gke, "the stack installs the COS driver DaemonSet"
    )
    for name, group in config.fleet.node_groups.items():
        if group.accelerator_allocation == "dra" and group.nic_device_class is not None:
            problems.append(
                Problem(
                    key(config, "fleet", "node_groups", name, "nic_device_class"),
                    "must be null on gke: A3 Mega TCPXO NICs reach pods through GKE multi-networking, "
                    "not DRA (the claim holds GPUs only)",
                )
            )
    groups: dict[str, tuple[int, int]] = {
        name: (g.gpus_per_node, g.nics_per_node) for name, g in config.fleet.node_groups.items()
    }
    problems += gke_problems(target.gke, groups, key(config, "target", "gke"))
    return problems


def gke_defaults(config: StackConfig) -> StackConfig:
    """GKE's managed gateway is the default gateway there; an explicit choice is kept."""
    if "implementation" in config.gateway.model_fields_set:
        return config
    return config.model_copy(
        update={"gateway": config.gateway.model_copy(update={"implementation": "gke-l7-rilb"})}
    )


def gke_cluster_ranges(config: StackConfig) -> ClusterRanges:
    net = _target(config).gke.network
    managed = config.gateway.implementation in MANAGED_IMPLEMENTATIONS
    return ClusterRanges(
        pods=(net.pod_cidr,),
        services=(net.service_cidr,),
        gateway_sources=(net.proxy_only_cidr,) if managed else (),
        health_check_sources=GCP_HEALTH_CHECK_RANGES if managed else (),
    )


def gke_system_pool(config: StackConfig) -> SystemPool:
    """`target.gke.systemPool`: the CPU node pool of the system pods."""
    target = config.target
    assert isinstance(target, GkeTarget)
    pool = target.gke.system_pool
    return SystemPool(
        key(config, "target", "gke", "system_pool", "machine_type"),
        pool.machine_type,
        key(config, "target", "gke", "system_pool", "node_count"),
        pool.node_count,
    )
