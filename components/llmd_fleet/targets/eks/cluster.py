"""EKS target: the VPC, IAM, EKS cluster, core add-ons and the p5.48xlarge GPU node groups with
their 32 EFA interfaces, and a Kubernetes provider for everything above them.

Capacity comes from Capacity Blocks (one launch template and managed node group per block, at most
64 instances each) or from an On-Demand Capacity Reservation in a cluster placement group. Every
input here is derived from `target.eks` and `fleet.nodeGroups` only: serving settings never reach
a cloud resource, so a serving change never replaces a node.

The pure builders (`p5_network_interfaces`, `node_user_data`, `kubeconfig_text`, the trust
policies) are tested directly; `EksCluster` is the wiring, in child components by concern:
network, IAM, system nodes and GPU capacity.
"""

import base64
import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from llmd_fleet.config.fleet import NodeGroupConfig
from llmd_fleet.conventions import GPU_TAINT_KEY
from llmd_fleet.targets.eks.config import (
    INSTANCE_SHAPES,
    EksGpuCapacityConfig,
    EksSystemNodesConfig,
    EksTargetConfig,
    subnet_cidrs,
)

GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
"""EKS-optimized AL2023 with the NVIDIA driver, container toolkit and EFA host components; no
device plugins (GPUs and EFAs come through DRA)."""
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
ROOT_DEVICE = "/dev/xvda"
"""Root device name of the EKS AL2023 AMIs."""
NODE_GROUP_LABEL = "llmd-fleet.io/node-group"
CAPACITY_LABEL = "llmd-fleet.io/capacity"
ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns")
"""EKS managed add-ons, pinned in images/versions.toml [software] as `eks-addon-<name>`."""
ADDON_CONFIGURATION = {
    # The VPC CNI enforces NetworkPolicies (llmd_fleet/security/isolation.py) only with its network
    # policy agent turned on (EKS user guide, "Configure your cluster for Kubernetes network
    # policies"; VPC CNI 1.14 or newer).
    "vpc-cni": json.dumps({"enableNetworkPolicy": "true"}),
}
"""Add-on configuration values (JSON), by add-on name; the rest keep their defaults."""

_PARTITION = "aws"
CLUSTER_POLICIES = (f"arn:{_PARTITION}:iam::aws:policy/AmazonEKSClusterPolicy",)
NODE_POLICIES = (
    f"arn:{_PARTITION}:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    f"arn:{_PARTITION}:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    # The VPC CNI runs with the node's role (no pod identity for aws-node).
    f"arn:{_PARTITION}:iam::aws:policy/AmazonEKS_CNI_Policy",
    f"arn:{_PARTITION}:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
CLUSTER_ADMIN_POLICY = f"arn:{_PARTITION}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def _trust_policy(service: str, actions: tuple[str, ...]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions)}],
        },
        sort_keys=True,
    )


CLUSTER_TRUST_POLICY = _trust_policy("eks.amazonaws.com", ("sts:AssumeRole", "sts:TagSession"))
NODE_TRUST_POLICY = _trust_policy("ec2.amazonaws.com", ("sts:AssumeRole",))


def p5_network_interfaces(
    security_groups: pulumi.Input[list[str]],
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """The p5.48xlarge network-card layout: card 0 device 0 is the primary ENA interface (an
    efa-only interface cannot be primary), card 0 device 1 and device 0 of cards 1..31 are
    efa-only (no IP addresses, so the subnet only pays for the primary interface) = 32 EFA."""
    cards = INSTANCE_SHAPES["p5.48xlarge"].efa_cards

    def interface(card: int, device: int, kind: str) -> aws.ec2.LaunchTemplateNetworkInterfaceArgs:
        return aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=device,
            interface_type=kind,
            security_groups=security_groups,
            delete_on_termination="true",
        )

    return [
        interface(0, 0, "interface"),
        interface(0, 1, "efa-only"),
        *(interface(card, 0, "efa-only") for card in range(1, cards)),
    ]


