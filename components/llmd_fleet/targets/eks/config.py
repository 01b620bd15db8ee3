"""The `target.eks` section of the stack configuration: network, cluster access and GPU capacity
of the EKS target (pure pydantic, no Pulumi).

llmd_fleet/config/fleet.py holds it as `TargetConfig.eks` and calls `eks_problems()` for the rules that
span sections (the fleet's node groups, the Kubernetes version). llmd_fleet/targets/eks/cluster.py builds the
cloud resources from it.
"""

import ipaddress
from collections.abc import Mapping
from typing import Annotated, Literal, Protocol

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import Pattern, RdsInstanceClass
from llmd_fleet.core.problems import Key, Problem
from llmd_fleet.targets.base import TargetBase

# An IAM role or user (or an STS assumed role): partition, 12-digit account, then the resource.
_PRINCIPAL_ARN = Pattern(
    r"arn:aws[a-z-]*:(iam|sts)::[0-9]{12}:(role|user|assumed-role)/[A-Za-z0-9+=,.@_/-]{1,512}"
)

EFA_DEVICE_CLASS = "efa.networking.k8s.aws"
"""DeviceClass the AWS DRANET chart (aws-dranet) creates over the EFA devices it publishes."""
DRA_KUBELET_PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
"""Node label the NVIDIA DRA driver's kubelet plugin is scheduled on (llmd_fleet/platform/dra.py)."""
CAPACITY_BLOCK_MAX_INSTANCES = 64
"""Most instances one EC2 Capacity Block holds (EC2 user guide, "Capacity Blocks for ML")."""


class InstanceShape(Protocol):
    """What the EKS rules need to know about an instance type."""

    gpus: int
    efa_cards: int
    vcpus: int
    memory_gib: int


class _Shape:
    def __init__(self, gpus: int, efa_cards: int, vcpus: int, memory_gib: int):
        self.gpus, self.efa_cards, self.vcpus, self.memory_gib = gpus, efa_cards, vcpus, memory_gib


# p5.48xlarge: 8 x H100 80GB, 32 network cards each carrying one EFA, 192 vCPUs, 2,048 GiB.
INSTANCE_SHAPES: dict[str, InstanceShape] = {"p5.48xlarge": _Shape(8, 32, 192, 2048)}

LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
ALL_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class CapacityBlockConfig(_Model):
    """One purchased EC2 Capacity Block (Instance Capacity Block)."""

    reservation_id: Annotated[str, Pattern(r"cr-[0-9a-f]{8,17}")]
    """Capacity reservation id of the block (`cr-...`), from the purchase."""
    instances: Annotated[int, Field(ge=1, le=4096)]
    """Instances the block holds (at most 64); one managed node group of exactly this size."""


class EksGpuCapacityConfig(_Model):
    """Where the instances of one fleet node group come from."""

    instance_type: Literal["p5.48xlarge"] = "p5.48xlarge"
    """EC2 instance type; its network-card layout is fixed in llmd_fleet/targets/eks/cluster.py."""
    capacity: Literal["capacity-block", "odcr"]
    """`capacity-block`: one or more purchased Capacity Blocks, one launch template and managed
    node group per block (EC2 places them in an UltraCluster; no placement group).
    `odcr`: an On-Demand Capacity Reservation targeted by the launch template, in a cluster
    placement group; created by the stack unless `reservationId` names an existing one."""
    capacity_blocks: list[CapacityBlockConfig] = Field(default_factory=list)
    """capacity-block: the blocks; their instances must add up to the node group's count."""
    reservation_id: Annotated[str, Pattern(r"cr-[0-9a-f]{8,17}")] | None = None
    """odcr: an existing targeted ODCR (`cr-...`); the stack creates one when unset."""
    placement_group: Annotated[str, Pattern(r"[A-Za-z0-9._-]{1,255}")] | None = None
    """odcr with `reservationId`: the existing cluster placement group the reservation was made
    in. Unset when the stack creates the reservation (it creates the group too)."""
    root_volume_gib: Annotated[int, Field(ge=100, le=16384)] = 512
    """Encrypted gp3 root volume (OS, logs; kubelet and containerd too when instanceStoreRaid0 is
    off)."""
    instance_store_raid0: bool = True
    """Stripe the instance's NVMe instance store (RAID0) and put kubelet and containerd on it
    (nodeadm `localStorage`): model weights and compile caches then land on local NVMe."""


