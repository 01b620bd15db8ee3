"""The target kinds: each kind's pure half (`SPECS`) and the module of its Pulumi half (`BUILDS`,
imported only for a stack of that kind, so the on-prem path loads no cloud SDK). Adding a target is
a folder under targets/ and one line in each table. Pure."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmd_fleet.core.fabric import Fabric
from llmd_fleet.core.netpol import ClusterRanges
from llmd_fleet.targets.base import ResponsesStore, TargetSpec
from llmd_fleet.targets.eks import fabric as eks_fabric
from llmd_fleet.targets.eks.config import EksTarget, ResponsesEksDatabaseConfig
from llmd_fleet.targets.eks.rules import (
    eks_cluster_ranges,
    eks_database_peers,
    eks_system_pool,
    eks_target_problems,
)
from llmd_fleet.targets.gke import fabric as gke_fabric
from llmd_fleet.targets.gke.config import MANAGED_GATEWAY, GkeTarget, ResponsesGkeDatabaseConfig
from llmd_fleet.targets.gke.rules import (
    gke_cluster_ranges,
    gke_database_peers,
    gke_defaults,
    gke_gateway_address,
    gke_responses_problems,
    gke_system_pool,
    gke_target_problems,
)
from llmd_fleet.targets.local import fabric as local_fabric
from llmd_fleet.targets.local.config import LocalTarget
from llmd_fleet.targets.local.rules import local_defaults, local_problems, local_target_problems
from llmd_fleet.targets.onprem import fabric as onprem_fabric
from llmd_fleet.targets.onprem.config import OnPremTarget, ResponsesOnpremDatabaseConfig
from llmd_fleet.targets.onprem.rules import backup_endpoint_problems, onprem_problems
from llmd_fleet.targets.rules import existing_cluster_ranges, gpu_fleet_problems

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# The NIC line rates are per target: ConnectX-7 (400 GbE / NDR) on-prem; A3 Mega has 8 GPU NICs
# for 1,600 Gb/s; p5.48xlarge has 32 EFA for 3,200 Gb/s (shared/reference/cluster.md). kind local
# has no GPU fabric: its nominal 10 Gb/s only fills the field (no KV moves over NIXL). Who scrapes
# when `observability.prometheus` is unset: GKE's managed collection (Managed Service for
# Prometheus) is on by default there; a laptop's kind cluster has no prometheus-operator, so
# nothing is scraped unless asked; elsewhere a prometheus-operator.
SPECS: dict[str, TargetSpec] = {
    spec.kind: spec
    for spec in (
        TargetSpec(
            kind="onprem",
            config=OnPremTarget,
            fabric=onprem_fabric.INFINIBAND,
            nic_gbps=400,
            prometheus="operator",
            problems=onprem_problems,
            cluster_ranges=existing_cluster_ranges,
            fleet_problems=gpu_fleet_problems,
            section="onprem",
            responses=ResponsesStore(
                "onprem",
                managed=False,
                settings=ResponsesOnpremDatabaseConfig,
                settings_doc="kind onprem: CloudNativePG settings (ResponsesOnpremDatabaseConfig's "
                "defaults when unset).",
                problems=backup_endpoint_problems,
            ),
            components=("llmd_fleet.targets.onprem.cluster:OnPremCluster",),
        ),
        TargetSpec(
            kind="gke",
            config=GkeTarget,
            fabric=gke_fabric.TCPXO,
            nic_gbps=200,
            prometheus="gmp",
            problems=gke_target_problems,
            cluster_ranges=gke_cluster_ranges,
            fleet_problems=gpu_fleet_problems,
            defaults=gke_defaults,
            section="gke",
            creates_cluster=True,
            system_pool=gke_system_pool,
            platform_gateways=(MANAGED_GATEWAY,),
            platform_prometheus=(("gmp", "Managed Service for Prometheus"),),
            image_registry="the build pushes to Artifact Registry",
            responses=ResponsesStore(
                "gke",
                managed=True,
                settings=ResponsesGkeDatabaseConfig,
                settings_doc="kind gke: Cloud SQL settings (ResponsesGkeDatabaseConfig's defaults "
                "when unset).",
                problems=gke_responses_problems,
                peers=gke_database_peers,
                gateway_address=gke_gateway_address,
            ),
            sdk_extra=("gcp", "pulumi-gcp", "pulumi_gcp"),
            components=(
                "llmd_fleet.targets.gke.cluster:GkeCluster",
                "llmd_fleet.targets.gke.cluster:GkeNetwork",
                "llmd_fleet.targets.gke.cluster:GkeNodePool",
                "llmd_fleet.targets.gke.tcpxo:TcpxoNodeSetup",
                "llmd_fleet.targets.gke.database:GkeResponses",
            ),
        ),
        TargetSpec(
            kind="eks",
            config=EksTarget,
            fabric=eks_fabric.EFA,
            nic_gbps=100,
            prometheus="operator",
            problems=eks_target_problems,
            cluster_ranges=eks_cluster_ranges,
            fleet_problems=gpu_fleet_problems,
            section="eks",
            creates_cluster=True,
            system_pool=eks_system_pool,
            image_registry="the build pushes to ECR",
            responses=ResponsesStore(
                "eks",
                managed=True,
                settings=ResponsesEksDatabaseConfig,
                settings_doc="kind eks: RDS settings (ResponsesEksDatabaseConfig's defaults when unset).",
                peers=eks_database_peers,
            ),
            upstream_fabric=eks_fabric.VPC_TCP,
            sdk_extra=("aws", "pulumi-aws", "pulumi_aws"),
            components=(
                "llmd_fleet.targets.eks.cluster:EksCluster",
                "llmd_fleet.targets.eks.cluster:EksGpuCapacity",
                "llmd_fleet.targets.eks.cluster:EksIam",
                "llmd_fleet.targets.eks.cluster:EksNetwork",
                "llmd_fleet.targets.eks.cluster:EksSystemNodes",
                "llmd_fleet.targets.eks.database:EksResponses",
            ),
        ),
        TargetSpec(
            kind="local",
            config=LocalTarget,
            fabric=local_fabric.LOCAL,
            nic_gbps=10,
            prometheus="none",
            problems=local_target_problems,
            cluster_ranges=existing_cluster_ranges,
            fleet_problems=local_problems,
            defaults=local_defaults,
            section="onprem",
            simulated=True,
            image_registry="nothing is built there (the simulator image is pinned)",
        ),
    )
}
"""Every target kind, in the order the stack's `target` union lists them (the config reference
and an unknown kind's error name them in this order)."""
BUILDS: dict[str, str] = {
    "onprem": "llmd_fleet.targets.onprem.build",
    "gke": "llmd_fleet.targets.gke.build",
    "eks": "llmd_fleet.targets.eks.build",
    "local": "llmd_fleet.targets.onprem.build",
}
"""kind -> the module whose `declare(config, secrets, parent)` creates (or reaches) the cluster."""


