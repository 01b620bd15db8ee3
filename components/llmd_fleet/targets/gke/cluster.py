"""GKE target: the networks, the cluster and its node pools, and the Kubernetes provider for it.

Components (each usable on its own):

- `GkeNetwork` (`llmd-fleet:cluster:GkeNetwork`): the primary VPC and subnet with pod/service
  ranges, Cloud Router + NAT for private nodes, the proxy-only subnet of the regional internal
  gateway, and one VPC + subnet + internal-allow firewall per GPU NIC (MTU for TCPXO).
- `GkeNodePool` (`llmd-fleet:cluster:GkeNodePool`): one single-zone A3 pool: accelerators with
  GKE's driver installation off (GPU DRA), gVNIC, COS containerd, the additional node networks,
  local NVMe, DRA labels, the `nvidia.com/gpu` taint, and its capacity source.
- `GkeCluster` (`llmd-fleet:cluster:GkeCluster`): network, node service account, the protected
  Standard cluster, the system pool, one `GkeNodePool` per fleet node group, and `provider`.

Cloud resources use the typed pulumi_gcp argument classes, so an unknown argument is an error.
Nothing here reads the serving config: changing roles never touches the fleet's cloud inputs.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from llmd_fleet.config.fleet import NodeGroupConfig
from llmd_fleet.conventions import GPU_TAINT_KEY
from llmd_fleet.targets.gke.config import (
    MACHINE_SHAPES,
    GkeMaintenanceWindow,
    GkeNodePoolConfig,
    GkeTargetConfig,
    compact_placement,
)
from llmd_fleet.versions import versions

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
# GKE DRA labels: no GKE device plugin on the node, the NVIDIA DRA kubelet plugin's affinity,
# and autoscaling for pods with ResourceClaims.
DRA_NODE_LABELS = {
    "gke-no-default-nvidia-gpu-device-plugin": "true",
    "nvidia.com/gpu.present": "true",
    "cloud.google.com/gke-nvidia-gpu-dra-driver": "true",
}
NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
)
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True)
class GpuNetworkNames:
    vpc: str
    subnet: str


def gpu_network_names(cluster_name: str, count: int) -> list[GpuNetworkNames]:
    """GCP names of the GPU VPCs and subnets, in NIC order (eth1 first)."""
    return [
        GpuNetworkNames(f"{cluster_name}-gpu-{i}", f"{cluster_name}-gpu-{i}-subnet") for i in range(count)
    ]


class GkeNetworkArgs(TypedDict):
    """Arguments of `GkeNetwork`."""

    gke: GkeTargetConfig
    """`target.gke`; `name`, `project` and `region` place and name the networks, `network` gives
    their address ranges, GPU subnets and GPU MTU."""


class GkeNetwork(pulumi.ComponentResource):
    """Primary VPC for nodes, pods and services; one VPC per GPU NIC."""

    network: gcp.compute.Network
    subnet: gcp.compute.Subnetwork
    gpu_networks: list[tuple[gcp.compute.Network, gcp.compute.Subnetwork]]

    def __init__(self, name: str, args: GkeNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:cluster:GkeNetwork", name, {}, opts)
        gke = args["gke"]
        net, project, region = gke.network, gke.project, gke.region
        child = pulumi.ResourceOptions(parent=self)
        self.network = gcp.compute.Network(
            f"{name}-primary",
            name=gke.name,
            project=project,
            auto_create_subnetworks=False,
            opts=child,
        )
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-primary-subnet",
            name=f"{gke.name}-nodes",
            project=project,
            region=region,
            network=self.network.id,
            ip_cidr_range=net.node_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE, ip_cidr_range=net.pod_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=SERVICES_RANGE, ip_cidr_range=net.service_cidr
                ),
            ],
            opts=child,
        )
        # The regional internal Application Load Balancer (gke-l7-rilb) runs its proxies here.
        gcp.compute.Subnetwork(
            f"{name}-proxy-only-subnet",
            name=f"{gke.name}-proxy-only",
            project=project,
            region=region,
            network=self.network.id,
            ip_cidr_range=net.proxy_only_cidr,
            purpose="REGIONAL_MANAGED_PROXY",
            role="ACTIVE",
            opts=child,
        )
        router = gcp.compute.Router(
            f"{name}-router",
            name=f"{gke.name}-router",
            project=project,
            region=region,
            network=self.network.id,
            opts=child,
        )
        # Private nodes reach registries and Hugging Face through Cloud NAT.
        gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{gke.name}-nat",
            project=project,
            region=region,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            opts=child,
        )
        self.gpu_networks = []
        names = gpu_network_names(gke.name, len(net.gpu_subnet_cidrs))
        for i, (names_i, cidr) in enumerate(zip(names, net.gpu_subnet_cidrs, strict=True)):
            vpc = gcp.compute.Network(
                f"{name}-gpu-{i}",
                name=names_i.vpc,
                project=project,
                auto_create_subnetworks=False,
                mtu=net.gpu_mtu,
                opts=child,
            )
            subnet = gcp.compute.Subnetwork(
                f"{name}-gpu-{i}-subnet",
                name=names_i.subnet,
                project=project,
                region=region,
                network=vpc.id,
                ip_cidr_range=cidr,
                opts=child,
            )
            gcp.compute.Firewall(
                f"{name}-gpu-{i}-internal",
                name=f"{names_i.vpc}-internal",
                project=project,
                network=vpc.id,
                allows=[
                    gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                    gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                    gcp.compute.FirewallAllowArgs(protocol="icmp"),
                ],
                source_ranges=[cidr],
                opts=child,
            )
            self.gpu_networks.append((vpc, subnet))
        self.register_outputs({"network": self.network.id})


class GkeNodePoolArgs(TypedDict):
    """Arguments of `GkeNodePool`. Every key is required."""

    pool_name: str
    """GKE node pool name (the fleet node group's name)."""
    cluster: pulumi.Input[str]
    """The cluster's name."""
    project: str
    """Google Cloud project id."""
    region: str
    """The cluster's region (the pool's location)."""
    zone: str
    """The pool's one node location."""
    node_count: int
    """Fixed node count, or the autoscaling maximum with flex-start or queued provisioning."""
    pool: GkeNodePoolConfig
    """The pool's capacity and placement settings (`GkeNodePoolConfig`: machine type, reservation or
    DWS, placement, disks)."""
    node_labels: dict[str, str]
    """Node labels besides the DRA labels (the fleet node group's nodeLabels)."""
    gpu_networks: list[tuple[pulumi.Input[str], pulumi.Input[str]]]
    """(VPC, subnet) names of each additional node network, in NIC order."""
    service_account: pulumi.Input[str]
    """The nodes' service account (email)."""


def node_pool_labels(extra: dict[str, str]) -> dict[str, str]:
    return dict(sorted({**DRA_NODE_LABELS, **extra}.items()))


class GkeNodePool(pulumi.ComponentResource):
    """One single-zone A3 GPU node pool, DRA-ready, on its capacity source."""

    node_pool: gcp.container.NodePool

    def __init__(self, name: str, args: GkeNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:cluster:GkeNodePool", name, {}, opts)
        pool = args["pool"]
        shape = MACHINE_SHAPES[pool.machine_type]
        dws = pool.flex_start or pool.queued_provisioning
        if pool.reservation is not None:
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[pool.reservation],
            )
        else:
            # DWS capacity must not consume reservations; on-demand takes any matching one.
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="NO_RESERVATION" if dws else "ANY_RESERVATION"
            )
        self.node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=args["pool_name"],
            project=args["project"],
            cluster=args["cluster"],
            location=args["region"],
            node_locations=[args["zone"]],
            node_count=None if dws else args["node_count"],
            autoscaling=(
                gcp.container.NodePoolAutoscalingArgs(
                    total_min_node_count=0, total_max_node_count=args["node_count"], location_policy="ANY"
                )
                if dws
                else None
            ),
            max_pods_per_node=pool.max_pods_per_node,
            management=gcp.container.NodePoolManagementArgs(
                # Flex-start nodes are not repaired: a repaired node would be new capacity.
                auto_repair=not pool.flex_start,
                auto_upgrade=True,
            ),
            # No spare GPU capacity to surge into: upgrade one node at a time in place. Each node
            # drained evicts one serving pod, which takes its LWS group down; the role's
            # PodDisruptionBudget then refuses the next eviction in that role until the group
            # serves again, and GKE keeps the drain within the budget ("Disruption stays within
            # the limits of PodDisruptionBudget", container.v1 NodePool.UpgradeSettings). No
            # blue-green: it needs a second pool's worth of GPUs (docs/disruptions.md).
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=0, max_unavailable=1
            ),
            placement_policy=(
                gcp.container.NodePoolPlacementPolicyArgs(
                    type="COMPACT", policy_name=pool.placement_policy_name
                )
                if compact_placement(pool)
                else None
            ),
            queued_provisioning=(
                gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
                if pool.queued_provisioning
                else None
            ),
            network_config=gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                        network=vpc, subnetwork=subnet
                    )
                    for vpc, subnet in args["gpu_networks"]
                ],
            ),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=pool.machine_type,
                image_type="COS_CONTAINERD",
                disk_size_gb=pool.disk_size_gb,
                guest_accelerators=[
                    gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                        type=shape.accelerator_type,
                        count=shape.gpus,
                        # GPU DRA: GKE installs no driver; the stack's COS driver DaemonSet does.
                        gpu_driver_installation_config=(
                            gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                                gpu_driver_version="INSTALLATION_DISABLED"
                            )
                        ),
                    )
                ],
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                reservation_affinity=affinity,
                flex_start=True if pool.flex_start else None,
                max_run_duration=(
                    f"{pool.max_run_duration_seconds}s" if pool.max_run_duration_seconds is not None else None
                ),
                local_nvme_ssd_block_config=(
                    gcp.container.NodePoolNodeConfigLocalNvmeSsdBlockConfigArgs(
                        local_ssd_count=pool.local_ssd_count
                    )
                    if pool.local_ssd_count
                    else None
                ),
                labels=node_pool_labels(args["node_labels"]),
                taints=[
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=GPU_TAINT_KEY, value="present", effect="NO_SCHEDULE"
                    )
                ],
                service_account=args["service_account"],
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"nodePool": self.node_pool.name})