class EksSystemNodesConfig(_Model):
    """The CPU node group for the router, gateway, controllers and CoreDNS."""

    instance_type: Annotated[str, Pattern(r"[a-z0-9-]+\.[a-z0-9-]+")] = "m7i.24xlarge"
    """EC2 instance type (x86_64). One endpoint-picker replica runs per node (required
    anti-affinity) and must fit it: ~69 cores and 93 GiB at the default 127 req/s on 68 nodes
    (plan/epp.py); the plan refuses a known type that cannot hold it (plan/system_nodes.py)."""
    count: Annotated[int, Field(ge=2, le=100)] = 3
    """Nodes; at least one per EPP replica plus one spare."""
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = 200
    """Encrypted gp3 root volume."""


class EksTargetConfig(_Model):
    """`target.eks`: the AWS side of the EKS target."""

    region: Annotated[str, Pattern(r"[a-z]{2}(-[a-z]+)+-[0-9]")]
    """AWS region, e.g. `us-east-2`."""
    availability_zone: Annotated[str, Pattern(r"[a-z]{2}(-[a-z]+)+-[0-9][a-z]")]
    """Availability zone of the GPU capacity (the Capacity Blocks' or ODCR's zone); GPU nodes run
    only there."""
    secondary_availability_zone: Annotated[str, Pattern(r"[a-z]{2}(-[a-z]+)+-[0-9][a-z]")]
    """A second zone: the EKS control plane needs subnets in two zones; system nodes use both."""
    vpc_cidr: str = "10.64.0.0/16"
    """VPC IPv4 range, /16 or larger: two private /18s (pods take VPC IPs) and two public /24s
    are carved from it."""
    public_access_cidrs: list[str] = Field(default_factory=list)
    """CIDRs allowed to reach the public API endpoint; empty keeps the endpoint private only.
    0.0.0.0/0 is refused."""
    admin_principal_arns: list[Annotated[str, _PRINCIPAL_ARN]] = Field(default_factory=list)
    """IAM roles/users given cluster-admin through access entries (API authentication mode). The
    identity running `pulumi up` is an admin too."""
    cluster_log_types: list[LogType] = Field(default_factory=lambda: list(ALL_LOG_TYPES))
    """Control-plane log types sent to CloudWatch Logs."""
    load_balancer_scheme: Literal["internal", "internet-facing"] = "internal"
    """Scheme of the NLB in front of the Gateway's Service."""
    system_nodes: EksSystemNodesConfig = Field(default_factory=EksSystemNodesConfig)
    """The CPU node group."""
    gpu_nodes: Annotated[dict[str, EksGpuCapacityConfig], Field(min_length=1)]
    """Capacity per fleet node group, keyed by the names in `fleet.nodeGroups`."""


class EksTarget(TargetBase):
    """An EKS cluster with p5.48xlarge GPU node groups on EFA, created by the stack."""

    kind: Literal["eks"]
    eks: EksTargetConfig
    """kind eks: region and zones, VPC, API access, system nodes and GPU capacity (Capacity Blocks or an
    ODCR) per fleet node group."""


