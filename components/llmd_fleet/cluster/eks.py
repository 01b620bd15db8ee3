"""EKS target: the VPC, IAM, EKS cluster, core add-ons and the p5.48xlarge GPU node groups with
their 32 EFA interfaces, and a Kubernetes provider for everything above them.

Capacity comes from Capacity Blocks (one launch template and managed node group per block, at most
64 instances each) or from an On-Demand Capacity Reservation in a cluster placement group. Every
input here is derived from `target.eks` and `fleet.nodeGroups` only: serving settings never reach
a cloud resource, so a serving change never replaces a node.

The pure builders (`p5_network_interfaces`, `node_user_data`, `kubeconfig_text`, the trust
policies) are tested directly; `EksCluster` is the wiring.
"""

import base64
import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from llmd_fleet.config.eks import INSTANCE_SHAPES, EksGpuCapacityConfig, EksTargetConfig, subnet_cidrs
from llmd_fleet.config.fleet import NodeGroupConfig
from llmd_fleet.conventions import GPU_TAINT_KEY

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
    # The VPC CNI enforces NetworkPolicies (llmd_fleet/security/network_policy.py) only with its network
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


class EksClusterArgs(TypedDict):
    """Arguments of `EksCluster`.

    - `eks` (required): the `target.eks` section (region, VPC CIDR, GPU capacity, system nodes).
    - `node_groups` (required): `fleet.nodeGroups`, the GPU groups' counts and node labels.
    - `cluster_name` (required): the EKS cluster name; it also tags the subnets.
    - `kubernetes_version` (required): the control-plane minor (images/versions.toml).
    - `addon_versions` (required): EKS add-on name -> pinned version, one for each of ADDONS.
    - `tags` (default none): tags added to every AWS resource that takes them.
    """

    eks: EksTargetConfig
    """`target.eks`."""
    node_groups: Mapping[str, NodeGroupConfig]
    """`fleet.nodeGroups`: counts and node labels of the GPU groups."""
    cluster_name: str
    """EKS cluster name (also tags the subnets for load-balancer discovery)."""
    kubernetes_version: str
    """Control-plane minor (images/versions.toml [kubernetes].eks)."""
    addon_versions: Mapping[str, str]
    """EKS add-on name -> pinned version, one per name in ADDONS."""
    tags: NotRequired[dict[str, str]]
    """Tags on every AWS resource that takes them."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with EFA GPU node groups, and the Kubernetes provider for it."""

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
    vpc: aws.ec2.Vpc
    """The fleet's VPC (the response store's subnets go into it)."""
    cluster_security_group_id: pulumi.Output[str | None]
    """The security group EKS puts on every node of the cluster."""
    efa_security_group: aws.ec2.SecurityGroup
    launch_templates: dict[str, aws.ec2.LaunchTemplate]
    """GPU launch templates by logical name."""
    gpu_node_groups: dict[str, aws.eks.NodeGroup]
    """GPU managed node groups by logical name."""
    system_node_group: aws.eks.NodeGroup

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

        def opts_with(**kwargs: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(**kwargs))

        # --- network: private subnets for nodes (capacity zone + a second zone for the control
        # plane), public subnets for the NAT gateway and internet-facing load balancers.
        cidrs = subnet_cidrs(eks.vpc_cidr)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=eks.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": cluster_name},
            opts=child,
        )
        self.vpc = vpc
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=child)
        zones = {"capacity": eks.availability_zone, "secondary": eks.secondary_availability_zone}
        cluster_tag = {f"kubernetes.io/cluster/{cluster_name}": "shared"}
        public: dict[str, aws.ec2.Subnet] = {}
        private: dict[str, aws.ec2.Subnet] = {}
        for role, zone in zones.items():
            public[role] = aws.ec2.Subnet(
                f"{name}-public-{role}",
                vpc_id=vpc.id,
                cidr_block=cidrs[f"public-{role}"],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={
                    **tags,
                    **cluster_tag,
                    "Name": f"{cluster_name}-public-{zone}",
                    "kubernetes.io/role/elb": "1",
                },
                opts=child,
            )
            private[role] = aws.ec2.Subnet(
                f"{name}-private-{role}",
                vpc_id=vpc.id,
                cidr_block=cidrs[f"private-{role}"],
                availability_zone=zone,
                tags={
                    **tags,
                    **cluster_tag,
                    "Name": f"{cluster_name}-private-{zone}",
                    "kubernetes.io/role/internal-elb": "1",
                },
                opts=child,
            )
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags,
            opts=child,
        )
        # One NAT gateway, in the capacity zone where the GPU nodes pull images and weights.
        nat_ip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tags, opts=child)
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=nat_ip.id,
            subnet_id=public["capacity"].id,
            tags=tags,
            opts=opts_with(depends_on=[igw]),
        )
        private_routes = aws.ec2.RouteTable(
            f"{name}-private-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=tags,
            opts=child,
        )
        for role in zones:
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{role}-routes",
                subnet_id=public[role].id,
                route_table_id=public_routes.id,
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{role}-routes",
                subnet_id=private[role].id,
                route_table_id=private_routes.id,
                opts=child,
            )

        # --- EFA security group: EFA's SRD traffic must be allowed to and from the group itself.
        self.efa_security_group = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=vpc.id,
            description="EFA: all traffic to and from members of this group",
            tags={**tags, "Name": f"{cluster_name}-efa"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-ingress-self",
            security_group_id=self.efa_security_group.id,
            referenced_security_group_id=self.efa_security_group.id,
            ip_protocol="-1",
            description="EFA from group members",
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-egress-self",
            security_group_id=self.efa_security_group.id,
            referenced_security_group_id=self.efa_security_group.id,
            ip_protocol="-1",
            description="EFA to group members",
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-egress-all",
            security_group_id=self.efa_security_group.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="Node egress (images, weights, AWS APIs)",
            opts=child,
        )

        # --- IAM.
        cluster_role = aws.iam.Role(
            f"{name}-cluster-role", assume_role_policy=CLUSTER_TRUST_POLICY, tags=tags, opts=child
        )
        cluster_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-cluster-role-{arn.rsplit('/', 1)[1]}",
                role=cluster_role.name,
                policy_arn=arn,
                opts=child,
            )
            for arn in CLUSTER_POLICIES
        ]
        node_role = aws.iam.Role(
            f"{name}-node-role", assume_role_policy=NODE_TRUST_POLICY, tags=tags, opts=child
        )
        node_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-role-{arn.rsplit('/', 1)[1]}", role=node_role.name, policy_arn=arn, opts=child
            )
            for arn in NODE_POLICIES
        ]

        # --- the cluster: access entries only (API mode), private endpoint, public endpoint only
        # for the listed CIDRs, every control-plane log type configured.
        self.cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=args["kubernetes_version"],
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=[private["capacity"].id, private["secondary"].id],
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
            opts=opts_with(depends_on=cluster_attachments),
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
        cluster_sg = self.cluster.vpc_config.cluster_security_group_id
        self.cluster_security_group_id = cluster_sg
        node_sgs = pulumi.Output.all(cluster_sg, self.efa_security_group.id).apply(
            lambda ids: [i for i in ids if i]
        )

        # --- the CPU system node group (router, gateway, controllers, CoreDNS), both zones.
        system_lt = aws.ec2.LaunchTemplate(
            f"{name}-system",
            block_device_mappings=[_root_volume(eks.system_nodes.root_volume_gib)],
            metadata_options=_metadata_options(),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)
            ],
            tags=tags,
            opts=child,
        )
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.cluster.name,
            version=self.cluster.version,
            node_role_arn=node_role.arn,
            subnet_ids=[private["capacity"].id, private["secondary"].id],
            ami_type=SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=[eks.system_nodes.instance_type],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=system_lt.id, version=system_lt.latest_version.apply(_template_version)
            ),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=eks.system_nodes.count,
                min_size=eks.system_nodes.count,
                max_size=eks.system_nodes.count,
            ),
            labels={"llmd-fleet.io/role": "system"},
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            tags=tags,
            opts=opts_with(depends_on=[*early, *node_attachments]),
        )
        coredns = addon("coredns", [self.system_node_group])

        # --- GPU capacity.
        self.launch_templates = {}
        self.gpu_node_groups = {}
        for group_name, capacity in sorted(eks.gpu_nodes.items()):
            group = args["node_groups"][group_name]
            for unit, size, reservation, placement in self._capacity_units(
                name, f"{cluster_name}-{group_name}", group_name, group, capacity, eks, tags, child
            ):
                lt = aws.ec2.LaunchTemplate(
                    unit,
                    instance_type=capacity.instance_type,
                    network_interfaces=p5_network_interfaces(node_sgs),
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
                    opts=child,
                )
                self.launch_templates[unit] = lt
                self.gpu_node_groups[unit] = aws.eks.NodeGroup(
                    unit,
                    cluster_name=self.cluster.name,
                    version=self.cluster.version,
                    node_role_arn=node_role.arn,
                    # Only the capacity's zone: Capacity Blocks and ODCRs are zonal.
                    subnet_ids=[private["capacity"].id],
                    ami_type=GPU_AMI_TYPE,
                    capacity_type="CAPACITY_BLOCK" if capacity.capacity == "capacity-block" else "ON_DEMAND",
                    launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                        id=lt.id, version=lt.latest_version.apply(_template_version)
                    ),
                    scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                        desired_size=size, min_size=size, max_size=size
                    ),
                    labels={
                        **group.node_labels,
                        NODE_GROUP_LABEL: group_name,
                        CAPACITY_LABEL: capacity.capacity,
                    },
                    taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, effect="NO_SCHEDULE")],
                    # Reserved capacity has no spare instance to surge into: replace in place.
                    update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
                    tags=tags,
                    opts=opts_with(depends_on=[*early, *node_attachments]),
                )

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
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group, coredns, *early]),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "clusterName": self.cluster.name})

    def _capacity_units(
        self,
        name: str,
        physical_name: str,
        group_name: str,
        group: NodeGroupConfig,
        capacity: EksGpuCapacityConfig,
        eks: EksTargetConfig,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> list[tuple[str, int, pulumi.Input[str], aws.ec2.LaunchTemplatePlacementArgs | None]]:
        """(logical name, instances, capacity reservation id, placement) of each launch template
        and node group of one fleet node group."""
        if capacity.capacity == "capacity-block":
            # EC2 places Capacity Blocks in UltraClusters itself: no placement group.
            return [
                (f"{name}-{group_name}-block{i}", block.instances, block.reservation_id, None)
                for i, block in enumerate(capacity.capacity_blocks)
            ]
        if capacity.reservation_id is not None and capacity.placement_group is not None:
            return [
                (
                    f"{name}-{group_name}",
                    group.count,
                    capacity.reservation_id,
                    aws.ec2.LaunchTemplatePlacementArgs(group_name=capacity.placement_group),
                )
            ]
        placement_group = aws.ec2.PlacementGroup(
            f"{name}-{group_name}-placement", name=physical_name, strategy="cluster", tags=tags, opts=child
        )
        reservation = aws.ec2.CapacityReservation(
            f"{name}-{group_name}-odcr",
            instance_type=capacity.instance_type,
            instance_platform="Linux/UNIX",
            availability_zone=eks.availability_zone,
            instance_count=group.count,
            instance_match_criteria="targeted",
            end_date_type="unlimited",
            placement_group_arn=placement_group.arn,
            tags=tags,
            opts=child,
        )
        return [
            (
                f"{name}-{group_name}",
                group.count,
                reservation.id,
                aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name),
            )
        ]