# Any past date: GKE repeats the window by its recurrence rule, taking the time of day and the
# length from start and end. 2026-01-03 is a Saturday.
_WINDOW_ANCHOR = datetime(2026, 1, 3, tzinfo=UTC)


def maintenance_policy(
    window: GkeMaintenanceWindow | None,
) -> gcp.container.ClusterMaintenancePolicyArgs | None:
    """The cluster's recurring maintenance window (RFC 3339 start and end, an RRULE recurrence)."""
    if window is None:
        return None
    hour, minute = (int(part) for part in window.start.split(":"))
    start = _WINDOW_ANCHOR + timedelta(hours=hour, minutes=minute)
    end = start + timedelta(hours=window.duration_hours)
    return gcp.container.ClusterMaintenancePolicyArgs(
        recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
            start_time=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            end_time=end.strftime("%Y-%m-%dT%H:%M:%SZ"),
            recurrence=f"FREQ=WEEKLY;BYDAY={','.join(window.days)}",
        )
    )


def kubeconfig(name: str, endpoint: str | None, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin (no static credentials)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": "gcloud components install gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
        }
    }
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
            }
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return yaml.safe_dump(document, sort_keys=False)


class GkeClusterArgs(TypedDict):
    """Arguments of `GkeCluster`. Nothing else of the stack reaches the cluster, so a serving change
    never touches a node pool."""

    gke: GkeTargetConfig
    """The `target.gke` section (project, location, networks, pools)."""
    node_groups: Mapping[str, NodeGroupConfig]
    """`fleet.nodeGroups`: counts and node labels of the GPU groups, one `GkeNodePool` per group
    (each needs its `target.gke.nodePools` entry; ValueError otherwise)."""