def fabric_for(target_kind: str, image_build: bool = True) -> Fabric:
    """The fabric of a target kind (one per kind: a target's GPU network is fixed by its machines),
    except with the upstream image (`image_build` false: `images.build`) on a kind whose fabric
    that image cannot drive (`TargetSpec.upstream_fabric`: eks, whose KV then moves over TCP)."""
    spec = SPECS[target_kind]
    if not image_build and spec.upstream_fabric is not None:
        return spec.upstream_fabric
    return spec.fabric


def cluster_ranges(config: "StackConfig") -> ClusterRanges:
    """The cluster's address ranges, from the target kind (llmd_fleet/targets/<kind>/rules.py)."""
    return SPECS[config.target.kind].cluster_ranges(config)


def kinds_where(present: "Callable[[TargetSpec], bool]") -> tuple[str, ...]:
    """The kinds, in registry order, whose spec satisfies `present`."""
    return tuple(kind for kind, spec in SPECS.items() if present(spec))


def _section_kinds() -> dict[str, str]:
    owners: dict[str, list[str]] = {}
    for kind, spec in SPECS.items():
        if spec.section is not None:
            owners.setdefault(spec.section, []).append(kind)
    return {section: " or ".join(kinds) for section, kinds in owners.items()}


SECTION_KINDS = _section_kinds()
"""`target.<section>` -> the kinds that have it ("onprem or local"): a section under another kind
is refused by name, not as a bare unknown key."""
