"""The `gke` section of `llmd-fleet:target`: project, location, networks and node-pool capacity.

Pure (no Pulumi). llmd_fleet/config/fleet.py embeds `GkeTargetConfig` as `target.gke` and runs
`gke_problems` as part of its semantic checks; llmd_fleet/targets/gke/cluster.py builds the cloud resources
from it. Field names are camelCase in YAML, snake_case in Python, as everywhere in the config.
"""

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import CloudSqlTier, Ipv4Address, Ipv4Cidr, Pattern
from llmd_fleet.core.problems import Key, Problem
from llmd_fleet.targets.base import TargetBase

MANAGED_GATEWAY = "gke-l7-rilb"
"""The gateway class GKE's platform provides (the regional internal Application Load Balancer):
`gateway.implementation` may name it on kind gke only (`TargetSpec.platform_gateways`)."""

_GCP_NAME = Pattern(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RESERVATION = (
    r"[a-z]([-a-z0-9]*[a-z0-9])?"
    r"|projects/[a-z][-a-z0-9]*/reservations/[a-z][-a-z0-9]*(/reservationBlocks/[a-z0-9][-a-z0-9]*)?"
)


class _GkeModel(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


@dataclass(frozen=True)
class MachineShape:
    """What GKE needs to know about a GPU machine type."""

    accelerator_type: str
    """GKE accelerator name (node label cloud.google.com/gke-accelerator)."""
    gpus: int
    gpu_nics: int
    """GPU NICs besides the primary gVNIC: one GPU VPC each (eth1..ethN in pods)."""
    fabric: str
    """GPU-to-GPU transport over those NICs."""


# GKE node pool names (container.v1 NodePool.name): a letter first, at most 40 characters.
_GKE_NODE_POOL_NAME = r"[a-z]([-a-z0-9]*[a-z0-9])?"
GKE_NODE_POOL_NAME_MAX = 40

# a3-megagpu-8g: 8 x H100 80GB (Mega), 1 primary + 8 GPU NICs, GPUDirect-TCPXO.
MACHINE_SHAPES: dict[str, MachineShape] = {
    "a3-megagpu-8g": MachineShape(
        accelerator_type="nvidia-h100-mega-80gb", gpus=8, gpu_nics=8, fabric="tcpxo"
    ),
}
GkeMachineType = Literal["a3-megagpu-8g"]


def _default_gpu_subnets() -> list[str]:
    # A /20 per GPU network inside 192.168.0.0/16: room for 4,094 nodes on each.
    return [f"192.168.{16 * i}.0/20" for i in range(8)]


class GkeNetworkConfig(_GkeModel):
    """Address plan of the primary VPC and the GPU VPCs. Ranges must not overlap each other."""

    node_cidr: str = "10.0.0.0/20"
    """Primary subnet (node addresses, eth0)."""
    pod_cidr: str = "10.64.0.0/14"
    """Pod secondary range. GKE carves one range per node sized for maxPodsPerNode (a /24 at 110
    pods), so a /14 holds 1,024 nodes."""
    service_cidr: str = "10.96.0.0/20"
    """Service secondary range."""
    proxy_only_cidr: str = "10.97.0.0/23"
    """Proxy-only subnet the regional internal Application Load Balancer (gke-l7-rilb) needs."""
    master_cidr: str = "172.16.0.0/28"
    """Control-plane range of the private cluster (a /28)."""
    gpu_subnet_cidrs: Annotated[list[str], Field(min_length=1, max_length=16)] = Field(
        default_factory=_default_gpu_subnets
    )
    """One subnet per GPU VPC, in NIC order (eth1 = first). Their number must equal the GPU
    machine's GPU NICs (8 on a3-megagpu-8g)."""
    gpu_mtu: Annotated[int, Field(ge=1460, le=8896)] = 8244
    """MTU of the GPU VPCs (8244 for GPUDirect-TCPXO)."""
    master_authorized_cidrs: list[str] = Field(default_factory=list)
    """CIDRs allowed to reach the public control-plane endpoint; empty leaves it open to any
    address (authentication still applies)."""


class SystemPoolConfig(_GkeModel):
    """The CPU pool for the router, gateway, controllers and the tokenizer."""

    machine_type: Annotated[str, Pattern(r"[a-z][a-z0-9]*-[a-z0-9]+(-[a-z0-9]+)*"), Field(max_length=63)] = (
        "n2-standard-96"
    )
    """Machine type. One endpoint-picker replica runs per node and must fit it: ~69 cores and
    93 GiB at the default 127 req/s on 68 nodes (plan/epp.py); the plan refuses a known machine
    type that cannot hold it (plan/system_nodes.py)."""
    node_count: Annotated[int, Field(ge=1, le=100)] = 3
    """Nodes (in the zone); EPP replicas need distinct nodes."""
    disk_size_gb: Annotated[int, Field(ge=50, le=65536)] = 200
    """Boot disk per node."""


class GkeNodePoolConfig(_GkeModel):
    """Capacity and placement of the GKE node pool behind one fleet node group."""

    machine_type: GkeMachineType = "a3-megagpu-8g"
    """GPU machine type."""
    reservation: Annotated[str, Pattern(_RESERVATION)] | None = None
    """Reservation to consume (SPECIFIC_RESERVATION): a name, projects/P/reservations/R, or a
    reservation block projects/P/reservations/R/reservationBlocks/B. Excludes flexStart and
    queuedProvisioning."""
    flex_start: bool = False
    """DWS flex-start: nodes when capacity frees up, for at most maxRunDurationSeconds; the pool
    autoscales from 0 to the group's count."""
    max_run_duration_seconds: Annotated[int, Field(ge=600, le=604800)] | None = None
    """flex-start only: how long a node may run (GKE's default, 7 days, when unset)."""
    queued_provisioning: bool = False
    """DWS queued provisioning (ProvisioningRequest): the pool autoscales from 0 and is filled
    all at once per request. Excludes compact placement."""
    placement: Literal["auto", "compact", "none"] = "auto"
    """`compact`: one COMPACT placement policy (lowest latency between nodes). `auto`: compact
    unless queued provisioning or a reservation block (a block is already co-located)."""
    placement_policy_name: Annotated[str, _GCP_NAME] | None = None
    """Existing compute resource policy (group placement) for compact placement; GKE creates one
    when unset."""
    local_ssd_count: Annotated[int, Field(ge=0, le=32)] = 16
    """Local NVMe SSDs per node as raw block devices (a3-megagpu-8g has 16 x 375 GB)."""
    max_pods_per_node: Annotated[int, Field(ge=8, le=256)] = 32
    """Pod address slots per node; GPU nodes run one serving pod plus node daemons."""
    disk_size_gb: Annotated[int, Field(ge=100, le=65536)] = 200
    """Boot disk per node."""


WeekDay = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
# GKE: "You must allow at least 48 hours of maintenance availability in a 32-day rolling window.
# Only contiguous availability windows of at least four hours are considered."
# (cloud.google.com/kubernetes-engine/docs/maintenance-window, "Considerations when configuring a
# maintenance window").
MAINTENANCE_MIN_HOURS = 48
MAINTENANCE_ROLLING_DAYS = 32
MAINTENANCE_MIN_WINDOW_HOURS = 4


def _weekend() -> list[WeekDay]:
    return ["SA", "SU"]


class GkeMaintenanceWindow(_GkeModel):
    """The cluster's recurring maintenance window: when GKE may start automatic maintenance,
    release-channel upgrades of the control plane and of the node pools included. A node-pool
    upgrade that runs past the window's end is stopped and starts again in the next window, and
    GKE may still apply emergency upgrades outside it (docs/disruptions.md)."""

    days: Annotated[list[WeekDay], Field(min_length=1, max_length=7)] = Field(default_factory=_weekend)
    """Weekdays (UTC) the window opens on (iCalendar BYDAY codes)."""
    start: Annotated[str, Pattern(r"([01][0-9]|2[0-3]):[0-5][0-9]")] = "00:00"
    """Opening time, HH:MM UTC."""
    duration_hours: Annotated[int, Field(ge=MAINTENANCE_MIN_WINDOW_HOURS, le=24)] = 24
    """Hours the window stays open each of those days (GKE counts only windows of at least 4)."""


def weekly_window_hours(window: GkeMaintenanceWindow) -> int:
    """Hours of maintenance availability any 32-day rolling window is sure to contain: it holds at
    least four whole weeks."""
    return (MAINTENANCE_ROLLING_DAYS // 7) * len(set(window.days)) * window.duration_hours


class GkeTargetConfig(_GkeModel):
    """`target.gke`: where and how the GKE cluster and its node pools are created."""

    project: Annotated[str, Pattern(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")]
    """Google Cloud project id."""
    region: Annotated[str, Pattern(r"[a-z]+-[a-z]+[0-9]+")]
    """Region of the (regional) control plane and of every subnet, e.g. us-central1."""
    zone: Annotated[str, Pattern(r"[a-z]+-[a-z]+[0-9]+-[a-z]")]
    """The one zone of every node pool (compact placement and reservations are zonal)."""
    name: Annotated[str, _GCP_NAME, Field(max_length=30)] = "llmd-fleet"
    """Cluster name, and the prefix of every network resource."""
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = "REGULAR"
    """GKE release channel; the control-plane minimum version comes from the version matrix."""
    network: GkeNetworkConfig = Field(default_factory=GkeNetworkConfig)
    """Address plan."""
    maintenance_window: GkeMaintenanceWindow | None = Field(default_factory=GkeMaintenanceWindow)
    """When GKE may run automatic upgrades (weekly, UTC); null lets it choose any time. The GPU
    pools upgrade one node at a time, and each serving role's PodDisruptionBudget holds the next
    drain until the group the last one took down serves again (docs/disruptions.md)."""
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig)
    """CPU pool for everything but the serving pods."""
    node_pools: Annotated[dict[str, GkeNodePoolConfig], Field(min_length=1)]
    """GPU pool settings keyed by fleet node group name: exactly the groups of fleet.nodeGroups."""


class GkeTarget(TargetBase):
    """A GKE Standard cluster with A3 Mega GPU pools, created by the stack."""

    kind: Literal["gke"]
    gke: GkeTargetConfig
    """kind gke: project, location, networks and node-pool capacity."""


def is_reservation_block(reservation: str | None) -> bool:
    return reservation is not None and "/reservationBlocks/" in reservation


def compact_placement(pool: GkeNodePoolConfig) -> bool:
    """Whether the pool gets a COMPACT placement policy."""
    if pool.placement == "auto":
        return not pool.queued_provisioning and not is_reservation_block(pool.reservation)
    return pool.placement == "compact"


def gke_problems(gke: GkeTargetConfig, node_groups: dict[str, tuple[int, int]], path: Key) -> list[Problem]:
    """Cross-field problems of the gke section. `node_groups` maps each fleet node group to
    (GPUs per node, GPU NICs per node); `path` is the key path of the section."""
    problems: list[Problem] = []
    pools = gke.node_pools
    for missing in sorted(set(node_groups) - set(pools)):
        problems.append(Problem(path.at("node_pools"), f"no pool settings for fleet node group {missing!r}"))
    for extra in sorted(set(pools) - set(node_groups)):
        problems.append(Problem(path.at("node_pools", extra), "is not a fleet node group"))
    gpu_nics: set[int] = set()
    for name, pool in sorted(pools.items()):
        pool_path = path.at("node_pools", name)
        if len(name) > GKE_NODE_POOL_NAME_MAX or not re.fullmatch(_GKE_NODE_POOL_NAME, name):
            problems.append(
                Problem(
                    pool_path,
                    "the node pool is named after its fleet node group, and GKE node pool names are "
                    f"[a-z0-9-], starting with a letter, at most {GKE_NODE_POOL_NAME_MAX} characters",
                )
            )
        chosen = [
            key
            for key, on in (
                ("reservation", pool.reservation is not None),
                ("flex_start", pool.flex_start),
                ("queued_provisioning", pool.queued_provisioning),
            )
            if on
        ]
        if len(chosen) > 1:
            problems.append(
                Problem(
                    pool_path.at(chosen[1]),
                    f"excludes {GkeNodePoolConfig.model_fields[chosen[0]].alias}: choose one capacity "
                    "source (reservation, flexStart or queuedProvisioning)",
                )
            )
        if pool.queued_provisioning and pool.placement == "compact":
            problems.append(
                Problem(pool_path.at("placement"), "compact placement cannot be used with queuedProvisioning")
            )
        if pool.max_run_duration_seconds is not None and not pool.flex_start:
            problems.append(Problem(pool_path.at("max_run_duration_seconds"), "only applies with flexStart"))
        if pool.placement_policy_name is not None and not compact_placement(pool):
            problems.append(
                Problem(pool_path.at("placement_policy_name"), "only applies with compact placement")
            )
        shape = MACHINE_SHAPES[pool.machine_type]
        if name in node_groups:
            gpus, nics = node_groups[name]
            if gpus != shape.gpus or nics != shape.gpu_nics:
                problems.append(
                    Problem(
                        pool_path.at("machine_type"),
                        f"{pool.machine_type} has {shape.gpus} GPUs and {shape.gpu_nics} GPU NICs; the "
                        f"node group says {gpus} GPUs and {nics} NICs",
                    )
                )
        gpu_nics.add(shape.gpu_nics)
    network = gke.network
    if len(gpu_nics) == 1 and len(network.gpu_subnet_cidrs) != next(iter(gpu_nics)):
        problems.append(
            Problem(
                path.at("network", "gpu_subnet_cidrs"),
                f"needs one subnet per GPU NIC ({next(iter(gpu_nics))}); got {len(network.gpu_subnet_cidrs)}",
            )
        )
    elif len(gpu_nics) > 1:
        problems.append(Problem(path.at("node_pools"), "every pool must have the same number of GPU NICs"))
    ranges: list[tuple[str, ipaddress.IPv4Network]] = []
    net_key = path.at("network")
    named = [
        (net_key.at("node_cidr"), network.node_cidr),
        (net_key.at("pod_cidr"), network.pod_cidr),
        (net_key.at("service_cidr"), network.service_cidr),
        (net_key.at("proxy_only_cidr"), network.proxy_only_cidr),
        (net_key.at("master_cidr"), network.master_cidr),
        *((net_key.at("gpu_subnet_cidrs", i), c) for i, c in enumerate(network.gpu_subnet_cidrs)),
    ]
    for field_key, text in named:
        try:
            net = ipaddress.IPv4Network(text)
        except ValueError as exc:
            problems.append(Problem(field_key, f"not an IPv4 CIDR: {exc}"))
            continue
        for other_name, other in ranges:
            if net.overlaps(other):
                problems.append(Problem(field_key, f"overlaps {other_name} ({other})"))
        ranges.append((field_key.removeprefix(f"{net_key}."), net))
    if not problems:
        master = ipaddress.IPv4Network(network.master_cidr)
        if master.prefixlen != 28:
            problems.append(Problem(path.at("network", "master_cidr"), "must be a /28"))
    window = gke.maintenance_window
    if window is not None:
        if len(set(window.days)) != len(window.days):
            problems.append(Problem(path.at("maintenance_window", "days"), "names a day twice"))
        hours = weekly_window_hours(window)
        if hours < MAINTENANCE_MIN_HOURS:
            problems.append(
                Problem(
                    path.at("maintenance_window"),
                    f"opens {hours} h in a {MAINTENANCE_ROLLING_DAYS}-day period; GKE requires at "
                    f"least {MAINTENANCE_MIN_HOURS} h (more days or a longer durationHours)",
                )
            )
    for i, text in enumerate(network.master_authorized_cidrs):
        try:
            ipaddress.IPv4Network(text)
        except ValueError as exc:
            problems.append(
                Problem(path.at("network", "master_authorized_cidrs", i), f"not an IPv4 CIDR: {exc}")
            )
    return problems


# The kind's section of `llmd-fleet:responses` (`responses.database.gke`), read through its
# `TargetSpec.responses` (llmd_fleet/targets/gke/rules.py).

CLOUD_SQL_PERF_OPTIMIZED = "db-perf-optimized-N-"
"""Prefix of the Cloud SQL tiers the ENTERPRISE_PLUS edition takes (and the only ones it takes)."""


class ResponsesGkeDatabaseConfig(ConfigModel):
    """Cloud SQL for PostgreSQL on the gke target: regional (HA), private IP only, in the fleet's
    VPC through Private Service Access."""

    tier: CloudSqlTier = "db-perf-optimized-N-4"
    """Machine tier (default db-perf-optimized-N-4: 4 vCPUs). ENTERPRISE_PLUS takes only the
    `db-perf-optimized-N-*` tiers, ENTERPRISE the others (`db-custom-<vCPUs>-<MiB>`)."""
    edition: Literal["ENTERPRISE_PLUS", "ENTERPRISE"] = "ENTERPRISE_PLUS"
    """Cloud SQL edition (default ENTERPRISE_PLUS, which is also the API's default for PostgreSQL
    16 and later; it is set explicitly so that a changed API default never touches the
    instance)."""
    private_service_cidr: Ipv4Cidr = "10.98.0.0/20"
    """The range Private Service Access reserves in the fleet's VPC for Google-managed services;
    Cloud SQL's private IP comes from it (default 10.98.0.0/20). A /16 to /24 that overlaps no
    range of target.gke.network. The agentic API may reach port 5432 in this range and nowhere
    else outside the cluster."""
    gateway_address: Ipv4Address | None = None
    """The managed gateway's (gke-l7-rilb) internal address, reserved by the stack in the node
    subnet and named on the Gateway: the agentic API sends its inference requests back through
    the gateway to it. Default: the fourth-to-last address of target.gke.network.nodeCidr
    (10.0.15.252 for the default 10.0.0.0/20)."""


def default_gateway_address(node_cidr: str) -> str:
    """The fourth-to-last address of the node subnet: GCE reserves the last two addresses of a
    subnet, and nodes take addresses from its start."""
    network = ipaddress.IPv4Network(node_cidr)
    return str(network.broadcast_address - 3)


def gateway_address(settings: ResponsesGkeDatabaseConfig | None, gke: GkeTargetConfig) -> str:
    """The managed gateway's internal address (the configured one or the default)."""
    chosen = settings.gateway_address if settings is not None else None
    return chosen or default_gateway_address(gke.network.node_cidr)