def node_user_data(instance_store_raid0: bool) -> str | None:
    """Base64 MIME user data with a nodeadm NodeConfig that stripes the NVMe instance store and
    moves kubelet and containerd onto it; EKS merges its own NodeConfig part into it."""
    if not instance_store_raid0:
        return None
    boundary = "==LLMDFLEET=="
    text = "\n".join(
        [
            "MIME-Version: 1.0",
            f'Content-Type: multipart/mixed; boundary="{boundary}"',
            "",
            f"--{boundary}",
            "Content-Type: application/node.eks.aws",
            "",
            "apiVersion: node.eks.aws/v1alpha1",
            "kind: NodeConfig",
            "spec:",
            "  instance:",
            "    localStorage:",
            "      strategy: RAID0",
            "",
            f"--{boundary}--",
            "",
        ]
    )
    return base64.b64encode(text.encode()).decode()


def kubeconfig_text(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (the caller's AWS credentials)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": [
                "eks",
                "get-token",
                "--cluster-name",
                cluster_name,
                "--region",
                region,
                "--output",
                "json",
            ],
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}
            ],
            "users": [{"name": cluster_name, "user": user}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
        },
        sort_keys=True,
    )


def _template_version(version: int | None) -> str:
    # The node group follows the template's newest version; a new template starts at 1 (offline
    # renders see no version yet).
    return str(int(version)) if version is not None else "1"


def _metadata_options() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    # IMDSv2 only; one hop keeps pods off the node's credentials (host-network daemons still reach it).
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
    )


def _root_volume(size_gib: int) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgs:
    return aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name=ROOT_DEVICE,
        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
            volume_size=size_gib,
            volume_type="gp3",
            iops=16000,
            throughput=1000,
            encrypted="true",
            delete_on_termination="true",
        ),
    )


def _moved_from(component: pulumi.Resource | None) -> pulumi.ResourceOptions:
    """Options of a resource that lived directly under `component` before the cluster was split
    into child components: the alias keeps its state (its old URN) instead of replacing it."""
    return pulumi.ResourceOptions(aliases=[pulumi.Alias(parent=component)] if component else None)


class _EksPart(pulumi.ComponentResource):
    """A child component of `EksCluster`. Its resources keep the names, and through aliases the
    state, they had when they were direct children of the cluster component."""

    def __init__(self, type_name: str, name: str, opts: pulumi.ResourceOptions | None) -> None:
        super().__init__(f"llmd-fleet:cluster:{type_name}", name, {}, opts)
        self._moved = _moved_from(opts.parent if opts is not None else None)

    def _opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self._moved, pulumi.ResourceOptions(parent=self, **kwargs))


class EksNetworkArgs(TypedDict):
    """Arguments of `EksNetwork`. Every key is required."""

    eks: EksTargetConfig
    """The `target.eks` section (VPC CIDR, capacity and secondary zones)."""
    cluster_name: str
    """The EKS cluster name; it names the subnets and tags them for load-balancer discovery."""
    tags: dict[str, str]
    """Tags on every resource."""


