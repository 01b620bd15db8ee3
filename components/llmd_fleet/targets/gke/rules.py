"""Kind gke's rules, defaults and cluster ranges. Pure."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges, Peer
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.base import SystemPool, managed_cluster_problems, store_settings
from llmd_fleet.targets.gke.config import (
    CLOUD_SQL_PERF_OPTIMIZED,
    MANAGED_GATEWAY,
    GkeTarget,
    ResponsesGkeDatabaseConfig,
    gateway_address,
    gke_problems,
)
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
        update={"gateway": config.gateway.model_copy(update={"implementation": MANAGED_GATEWAY})}
    )


def gke_cluster_ranges(config: StackConfig) -> ClusterRanges:
    net = _target(config).gke.network
    managed = config.gateway.implementation == MANAGED_GATEWAY
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


def _database(config: StackConfig) -> ResponsesGkeDatabaseConfig:
    """`responses.database.gke` (its defaults when unset)."""
    assert config.responses is not None
    return store_settings(config.responses.database, "gke", ResponsesGkeDatabaseConfig)


def gke_responses_problems(config: StackConfig) -> list[Problem]:
    """Cloud SQL's tier and edition, its private service range against the fleet's network, and
    the managed gateway's reserved address."""
    settings = _database(config)
    section = key(config, "responses", "database", "gke")
    problems = []
    perf_optimized = settings.tier.startswith(CLOUD_SQL_PERF_OPTIMIZED)
    if (settings.edition == "ENTERPRISE_PLUS") != perf_optimized:
        problems.append(
            Problem(
                section.at("tier"),
                f"edition {settings.edition} takes "
                + ("only" if settings.edition == "ENTERPRISE_PLUS" else "no")
                + f" {CLOUD_SQL_PERF_OPTIMIZED}* tiers (got {settings.tier!r})",
            )
        )
    psa = ipaddress.IPv4Network(settings.private_service_cidr)
    if not 16 <= psa.prefixlen <= 24:
        problems.append(Problem(section.at("private_service_cidr"), f"must be a /16 to /24 (got {psa})"))
    net = _target(config).gke.network
    ranges = {
        "nodeCidr": net.node_cidr,
        "podCidr": net.pod_cidr,
        "serviceCidr": net.service_cidr,
        "proxyOnlyCidr": net.proxy_only_cidr,
        "masterCidr": net.master_cidr,
        **{f"gpuSubnetCidrs[{i}]": c for i, c in enumerate(net.gpu_subnet_cidrs)},
    }
    for name, cidr in ranges.items():
        try:
            other = ipaddress.IPv4Network(cidr)
        except ValueError:
            continue  # reported by the gke section's own rules
        if psa.overlaps(other):
            problems.append(
                Problem(
                    section.at("private_service_cidr"),
                    f"overlaps target.gke.network.{name} ({other}); choose a free range (got {psa})",
                )
            )
    if settings.gateway_address is not None:
        if config.gateway.implementation != MANAGED_GATEWAY:
            problems.append(
                Problem(
                    section.at("gateway_address"),
                    f"only with gateway.implementation {MANAGED_GATEWAY} (the managed gateway)",
                )
            )
        try:
            subnet = ipaddress.IPv4Network(net.node_cidr)
        except ValueError:
            return problems
        address = ipaddress.IPv4Address(settings.gateway_address)
        usable = address in subnet and subnet.network_address + 1 < address < subnet.broadcast_address - 1
        if not usable:
            problems.append(
                Problem(
                    section.at("gateway_address"),
                    f"must be an address of target.gke.network.nodeCidr {subnet} other than the four "
                    f"GCE reserves (got {address})",
                )
            )
    return problems


def gke_database_peers(config: StackConfig) -> list[Peer]:
    """Cloud SQL answers from the Private Service Access range."""
    return [{"ipBlock": {"cidr": _database(config).private_service_cidr}}]


def gke_gateway_address(config: StackConfig) -> str | None:
    """The internal address reserved for the managed gateway, when the stack uses it."""
    if config.gateway.implementation != MANAGED_GATEWAY or config.responses is None:
        return None
    return gateway_address(_database(config), _target(config).gke)