class _NodeGroup(Protocol):
    """The fields of a fleet node group (llmd_fleet.config.fleet.NodeGroupConfig) the rules read."""

    @property
    def count(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def nics_per_node(self) -> int: ...
    @property
    def host_memory_gib(self) -> int: ...
    @property
    def cpus_per_node(self) -> int: ...
    @property
    def node_labels(self) -> dict[str, str]: ...
    @property
    def accelerator_allocation(self) -> str: ...
    @property
    def nic_device_class(self) -> str | None: ...


def subnet_cidrs(vpc_cidr: str) -> dict[str, str]:
    """The VPC's four subnets: private /18s in the capacity and the secondary zone, public /24s
    (NAT gateway, internet-facing load balancers) behind them."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    quarters = list(vpc.subnets(new_prefix=vpc.prefixlen + 2))
    public = list(quarters[2].subnets(new_prefix=24))
    return {
        "private-capacity": str(quarters[0]),
        "private-secondary": str(quarters[1]),
        "public-capacity": str(public[0]),
        "public-secondary": str(public[1]),
    }


def eks_problems(
    eks: EksTargetConfig,
    node_groups: Mapping[str, _NodeGroup],
    path: Key,
    fleet_path: Key,
) -> list[Problem]:
    """Rules of the EKS section that span keys. `path` is the key path of `target.eks`,
    `fleet_path` that of `fleet.nodeGroups`."""
    problems: list[Problem] = []
    for key, zone in (
        ("availability_zone", eks.availability_zone),
        ("secondary_availability_zone", eks.secondary_availability_zone),
    ):
        if not zone.startswith(eks.region) or len(zone) != len(eks.region) + 1:
            problems.append(Problem(path.at(key), f"must be a zone of region {eks.region} (got {zone!r})"))
    if eks.availability_zone == eks.secondary_availability_zone:
        problems.append(
            Problem(
                path.at("secondary_availability_zone"),
                "must differ from availabilityZone: the EKS control plane needs subnets in two zones",
            )
        )
    try:
        vpc = ipaddress.ip_network(eks.vpc_cidr)
        if vpc.version != 4 or not 8 <= vpc.prefixlen <= 16:
            problems.append(
                Problem(path.at("vpc_cidr"), f"must be an IPv4 range of /8 to /16 (got {eks.vpc_cidr!r})")
            )
    except ValueError:
        problems.append(Problem(path.at("vpc_cidr"), f"not an IPv4 network address (got {eks.vpc_cidr!r})"))
    for i, cidr in enumerate(eks.public_access_cidrs):
        try:
            network = ipaddress.ip_network(cidr)
        except ValueError:
            problems.append(Problem(path.at("public_access_cidrs", i), f"not a CIDR (got {cidr!r})"))
            continue
        if network.prefixlen == 0:
            problems.append(
                Problem(
                    path.at("public_access_cidrs", i),
                    "must not open the API endpoint to the whole internet; list your networks, "
                    "or none for a private-only endpoint",
                )
            )
    for name in sorted(set(eks.gpu_nodes) - set(node_groups)):
        allowed = ", ".join(sorted(node_groups))
        problems.append(
            Problem(path.at("gpu_nodes", name), f"no fleet node group {name!r} (allowed: {allowed})")
        )
    for name, group in sorted(node_groups.items()):
        capacity = eks.gpu_nodes.get(name)
        if capacity is None:
            problems.append(
                Problem(
                    path.at("gpu_nodes"),
                    f"missing capacity for fleet node group {name!r} ({fleet_path}.{name})",
                )
            )
            continue
        problems += _group_problems(name, group, capacity, path.at("gpu_nodes", name), fleet_path.at(name))
    return problems


def _group_problems(
    name: str, group: _NodeGroup, capacity: EksGpuCapacityConfig, path: Key, group_path: Key
) -> list[Problem]:
    problems: list[Problem] = []
    shape = INSTANCE_SHAPES[capacity.instance_type]
    itype = capacity.instance_type
    if group.gpus_per_node != shape.gpus:
        problems.append(Problem(group_path.at("gpus_per_node"), f"{itype} has {shape.gpus} GPUs"))
    if group.nics_per_node != shape.efa_cards:
        problems.append(
            Problem(
                group_path.at("nics_per_node"),
                f"{itype} has {shape.efa_cards} EFA interfaces (got {group.nics_per_node})",
            )
        )
    if group.cpus_per_node > shape.vcpus:
        problems.append(
            Problem(
                group_path.at("cpus_per_node"), f"{itype} has {shape.vcpus} vCPUs (got {group.cpus_per_node})"
            )
        )
    if group.host_memory_gib > shape.memory_gib:
        problems.append(
            Problem(
                group_path.at("host_memory_gib"),
                f"{itype} has {shape.memory_gib} GiB (got {group.host_memory_gib})",
            )
        )
    if group.accelerator_allocation == "dra":
        if group.nic_device_class != EFA_DEVICE_CLASS:
            problems.append(
                Problem(
                    group_path.at("nic_device_class"),
                    f"must be {EFA_DEVICE_CLASS} on eks: the EFAs come from the aws-dranet driver "
                    f"(got {group.nic_device_class!r})",
                )
            )
        if group.node_labels.get(DRA_KUBELET_PLUGIN_LABEL) != "true":
            problems.append(
                Problem(
                    group_path.at("node_labels"),
                    f'must include {DRA_KUBELET_PLUGIN_LABEL}: "true": the NVIDIA DRA kubelet plugin '
                    "runs only on nodes with that label, and the node group applies it",
                )
            )
    if capacity.capacity == "capacity-block":
        if not capacity.capacity_blocks:
            problems.append(Problem(path.at("capacity_blocks"), "required when capacity is capacity-block"))
        for key, value in (
            ("reservation_id", capacity.reservation_id),
            ("placement_group", capacity.placement_group),
        ):
            if value is not None:
                problems.append(
                    Problem(
                        path.at(key),
                        "only with capacity odcr: Capacity Blocks name their reservations in "
                        "capacityBlocks and EC2 places them itself (no placement group)",
                    )
                )
        for i, block in enumerate(capacity.capacity_blocks):
            if block.instances > CAPACITY_BLOCK_MAX_INSTANCES:
                problems.append(
                    Problem(
                        path.at("capacity_blocks", i, "instances"),
                        f"a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES} instances; "
                        f"split {block.instances} over several blocks (got {block.instances})",
                    )
                )
        ids = [b.reservation_id for b in capacity.capacity_blocks]
        if len(set(ids)) != len(ids):
            problems.append(
                Problem(path.at("capacity_blocks"), f"reservation ids must be unique (got {ids})")
            )
        total = sum(b.instances for b in capacity.capacity_blocks)
        if capacity.capacity_blocks and total != group.count:
            problems.append(
                Problem(
                    path.at("capacity_blocks"),
                    f"instances add up to {total}, but node group {name!r} has count {group.count}",
                )
            )
    else:
        if capacity.capacity_blocks:
            problems.append(Problem(path.at("capacity_blocks"), "only with capacity capacity-block"))
        if (capacity.reservation_id is None) != (capacity.placement_group is None):
            problems.append(
                Problem(
                    path.at("placement_group"),
                    "set reservationId and placementGroup together (an existing ODCR and the cluster "
                    "placement group it was made in), or neither (the stack creates both)",
                )
            )
    return problems


# The kind's section of `llmd-fleet:responses` (`responses.database.eks`), read through its
# `TargetSpec.responses` (llmd_fleet/targets/eks/rules.py).


class ResponsesEksDatabaseConfig(ConfigModel):
    """RDS for PostgreSQL on the eks target: Multi-AZ, encrypted, in two private subnets of its
    own, reachable only from the cluster's security group."""

    instance_class: RdsInstanceClass = "db.m7g.large"
    """DB instance class (default db.m7g.large: 2 vCPUs, 8 GiB)."""


def database_subnet_cidrs(vpc_cidr: str) -> dict[str, str]:
    """eks: the two /24 subnets of the RDS instance, first of the VPC's fourth quarter (the first
    three hold the node and public subnets, llmd_fleet/targets/eks/config.py subnet_cidrs), one in the
    capacity zone and one in the secondary zone (Multi-AZ needs two)."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    quarter = list(vpc.subnets(new_prefix=vpc.prefixlen + 2))[3]
    first, second = list(quarter.subnets(new_prefix=24))[:2]
    return {"database-capacity": str(first), "database-secondary": str(second)}