class EksNetwork(_EksPart):
    """The fleet's VPC: private subnets for nodes (the capacity zone and a second zone the control
    plane needs), public subnets for the NAT gateway and internet-facing load balancers, one NAT
    gateway, and the EFA security group."""

    vpc: aws.ec2.Vpc
    private_subnets: dict[str, aws.ec2.Subnet]
    """Private subnets by zone role (`capacity`, `secondary`)."""
    public_subnets: dict[str, aws.ec2.Subnet]
    efa_security_group: aws.ec2.SecurityGroup
    """EFA's SRD traffic must be allowed to and from the group itself."""

    def __init__(self, name: str, args: EksNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("EksNetwork", name, opts)
        eks, cluster_name, tags = args["eks"], args["cluster_name"], args["tags"]
        cidrs = subnet_cidrs(eks.vpc_cidr)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=eks.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": cluster_name},
            opts=self._opts(),
        )
        self.vpc = vpc
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=self._opts())
        zones = {"capacity": eks.availability_zone, "secondary": eks.secondary_availability_zone}
        cluster_tag = {f"kubernetes.io/cluster/{cluster_name}": "shared"}
        self.public_subnets, self.private_subnets = {}, {}
        for role, zone in zones.items():
            for scope, lb_role in (("public", "elb"), ("private", "internal-elb")):
                subnets = self.public_subnets if scope == "public" else self.private_subnets
                subnets[role] = aws.ec2.Subnet(
                    f"{name}-{scope}-{role}",
                    vpc_id=vpc.id,
                    cidr_block=cidrs[f"{scope}-{role}"],
                    availability_zone=zone,
                    map_public_ip_on_launch=False if scope == "public" else None,
                    tags={
                        **tags,
                        **cluster_tag,
                        "Name": f"{cluster_name}-{scope}-{zone}",
                        f"kubernetes.io/role/{lb_role}": "1",
                    },
                    opts=self._opts(),
                )
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags,
            opts=self._opts(),
        )
        # One NAT gateway, in the capacity zone where the GPU nodes pull images and weights.
        nat_ip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tags, opts=self._opts())
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=nat_ip.id,
            subnet_id=self.public_subnets["capacity"].id,
            tags=tags,
            opts=self._opts(depends_on=[igw]),
        )
        private_routes = aws.ec2.RouteTable(
            f"{name}-private-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=tags,
            opts=self._opts(),
        )
        for role in zones:
            for scope, subnets, table in (
                ("public", self.public_subnets, public_routes),
                ("private", self.private_subnets, private_routes),
            ):
                aws.ec2.RouteTableAssociation(
                    f"{name}-{scope}-{role}-routes",
                    subnet_id=subnets[role].id,
                    route_table_id=table.id,
                    opts=self._opts(),
                )

        self.efa_security_group = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=vpc.id,
            description="EFA: all traffic to and from members of this group",
            tags={**tags, "Name": f"{cluster_name}-efa"},
            opts=self._opts(),
        )
        group_id = self.efa_security_group.id
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-ingress-self",
            security_group_id=group_id,
            referenced_security_group_id=group_id,
            ip_protocol="-1",
            description="EFA from group members",
            opts=self._opts(),
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-egress-self",
            security_group_id=group_id,
            referenced_security_group_id=group_id,
            ip_protocol="-1",
            description="EFA to group members",
            opts=self._opts(),
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-egress-all",
            security_group_id=group_id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="Node egress (images, weights, AWS APIs)",
            opts=self._opts(),
        )
        self.register_outputs({"vpcId": vpc.id})

    @property
    def node_subnet_ids(self) -> list[pulumi.Output[str]]:
        """The private subnets of both zones (the control plane and the system nodes)."""
        return [self.private_subnets["capacity"].id, self.private_subnets["secondary"].id]


class EksIamArgs(TypedDict):
    """Arguments of `EksIam`."""

    tags: dict[str, str]
    """Tags on both roles."""