class GkeCluster(pulumi.ComponentResource):
    """Network, a protected GKE Standard cluster, its system and GPU pools, and a provider."""

    network: GkeNetwork
    cluster: gcp.container.Cluster
    node_pools: dict[str, GkeNodePool]
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    """Secret."""
    gpu_network_names: list[GpuNetworkNames]
    accelerators: list[str]

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:cluster:GkeCluster", name, {}, opts)
        gke, groups = args["gke"], args["node_groups"]
        unknown = sorted(set(groups) - set(gke.node_pools))
        if unknown:
            raise ValueError(f"GkeCluster {name}: no target.gke.nodePools entry for node groups {unknown}")
        child = pulumi.ResourceOptions(parent=self)
        net = gke.network
        self.network = GkeNetwork(f"{name}-network", {"gke": gke}, opts=child)
        self.gpu_network_names = gpu_network_names(gke.name, len(net.gpu_subnet_cidrs))
        account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=f"{gke.name}-nodes"[:30],
            project=gke.project,
            display_name=f"{gke.name} GKE nodes",
            opts=child,
        )
        for role in NODE_ROLES:
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.rsplit('/', 1)[1].replace('.', '-').lower()}",
                project=gke.project,
                role=role,
                member=account.member,
                opts=child,
            )
        authorized = (
            gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=c)
                    for c in net.master_authorized_cidrs
                ]
            )
            if net.master_authorized_cidrs
            else None
        )
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=gke.name,
            project=gke.project,
            location=gke.region,
            network=self.network.network.id,
            subnetwork=self.network.subnet.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=PODS_RANGE, services_secondary_range_name=SERVICES_RANGE
            ),
            # Dataplane V2 and multi-networking: pods attach the GPU NICs as eth1..ethN. Dataplane
            # V2 also enforces the serving namespace's NetworkPolicies: enforcement is built in,
            # GKE's separate (Calico) network_policy setting is for the legacy dataplane only.
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=True,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=gke.release_channel),
            # Release-channel upgrades (control plane, then the node pools) start only inside it.
            maintenance_policy=maintenance_policy(gke.maintenance_window),
            min_master_version=versions().kubernetes.gke,
            remove_default_node_pool=True,
            initial_node_count=1,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{gke.project}.svc.id.goog"
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=net.master_cidr,
            ),
            master_authorized_networks_config=authorized,
            gateway_api_config=gcp.container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD"),
            deletion_protection=True,
            # The cluster holds the whole fleet: never deleted or replaced by accident.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        gcp.container.NodePool(
            f"{name}-system",
            name="system",
            project=gke.project,
            cluster=self.cluster.name,
            location=gke.region,
            node_locations=[gke.zone],
            node_count=gke.system_pool.node_count,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=gke.system_pool.machine_type,
                image_type="COS_CONTAINERD",
                disk_size_gb=gke.system_pool.disk_size_gb,
                service_account=account.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            opts=child,
        )
        gpu_networks: list[tuple[pulumi.Input[str], pulumi.Input[str]]] = [
            (vpc.name, subnet.name) for vpc, subnet in self.network.gpu_networks
        ]
        self.node_pools = {}
        for group_name, group in sorted(groups.items()):
            pool = gke.node_pools[group_name]
            self.node_pools[group_name] = GkeNodePool(
                f"{name}-{group_name}",
                {
                    "pool_name": group_name,
                    "cluster": self.cluster.name,
                    "project": gke.project,
                    "region": gke.region,
                    "zone": gke.zone,
                    "node_count": group.count,
                    "pool": pool,
                    "node_labels": group.node_labels,
                    "gpu_networks": gpu_networks,
                    "service_account": account.email,
                },
                opts=child,
            )
        self.accelerators = sorted(
            {MACHINE_SHAPES[p.machine_type].accelerator_type for p in gke.node_pools.values()}
        )
        ca = self.cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate if auth else None)
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.endpoint, ca).apply(lambda a: kubeconfig(gke.name, a[0], a[1]))
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.node_pools.values())),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "cluster": self.cluster.name})