class EksIam(_EksPart):
    """The cluster role (CLUSTER_POLICIES) and the node role every node group uses (NODE_POLICIES)."""

    cluster_role: aws.iam.Role
    node_role: aws.iam.Role
    cluster_attachments: list[aws.iam.RolePolicyAttachment]
    """The cluster role's policies: the cluster waits for them."""
    node_attachments: list[aws.iam.RolePolicyAttachment]
    """The node role's policies: node groups wait for them."""

    def __init__(self, name: str, args: EksIamArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("EksIam", name, opts)
        tags = args["tags"]

        def role(role_name: str, trust: str, policies: tuple[str, ...]) -> tuple[aws.iam.Role, list[Any]]:
            created = aws.iam.Role(
                f"{name}-{role_name}", assume_role_policy=trust, tags=tags, opts=self._opts()
            )
            attachments = [
                aws.iam.RolePolicyAttachment(
                    f"{name}-{role_name}-{arn.rsplit('/', 1)[1]}",
                    role=created.name,
                    policy_arn=arn,
                    opts=self._opts(),
                )
                for arn in policies
            ]
            return created, attachments

        self.cluster_role, self.cluster_attachments = role(
            "cluster-role", CLUSTER_TRUST_POLICY, CLUSTER_POLICIES
        )
        self.node_role, self.node_attachments = role("node-role", NODE_TRUST_POLICY, NODE_POLICIES)
        self.register_outputs({"clusterRoleArn": self.cluster_role.arn, "nodeRoleArn": self.node_role.arn})


class EksSystemNodesArgs(TypedDict):
    """Arguments of `EksSystemNodes`."""

    system_nodes: EksSystemNodesConfig
    """`target.eks.systemNodes` (instance type, count, root volume)."""
    cluster: aws.eks.Cluster
    """The EKS cluster the node group joins."""
    node_role_arn: pulumi.Input[str]
    """The node role (`EksIam`)."""
    subnet_ids: list[pulumi.Output[str]]
    """The private subnets of both zones."""
    tags: dict[str, str]
    """Tags on every resource and instance."""
    depends_on: NotRequired[list[pulumi.Resource]]
    """What the nodes need first (the CNI add-ons, the node role's policies); default none."""


class EksSystemNodes(_EksPart):
    """The CPU system node group (router, gateway, controllers, CoreDNS) across both zones."""

    node_group: aws.eks.NodeGroup

    def __init__(self, name: str, args: EksSystemNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("EksSystemNodes", name, opts)
        nodes, tags, cluster = args["system_nodes"], args["tags"], args["cluster"]
        template = aws.ec2.LaunchTemplate(
            f"{name}-system",
            block_device_mappings=[_root_volume(nodes.root_volume_gib)],
            metadata_options=_metadata_options(),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)
            ],
            tags=tags,
            opts=self._opts(),
        )
        self.node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cluster.name,
            version=cluster.version,
            node_role_arn=args["node_role_arn"],
            subnet_ids=args["subnet_ids"],
            ami_type=SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=[nodes.instance_type],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(_template_version)
            ),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=nodes.count, min_size=nodes.count, max_size=nodes.count
            ),
            labels={"llmd-fleet.io/role": "system"},
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            tags=tags,
            opts=self._opts(depends_on=args.get("depends_on", [])),
        )
        self.register_outputs({"nodeGroup": self.node_group.id})


class EksGpuCapacityArgs(TypedDict):
    """Arguments of `EksGpuCapacity`."""

    group_name: str
    """The fleet node group's name (its `fleet.nodeGroups` key)."""
    group: NodeGroupConfig
    """That node group (count, node labels)."""
    capacity: EksGpuCapacityConfig
    """Its `target.eks.gpuNodes` entry (Capacity Blocks or an ODCR)."""
    availability_zone: str
    """The capacity's zone (`target.eks.availabilityZone`)."""
    physical_name: str
    """The name of a placement group the stack creates."""
    cluster: aws.eks.Cluster
    """The EKS cluster the node groups join."""
    node_role_arn: pulumi.Input[str]
    """The node role (`EksIam`)."""
    subnet_id: pulumi.Input[str]
    """The private subnet of the capacity zone."""
    security_group_ids: pulumi.Input[list[str]]
    """Security groups of every network interface."""
    tags: dict[str, str]
    """Tags on every resource and instance."""
    depends_on: NotRequired[list[pulumi.Resource]]
    """What the nodes need first; default none."""


class EksGpuCapacity(_EksPart):
    """One fleet node group's p5 capacity: a launch template (32 EFA, IMDSv2, the reservation) and
    a managed node group per Capacity Block (at most 64 instances each), or one of each on an
    On-Demand Capacity Reservation in a cluster placement group (created here unless given)."""

    launch_templates: dict[str, aws.ec2.LaunchTemplate]
    """Launch templates by logical name."""
    node_groups: dict[str, aws.eks.NodeGroup]
    """Managed node groups by logical name."""

    def __init__(self, name: str, args: EksGpuCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("EksGpuCapacity", name, opts)
        capacity, group, tags, cluster = args["capacity"], args["group"], args["tags"], args["cluster"]
        self.launch_templates, self.node_groups = {}, {}
        for unit, size, reservation, placement in self._units(name, args):
            template = aws.ec2.LaunchTemplate(
                unit,
                instance_type=capacity.instance_type,
                network_interfaces=p5_network_interfaces(args["security_group_ids"]),
                block_device_mappings=[_root_volume(capacity.root_volume_gib)],
                metadata_options=_metadata_options(),
                user_data=node_user_data(capacity.instance_store_raid0),
                capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                    capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                        capacity_reservation_id=reservation
                    )
                ),
                instance_market_options=(
                    aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
                    if capacity.capacity == "capacity-block"
                    else None
                ),
                placement=placement,
                tag_specifications=[
                    aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)
                ],
                tags=tags,
                opts=self._opts(),
            )
            self.launch_templates[unit] = template
            self.node_groups[unit] = aws.eks.NodeGroup(
                unit,
                cluster_name=cluster.name,
                version=cluster.version,
                node_role_arn=args["node_role_arn"],
                # Only the capacity's zone: Capacity Blocks and ODCRs are zonal.
                subnet_ids=[args["subnet_id"]],
                ami_type=GPU_AMI_TYPE,
                capacity_type="CAPACITY_BLOCK" if capacity.capacity == "capacity-block" else "ON_DEMAND",
                launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                    id=template.id, version=template.latest_version.apply(_template_version)
                ),
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    desired_size=size, min_size=size, max_size=size
                ),
                labels={
                    **group.node_labels,
                    NODE_GROUP_LABEL: args["group_name"],
                    CAPACITY_LABEL: capacity.capacity,
                },
                taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, effect="NO_SCHEDULE")],
                # Reserved capacity has no spare instance to surge into: replace in place, one
                # node at a time. MINIMAL terminates an old instance before launching its
                # replacement (the DEFAULT strategy launches new instances first, which reserved
                # capacity cannot hold; EKS API NodegroupUpdateConfig.updateStrategy). EKS drains
                # through the Eviction API, so the serving roles' PodDisruptionBudgets hold: an
                # eviction still refused after EKS's drain timeout fails the update rather than
                # forcing it (docs/disruptions.md).
                update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1, update_strategy="MINIMAL"),
                tags=tags,
                opts=self._opts(depends_on=args.get("depends_on", [])),
            )
        self.register_outputs({"nodeGroups": sorted(self.node_groups)})

    def _units(
        self, name: str, args: EksGpuCapacityArgs
    ) -> list[tuple[str, int, pulumi.Input[str], aws.ec2.LaunchTemplatePlacementArgs | None]]:
        """(logical name, instances, capacity reservation id, placement) of each launch template
        and node group."""
        capacity, count = args["capacity"], args["group"].count
        if capacity.capacity == "capacity-block":
            # EC2 places Capacity Blocks in UltraClusters itself: no placement group.
            return [
                (f"{name}-block{i}", block.instances, block.reservation_id, None)
                for i, block in enumerate(capacity.capacity_blocks)
            ]
        if capacity.reservation_id is not None and capacity.placement_group is not None:
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=capacity.placement_group)
            return [(name, count, capacity.reservation_id, placement)]
        placement_group = aws.ec2.PlacementGroup(
            f"{name}-placement",
            name=args["physical_name"],
            strategy="cluster",
            tags=args["tags"],
            opts=self._opts(),
        )
        reservation = aws.ec2.CapacityReservation(
            f"{name}-odcr",
            instance_type=capacity.instance_type,
            instance_platform="Linux/UNIX",
            availability_zone=args["availability_zone"],
            instance_count=count,
            instance_match_criteria="targeted",
            end_date_type="unlimited",
            placement_group_arn=placement_group.arn,
            tags=args["tags"],
            opts=self._opts(),
        )
        placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name)
        return [(name, count, reservation.id, placement)]


class EksClusterArgs(TypedDict):
    """Arguments of `EksCluster`."""

    eks: EksTargetConfig
    """The `target.eks` section (region, VPC CIDR, GPU capacity, system nodes)."""
    node_groups: Mapping[str, NodeGroupConfig]
    """`fleet.nodeGroups`: counts and node labels of the GPU groups."""
    cluster_name: str
    """The EKS cluster name; it also tags the subnets for load-balancer discovery."""
    kubernetes_version: str
    """The control-plane minor (images/versions.toml `[kubernetes].eks`)."""
    addon_versions: Mapping[str, str]
    """EKS add-on name -> pinned version, one for each name in ADDONS."""
    tags: NotRequired[dict[str, str]]
    """Tags added to every AWS resource that takes them; default none."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with EFA GPU node groups, and the Kubernetes provider for it.

    Its parts are child components: `EksNetwork` (VPC, subnets, NAT, EFA security group), `EksIam`
    (cluster and node roles), `EksSystemNodes` (the CPU node group) and one `EksGpuCapacity` per
    GPU node group; the cluster itself, its access entries and add-ons, the kubeconfig and the
    provider are its own children. Resources that moved into a part keep their state by alias."""

    provider: k8s.Provider
    aws_provider: aws.Provider
    """AWS provider of the stack's region; other AWS resources of the stack (the ECR repository of
    the serving image) use it too."""
    kubeconfig: pulumi.Output[str]
    """kubeconfig of the cluster (a secret)."""
    cluster: aws.eks.Cluster
    cluster_name: str
    """The EKS cluster's name."""
    tags: dict[str, str]
    """Tags of every AWS resource of the cluster."""
    network: EksNetwork
    iam: EksIam
    system_nodes: EksSystemNodes
    gpu_capacity: dict[str, EksGpuCapacity]
    """GPU capacity by fleet node group name."""
    cluster_security_group_id: pulumi.Output[str | None]
    """The security group EKS puts on every node of the cluster."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:cluster:EksCluster", name, {}, opts)
        eks = args["eks"]
        missing = [a for a in ADDONS if a not in args["addon_versions"]]
        if missing:
            raise ValueError(f"EksCluster {name}: no pinned version for add-ons {missing}")
        unknown = sorted(set(eks.gpu_nodes) - set(args["node_groups"]))
        if unknown:
            raise ValueError(f"EksCluster {name}: gpu_nodes name unknown node groups {unknown}")
        cluster_name = args["cluster_name"]
        tags = {"llmd-fleet.io/cluster": cluster_name, **args.get("tags", {})}
        self.cluster_name, self.tags = cluster_name, tags
        aws_provider = aws.Provider(
            f"{name}-aws", region=eks.region, opts=pulumi.ResourceOptions(parent=self)
        )
        self.aws_provider = aws_provider
        child = pulumi.ResourceOptions(parent=self, provider=aws_provider)
        part = pulumi.ResourceOptions(parent=self, providers={"aws": aws_provider})

        def opts_with(**kwargs: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(**kwargs))

        self.network = EksNetwork(name, {"eks": eks, "cluster_name": cluster_name, "tags": tags}, opts=part)
        self.iam = EksIam(name, {"tags": tags}, opts=part)

        # The cluster: access entries only (API mode), private endpoint, public endpoint only for
        # the listed CIDRs, every control-plane log type configured.
        self.cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=args["kubernetes_version"],
            role_arn=self.iam.cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=self.network.node_subnet_ids,
                endpoint_private_access=True,
                endpoint_public_access=bool(eks.public_access_cidrs),
                public_access_cidrs=list(eks.public_access_cidrs) or None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=True
            ),
            kubernetes_network_config=aws.eks.ClusterKubernetesNetworkConfigArgs(ip_family="ipv4"),
            enabled_cluster_log_types=list(eks.cluster_log_types),
            # The core add-ons below are EKS managed add-ons, pinned; EKS installs no
            # self-managed copies first.
            bootstrap_self_managed_addons=False,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            # A replace or destroy of the cluster would take the whole fleet down with it.
            deletion_protection=True,
            tags=tags,
            opts=opts_with(depends_on=self.iam.cluster_attachments),
        )
        for i, principal in enumerate(eks.admin_principal_arns):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=self.cluster.name,
                principal_arn=principal,
                type="STANDARD",
                opts=child,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}-policy",
                cluster_name=self.cluster.name,
                principal_arn=principal,
                policy_arn=CLUSTER_ADMIN_POLICY,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=opts_with(depends_on=[entry]),
            )

        def addon(addon_name: str, depends: list[pulumi.Resource]) -> aws.eks.Addon:
            return aws.eks.Addon(
                f"{name}-addon-{addon_name}",
                cluster_name=self.cluster.name,
                addon_name=addon_name,
                addon_version=args["addon_versions"][addon_name],
                configuration_values=ADDON_CONFIGURATION.get(addon_name),
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=opts_with(depends_on=depends),
            )

        # Networking add-ons first: nodes only become Ready once the CNI runs on them.
        early = [addon(a, [self.cluster]) for a in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")]
        nodes_need: list[pulumi.Resource] = [*early, *self.iam.node_attachments]
        cluster_sg = self.cluster.vpc_config.cluster_security_group_id
        self.cluster_security_group_id = cluster_sg
        node_sgs = pulumi.Output.all(cluster_sg, self.network.efa_security_group.id).apply(
            lambda ids: [i for i in ids if i]
        )
        self.system_nodes = EksSystemNodes(
            name,
            {
                "system_nodes": eks.system_nodes,
                "cluster": self.cluster,
                "node_role_arn": self.iam.node_role.arn,
                "subnet_ids": self.network.node_subnet_ids,
                "tags": tags,
                "depends_on": nodes_need,
            },
            opts=part,
        )
        coredns = addon("coredns", [self.system_nodes.node_group])
        self.gpu_capacity = {
            group_name: EksGpuCapacity(
                f"{name}-{group_name}",
                {
                    "group_name": group_name,
                    "group": args["node_groups"][group_name],
                    "capacity": capacity,
                    "availability_zone": eks.availability_zone,
                    "physical_name": f"{cluster_name}-{group_name}",
                    "cluster": self.cluster,
                    "node_role_arn": self.iam.node_role.arn,
                    "subnet_id": self.network.private_subnets["capacity"].id,
                    "security_group_ids": node_sgs,
                    "tags": tags,
                    "depends_on": nodes_need,
                },
                opts=part,
            )
            for group_name, capacity in sorted(eks.gpu_nodes.items())
        }

        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.certificate_authority
            ).apply(
                lambda a: kubeconfig_text(
                    a[0] or cluster_name, a[1] or "", (a[2] or {}).get("data") or "", eks.region
                )
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Server-side apply lets the DisaggregatedSet controller and Pulumi own separate fields.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.system_nodes.node_group, coredns, *early]
            ),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "clusterName": self.cluster.name})

    @property
    def vpc(self) -> aws.ec2.Vpc:
        """The fleet's VPC (the response store's subnets go into it)."""
        return self.network.vpc

    @property
    def gpu_node_groups(self) -> dict[str, aws.eks.NodeGroup]:
        """GPU managed node groups of every capacity, by logical name."""
        return {
            unit: g for capacity in self.gpu_capacity.values() for unit, g in capacity.node_groups.items()
        }
