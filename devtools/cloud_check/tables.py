"""Which API field every rendered input of a GKE or EKS stack becomes: one table per Pulumi resource
type, with the provider's documentation as its source.

A leaf input is named by its path in the rendered inputs (build/<stack>/cloud/*.yaml): `a.b` for
nested objects, `a[]` for every element of a list, `a{key}` and `a{value}` for a map's keys and
values. Each leaf is one of:

- `Api(field)`: the value is compared with the field's shape in the API model (devtools/cloud_check/
  models.py names fields); counted in the line's N.
- `Ref(field)`: the field exists in the model (checked), but the value is another resource's output
  (an ID, ARN or self link) that only exists once that resource does; offline it is the mock
  engine's placeholder, so it is not compared.
- `Secret(field)`: the field exists in the model; the value is a secret, never decrypted offline.
- `Free(reason)`: no API field: a setting of the provider or of the build tool itself.

`supplied` names the required members of an API structure that no rendered input carries, and who
fills them in (Pulumi's auto-naming, an output of another resource): the check refuses a structure
whose required member is neither given nor listed there.

The field names come from each Pulumi resource's documentation (its inputs link to the API field of
the same name) and the API reference of the operation the provider calls to create or update the
resource; both are linked per table.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Api:
    field: str
    documented: str = ""
    """Name of a table in devtools/cloud_check/documented.py the value must also be in (for a field
    the model leaves a free string)."""


@dataclass(frozen=True)
class Ref:
    field: str


@dataclass(frozen=True)
class Secret:
    field: str


@dataclass(frozen=True)
class Free:
    reason: str


Entry = Api | Ref | Secret | Free


@dataclass(frozen=True)
class Table:
    source: str
    fields: Mapping[str, Entry]
    supplied: Mapping[str, str] = field(default_factory=dict)


AUTONAMED = "auto-named by Pulumi from the resource name (a random suffix added)"
DELETE_ONLY = "used by the provider when the resource is deleted"


def _ec2_tags(request: str) -> dict[str, Entry]:
    return {
        "tags{key}": Api(f"ec2:{request}.TagSpecifications.Tags.Key"),
        "tags{value}": Api(f"ec2:{request}.TagSpecifications.Tags.Value"),
    }


def _eks_tags(request: str) -> dict[str, Entry]:
    return {
        "tags{key}": Api(f"eks:{request}.tags{{key}}"),
        "tags{value}": Api(f"eks:{request}.tags{{value}}"),
    }


def _rds_tags(request: str) -> dict[str, Entry]:
    return {"tags{key}": Api(f"rds:{request}.Tags.Key"), "tags{value}": Api(f"rds:{request}.Tags.Value")}


_AWS_DOCS = "https://www.pulumi.com/registry/packages/aws/api-docs/"
_GCP_DOCS = "https://www.pulumi.com/registry/packages/gcp/api-docs/"
_EC2_API = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/"
_EKS_API = "https://docs.aws.amazon.com/eks/latest/APIReference/"

_LT = "ec2:CreateLaunchTemplateRequest.LaunchTemplateData"
_NIC = f"{_LT}.NetworkInterfaces"
_EBS = f"{_LT}.BlockDeviceMappings.Ebs"
_SG_RULE: dict[str, Entry] = {
    "cidrIpv4": Api("ec2:IpPermission.IpRanges.CidrIp"),
    "description": Api("ec2:IpRange.Description"),
    "fromPort": Api("ec2:IpPermission.FromPort"),
    "toPort": Api("ec2:IpPermission.ToPort"),
    "ipProtocol": Api("ec2:IpPermission.IpProtocol"),
    "referencedSecurityGroupId": Ref("ec2:IpPermission.UserIdGroupPairs.GroupId"),
}

AWS: dict[str, Table] = {
    "aws:ec2/eip:Eip": Table(
        f"{_AWS_DOCS}ec2/eip/ ; {_EC2_API}API_AllocateAddress.html",
        {"domain": Api("ec2:AllocateAddressRequest.Domain"), **_ec2_tags("AllocateAddressRequest")},
    ),
    "aws:ec2/internetGateway:InternetGateway": Table(
        f"{_AWS_DOCS}ec2/internetgateway/ ; "
        f"{_EC2_API}API_CreateInternetGateway.html, API_AttachInternetGateway.html",
        {
            "vpcId": Ref("ec2:AttachInternetGatewayRequest.VpcId"),
            **_ec2_tags("CreateInternetGatewayRequest"),
        },
        {"ec2:AttachInternetGatewayRequest.InternetGatewayId": "the gateway's ID (CreateInternetGateway)"},
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": Table(
        f"{_AWS_DOCS}ec2/launchtemplate/ ; "
        f"{_EC2_API}API_CreateLaunchTemplate.html, API_RequestLaunchTemplateData.html",
        {
            "blockDeviceMappings[].deviceName": Api(f"{_LT}.BlockDeviceMappings.DeviceName"),
            "blockDeviceMappings[].ebs.deleteOnTermination": Api(f"{_EBS}.DeleteOnTermination"),
            "blockDeviceMappings[].ebs.encrypted": Api(f"{_EBS}.Encrypted"),
            "blockDeviceMappings[].ebs.iops": Api(f"{_EBS}.Iops"),
            "blockDeviceMappings[].ebs.throughput": Api(f"{_EBS}.Throughput"),
            "blockDeviceMappings[].ebs.volumeSize": Api(f"{_EBS}.VolumeSize"),
            "blockDeviceMappings[].ebs.volumeType": Api(f"{_EBS}.VolumeType"),
            "capacityReservationSpecification.capacityReservationTarget.capacityReservationId": Api(
                f"{_LT}.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
            ),
            "instanceMarketOptions.marketType": Api(f"{_LT}.InstanceMarketOptions.MarketType"),
            "instanceType": Api(f"{_LT}.InstanceType"),
            "metadataOptions.httpEndpoint": Api(f"{_LT}.MetadataOptions.HttpEndpoint"),
            "metadataOptions.httpPutResponseHopLimit": Api(f"{_LT}.MetadataOptions.HttpPutResponseHopLimit"),
            "metadataOptions.httpTokens": Api(f"{_LT}.MetadataOptions.HttpTokens"),
            "networkInterfaces[].deleteOnTermination": Api(f"{_NIC}.DeleteOnTermination"),
            "networkInterfaces[].deviceIndex": Api(f"{_NIC}.DeviceIndex"),
            "networkInterfaces[].interfaceType": Api(
                f"{_NIC}.InterfaceType", documented="ec2-interface-types"
            ),
            "networkInterfaces[].networkCardIndex": Api(f"{_NIC}.NetworkCardIndex"),
            "networkInterfaces[].securityGroups[]": Ref(f"{_NIC}.Groups"),
            "tagSpecifications[].resourceType": Api(f"{_LT}.TagSpecifications.ResourceType"),
            "tagSpecifications[].tags{key}": Api(f"{_LT}.TagSpecifications.Tags.Key"),
            "tagSpecifications[].tags{value}": Api(f"{_LT}.TagSpecifications.Tags.Value"),
            "userData": Api(f"{_LT}.UserData"),
            **_ec2_tags("CreateLaunchTemplateRequest"),
        },
        {"ec2:CreateLaunchTemplateRequest.LaunchTemplateName": AUTONAMED},
    ),
    "aws:ec2/natGateway:NatGateway": Table(
        f"{_AWS_DOCS}ec2/natgateway/ ; {_EC2_API}API_CreateNatGateway.html",
        {
            "allocationId": Ref("ec2:CreateNatGatewayRequest.AllocationId"),
            "subnetId": Ref("ec2:CreateNatGatewayRequest.SubnetId"),
            **_ec2_tags("CreateNatGatewayRequest"),
        },
    ),
    "aws:ec2/routeTable:RouteTable": Table(
        f"{_AWS_DOCS}ec2/routetable/ ; {_EC2_API}API_CreateRouteTable.html, API_CreateRoute.html",
        {
            "vpcId": Ref("ec2:CreateRouteTableRequest.VpcId"),
            "routes[].cidrBlock": Api("ec2:CreateRouteRequest.DestinationCidrBlock"),
            "routes[].natGatewayId": Ref("ec2:CreateRouteRequest.NatGatewayId"),
            "routes[].gatewayId": Ref("ec2:CreateRouteRequest.GatewayId"),
            **_ec2_tags("CreateRouteTableRequest"),
        },
        {"ec2:CreateRouteRequest.RouteTableId": "the route table's ID, from CreateRouteTable"},
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Table(
        f"{_AWS_DOCS}ec2/routetableassociation/ ; {_EC2_API}API_AssociateRouteTable.html",
        {
            "routeTableId": Ref("ec2:AssociateRouteTableRequest.RouteTableId"),
            "subnetId": Ref("ec2:AssociateRouteTableRequest.SubnetId"),
        },
    ),
    "aws:ec2/securityGroup:SecurityGroup": Table(
        f"{_AWS_DOCS}ec2/securitygroup/ ; {_EC2_API}API_CreateSecurityGroup.html",
        {
            "description": Api("ec2:CreateSecurityGroupRequest.Description"),
            "name": Api("ec2:CreateSecurityGroupRequest.GroupName"),
            "vpcId": Ref("ec2:CreateSecurityGroupRequest.VpcId"),
            **_ec2_tags("CreateSecurityGroupRequest"),
        },
        {"ec2:CreateSecurityGroupRequest.GroupName": AUTONAMED + " when no name is given"},
    ),
    "aws:ec2/subnet:Subnet": Table(
        f"{_AWS_DOCS}ec2/subnet/ ; {_EC2_API}API_CreateSubnet.html, API_ModifySubnetAttribute.html",
        {
            "availabilityZone": Api("ec2:CreateSubnetRequest.AvailabilityZone"),
            "cidrBlock": Api("ec2:CreateSubnetRequest.CidrBlock"),
            "vpcId": Ref("ec2:CreateSubnetRequest.VpcId"),
            "mapPublicIpOnLaunch": Api("ec2:ModifySubnetAttributeRequest.MapPublicIpOnLaunch.Value"),
            **_ec2_tags("CreateSubnetRequest"),
        },
        {"ec2:ModifySubnetAttributeRequest.SubnetId": "the subnet's ID, from CreateSubnet"},
    ),
    "aws:ec2/vpc:Vpc": Table(
        f"{_AWS_DOCS}ec2/vpc/ ; {_EC2_API}API_CreateVpc.html, API_ModifyVpcAttribute.html",
        {
            "cidrBlock": Api("ec2:CreateVpcRequest.CidrBlock"),
            "enableDnsHostnames": Api("ec2:ModifyVpcAttributeRequest.EnableDnsHostnames.Value"),
            "enableDnsSupport": Api("ec2:ModifyVpcAttributeRequest.EnableDnsSupport.Value"),
            **_ec2_tags("CreateVpcRequest"),
        },
        {"ec2:ModifyVpcAttributeRequest.VpcId": "the VPC's ID, from CreateVpc"},
    ),
    "aws:ecr/repository:Repository": Table(
        f"{_AWS_DOCS}ecr/repository/ ; https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepository.html",
        {
            "imageScanningConfiguration.scanOnPush": Api(
                "ecr:CreateRepositoryRequest.imageScanningConfiguration.scanOnPush"
            ),
            "imageTagMutability": Api("ecr:CreateRepositoryRequest.imageTagMutability"),
            "imageTagMutabilityExclusionFilters[].filter": Api(
                "ecr:CreateRepositoryRequest.imageTagMutabilityExclusionFilters.filter"
            ),
            "imageTagMutabilityExclusionFilters[].filterType": Api(
                "ecr:CreateRepositoryRequest.imageTagMutabilityExclusionFilters.filterType"
            ),
            "name": Api("ecr:CreateRepositoryRequest.repositoryName"),
        },
    ),
    "aws:eks/accessEntry:AccessEntry": Table(
        f"{_AWS_DOCS}eks/accessentry/ ; {_EKS_API}API_CreateAccessEntry.html",
        {
            "clusterName": Api("eks:CreateAccessEntryRequest.clusterName"),
            "principalArn": Api("eks:CreateAccessEntryRequest.principalArn"),
            "type": Api("eks:CreateAccessEntryRequest.type", documented="eks-access-entry-types"),
        },
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": Table(
        f"{_AWS_DOCS}eks/accesspolicyassociation/ ; {_EKS_API}API_AssociateAccessPolicy.html",
        {
            "accessScope.type": Api("eks:AssociateAccessPolicyRequest.accessScope.type"),
            "clusterName": Api("eks:AssociateAccessPolicyRequest.clusterName"),
            "policyArn": Api("eks:AssociateAccessPolicyRequest.policyArn"),
            "principalArn": Api("eks:AssociateAccessPolicyRequest.principalArn"),
        },
    ),
    "aws:eks/addon:Addon": Table(
        f"{_AWS_DOCS}eks/addon/ ; {_EKS_API}API_CreateAddon.html, API_UpdateAddon.html",
        {
            "addonName": Api("eks:CreateAddonRequest.addonName"),
            "addonVersion": Api("eks:CreateAddonRequest.addonVersion"),
            "clusterName": Api("eks:CreateAddonRequest.clusterName"),
            "configurationValues": Api("eks:CreateAddonRequest.configurationValues"),
            "resolveConflictsOnCreate": Api("eks:CreateAddonRequest.resolveConflicts"),
            "resolveConflictsOnUpdate": Api("eks:UpdateAddonRequest.resolveConflicts"),
            **_eks_tags("CreateAddonRequest"),
        },
        {
            "eks:UpdateAddonRequest.clusterName": "the same cluster name as CreateAddon's, on update",
            "eks:UpdateAddonRequest.addonName": "the same add-on name as CreateAddon's, on update",
        },
    ),
    "aws:eks/cluster:Cluster": Table(
        f"{_AWS_DOCS}eks/cluster/ ; {_EKS_API}API_CreateCluster.html",
        {
            "accessConfig.authenticationMode": Api(
                "eks:CreateClusterRequest.accessConfig.authenticationMode"
            ),
            "accessConfig.bootstrapClusterCreatorAdminPermissions": Api(
                "eks:CreateClusterRequest.accessConfig.bootstrapClusterCreatorAdminPermissions"
            ),
            "bootstrapSelfManagedAddons": Api("eks:CreateClusterRequest.bootstrapSelfManagedAddons"),
            "deletionProtection": Api("eks:CreateClusterRequest.deletionProtection"),
            "enabledClusterLogTypes[]": Api("eks:CreateClusterRequest.logging.clusterLogging.types"),
            "kubernetesNetworkConfig.ipFamily": Api(
                "eks:CreateClusterRequest.kubernetesNetworkConfig.ipFamily"
            ),
            "name": Api("eks:CreateClusterRequest.name"),
            "upgradePolicy.supportType": Api("eks:CreateClusterRequest.upgradePolicy.supportType"),
            "version": Api("eks:CreateClusterRequest.version"),
            "vpcConfig.endpointPrivateAccess": Api(
                "eks:CreateClusterRequest.resourcesVpcConfig.endpointPrivateAccess"
            ),
            "vpcConfig.endpointPublicAccess": Api(
                "eks:CreateClusterRequest.resourcesVpcConfig.endpointPublicAccess"
            ),
            "vpcConfig.publicAccessCidrs[]": Api(
                "eks:CreateClusterRequest.resourcesVpcConfig.publicAccessCidrs"
            ),
            "vpcConfig.subnetIds[]": Ref("eks:CreateClusterRequest.resourcesVpcConfig.subnetIds"),
            **_eks_tags("CreateClusterRequest"),
        },
        {"eks:CreateClusterRequest.roleArn": "the cluster role's ARN, an output of its aws:iam/role:Role"},
    ),
    "aws:eks/nodeGroup:NodeGroup": Table(
        f"{_AWS_DOCS}eks/nodegroup/ ; {_EKS_API}API_CreateNodegroup.html",
        {
            "amiType": Api("eks:CreateNodegroupRequest.amiType"),
            "capacityType": Api("eks:CreateNodegroupRequest.capacityType"),
            "clusterName": Api("eks:CreateNodegroupRequest.clusterName"),
            "instanceTypes[]": Api("eks:CreateNodegroupRequest.instanceTypes"),
            "labels{key}": Api("eks:CreateNodegroupRequest.labels{key}"),
            "labels{value}": Api("eks:CreateNodegroupRequest.labels{value}"),
            "launchTemplate.id": Ref("eks:CreateNodegroupRequest.launchTemplate.id"),
            "launchTemplate.version": Api("eks:CreateNodegroupRequest.launchTemplate.version"),
            "scalingConfig.desiredSize": Api("eks:CreateNodegroupRequest.scalingConfig.desiredSize"),
            "scalingConfig.maxSize": Api("eks:CreateNodegroupRequest.scalingConfig.maxSize"),
            "scalingConfig.minSize": Api("eks:CreateNodegroupRequest.scalingConfig.minSize"),
            "subnetIds[]": Ref("eks:CreateNodegroupRequest.subnets"),
            "taints[].effect": Api("eks:CreateNodegroupRequest.taints.effect"),
            "taints[].key": Api("eks:CreateNodegroupRequest.taints.key"),
            "taints[].value": Api("eks:CreateNodegroupRequest.taints.value"),
            "updateConfig.maxUnavailable": Api("eks:CreateNodegroupRequest.updateConfig.maxUnavailable"),
            "updateConfig.updateStrategy": Api("eks:CreateNodegroupRequest.updateConfig.updateStrategy"),
            "version": Api("eks:CreateNodegroupRequest.version"),
            **_eks_tags("CreateNodegroupRequest"),
        },
        {
            "eks:CreateNodegroupRequest.nodegroupName": AUTONAMED,
            "eks:CreateNodegroupRequest.nodeRole": "the node role's ARN, an output of its aws:iam/role:Role",
        },
    ),
    "aws:iam/role:Role": Table(
        f"{_AWS_DOCS}iam/role/ ; https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html",
        {
            "assumeRolePolicy": Api("iam:CreateRoleRequest.AssumeRolePolicyDocument"),
            "tags{key}": Api("iam:CreateRoleRequest.Tags.Key"),
            "tags{value}": Api("iam:CreateRoleRequest.Tags.Value"),
        },
        {"iam:CreateRoleRequest.RoleName": AUTONAMED},
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Table(
        f"{_AWS_DOCS}iam/rolepolicyattachment/ ; https://docs.aws.amazon.com/IAM/latest/APIReference/API_AttachRolePolicy.html",
        {"policyArn": Api("iam:AttachRolePolicyRequest.PolicyArn")},
        {"iam:AttachRolePolicyRequest.RoleName": "the role's name, an output of its aws:iam/role:Role"},
    ),
    "aws:rds/instance:Instance": Table(
        f"{_AWS_DOCS}rds/instance/ ; https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/"
        "API_CreateDBInstance.html, API_ModifyDBInstance.html, API_DeleteDBInstance.html",
        {
            "allocatedStorage": Api("rds:CreateDBInstanceMessage.AllocatedStorage"),
            "allowMajorVersionUpgrade": Api("rds:ModifyDBInstanceMessage.AllowMajorVersionUpgrade"),
            "autoMinorVersionUpgrade": Api("rds:CreateDBInstanceMessage.AutoMinorVersionUpgrade"),
            "backupRetentionPeriod": Api("rds:CreateDBInstanceMessage.BackupRetentionPeriod"),
            "backupWindow": Api("rds:CreateDBInstanceMessage.PreferredBackupWindow"),
            "copyTagsToSnapshot": Api("rds:CreateDBInstanceMessage.CopyTagsToSnapshot"),
            "dbName": Api("rds:CreateDBInstanceMessage.DBName"),
            "dbSubnetGroupName": Api("rds:CreateDBInstanceMessage.DBSubnetGroupName"),
            "deletionProtection": Api("rds:CreateDBInstanceMessage.DeletionProtection"),
            "engine": Api("rds:CreateDBInstanceMessage.Engine"),
            "engineVersion": Api("rds:CreateDBInstanceMessage.EngineVersion"),
            "finalSnapshotIdentifier": Api("rds:DeleteDBInstanceMessage.FinalDBSnapshotIdentifier"),
            "identifier": Api("rds:CreateDBInstanceMessage.DBInstanceIdentifier"),
            "instanceClass": Api("rds:CreateDBInstanceMessage.DBInstanceClass"),
            "maintenanceWindow": Api("rds:CreateDBInstanceMessage.PreferredMaintenanceWindow"),
            "maxAllocatedStorage": Api("rds:CreateDBInstanceMessage.MaxAllocatedStorage"),
            "multiAz": Api("rds:CreateDBInstanceMessage.MultiAZ"),
            "password": Secret("rds:CreateDBInstanceMessage.MasterUserPassword"),
            "port": Api("rds:CreateDBInstanceMessage.Port"),
            "publiclyAccessible": Api("rds:CreateDBInstanceMessage.PubliclyAccessible"),
            "skipFinalSnapshot": Api("rds:DeleteDBInstanceMessage.SkipFinalSnapshot"),
            "storageEncrypted": Api("rds:CreateDBInstanceMessage.StorageEncrypted"),
            "storageType": Api("rds:CreateDBInstanceMessage.StorageType"),
            "username": Api("rds:CreateDBInstanceMessage.MasterUsername"),
            "vpcSecurityGroupIds[]": Ref("rds:CreateDBInstanceMessage.VpcSecurityGroupIds"),
            **_rds_tags("CreateDBInstanceMessage"),
        },
        {
            "rds:ModifyDBInstanceMessage.DBInstanceIdentifier": "the same identifier, on update",
            "rds:DeleteDBInstanceMessage.DBInstanceIdentifier": "the same identifier, on delete",
        },
    ),
    "aws:rds/subnetGroup:SubnetGroup": Table(
        f"{_AWS_DOCS}rds/subnetgroup/ ; https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_CreateDBSubnetGroup.html",
        {
            "description": Api("rds:CreateDBSubnetGroupMessage.DBSubnetGroupDescription"),
            "name": Api("rds:CreateDBSubnetGroupMessage.DBSubnetGroupName"),
            "subnetIds[]": Ref("rds:CreateDBSubnetGroupMessage.SubnetIds"),
            **_rds_tags("CreateDBSubnetGroupMessage"),
        },
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": Table(
        f"{_AWS_DOCS}vpc/securitygroupegressrule/ ; "
        f"{_EC2_API}API_AuthorizeSecurityGroupEgress.html, API_IpPermission.html",
        {**_SG_RULE, "securityGroupId": Ref("ec2:AuthorizeSecurityGroupEgressRequest.GroupId")},
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": Table(
        f"{_AWS_DOCS}vpc/securitygroupingressrule/ ; "
        f"{_EC2_API}API_AuthorizeSecurityGroupIngress.html, API_IpPermission.html",
        {**_SG_RULE, "securityGroupId": Ref("ec2:AuthorizeSecurityGroupIngressRequest.GroupId")},
    ),
}

_CONTAINER = "container.v1"
_NP = f"{_CONTAINER}:NodePool"
_NC = f"{_NP}.config"
_SQL = "sqladmin.v1beta4:DatabaseInstance"
_PARENT = (
    "a segment of the parent path projects/<project>/locations/<location>, whose pattern only refuses '/'"
)
_SQL_DOCS = "https://cloud.google.com/sql/docs/mysql/admin-api/rest/v1beta4/"


def _compute_location(method: str, region: bool = True) -> dict[str, Entry]:
    out: dict[str, Entry] = {"project": Api(f"compute.v1:compute.{method}(project)")}
    if region:
        out["region"] = Api(f"compute.v1:compute.{method}(region)")
    return out


GCP: dict[str, Table] = {
    "gcp:compute/address:Address": Table(
        f"{_GCP_DOCS}compute/address/ ; https://cloud.google.com/compute/docs/reference/rest/v1/addresses/insert",
        {
            "address": Api("compute.v1:Address.address"),
            "addressType": Api("compute.v1:Address.addressType"),
            "name": Api("compute.v1:Address.name"),
            "purpose": Api("compute.v1:Address.purpose"),
            "subnetwork": Ref("compute.v1:Address.subnetwork"),
            **_compute_location("addresses.insert"),
        },
    ),
    "gcp:compute/firewall:Firewall": Table(
        f"{_GCP_DOCS}compute/firewall/ ; https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/insert",
        {
            "allows[].ports[]": Api("compute.v1:Firewall.allowed.ports"),
            "allows[].protocol": Api("compute.v1:Firewall.allowed.IPProtocol"),
            "name": Api("compute.v1:Firewall.name"),
            "network": Ref("compute.v1:Firewall.network"),
            "sourceRanges[]": Api("compute.v1:Firewall.sourceRanges"),
            **_compute_location("firewalls.insert", region=False),
        },
    ),
    "gcp:compute/globalAddress:GlobalAddress": Table(
        f"{_GCP_DOCS}compute/globaladdress/ ; https://cloud.google.com/compute/docs/reference/rest/v1/globalAddresses/insert",
        {
            "address": Api("compute.v1:Address.address"),
            "addressType": Api("compute.v1:Address.addressType"),
            "name": Api("compute.v1:Address.name"),
            "network": Ref("compute.v1:Address.network"),
            "prefixLength": Api("compute.v1:Address.prefixLength"),
            "purpose": Api("compute.v1:Address.purpose"),
            **_compute_location("globalAddresses.insert", region=False),
        },
    ),
    "gcp:compute/network:Network": Table(
        f"{_GCP_DOCS}compute/network/ ; https://cloud.google.com/compute/docs/reference/rest/v1/networks/insert",
        {
            "autoCreateSubnetworks": Api("compute.v1:Network.autoCreateSubnetworks"),
            "mtu": Api("compute.v1:Network.mtu"),
            "name": Api("compute.v1:Network.name"),
            **_compute_location("networks.insert", region=False),
        },
    ),
    "gcp:compute/router:Router": Table(
        f"{_GCP_DOCS}compute/router/ ; https://cloud.google.com/compute/docs/reference/rest/v1/routers/insert",
        {
            "name": Api("compute.v1:Router.name"),
            "network": Ref("compute.v1:Router.network"),
            **_compute_location("routers.insert"),
        },
    ),
    "gcp:compute/routerNat:RouterNat": Table(
        f"{_GCP_DOCS}compute/routernat/ ; https://cloud.google.com/compute/docs/reference/rest/v1/routers/patch",
        {
            "name": Api("compute.v1:RouterNat.name"),
            "natIpAllocateOption": Api("compute.v1:RouterNat.natIpAllocateOption"),
            "router": Api("compute.v1:compute.routers.patch(router)"),
            "sourceSubnetworkIpRangesToNat": Api("compute.v1:RouterNat.sourceSubnetworkIpRangesToNat"),
            **_compute_location("routers.patch"),
        },
    ),
    "gcp:compute/subnetwork:Subnetwork": Table(
        f"{_GCP_DOCS}compute/subnetwork/ ; https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks/insert",
        {
            "ipCidrRange": Api("compute.v1:Subnetwork.ipCidrRange"),
            "name": Api("compute.v1:Subnetwork.name"),
            "network": Ref("compute.v1:Subnetwork.network"),
            "privateIpGoogleAccess": Api("compute.v1:Subnetwork.privateIpGoogleAccess"),
            "purpose": Api("compute.v1:Subnetwork.purpose"),
            "role": Api("compute.v1:Subnetwork.role"),
            "secondaryIpRanges[].ipCidrRange": Api("compute.v1:Subnetwork.secondaryIpRanges.ipCidrRange"),
            "secondaryIpRanges[].rangeName": Api("compute.v1:Subnetwork.secondaryIpRanges.rangeName"),
            **_compute_location("subnetworks.insert"),
        },
    ),
    "gcp:container/cluster:Cluster": Table(
        f"{_GCP_DOCS}container/cluster/ ; https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters",
        {
            "datapathProvider": Api(f"{_CONTAINER}:Cluster.networkConfig.datapathProvider"),
            "deletionProtection": Free(
                "the provider's own guard against `pulumi destroy`; never sent to the API"
            ),
            "enableMultiNetworking": Api(f"{_CONTAINER}:Cluster.networkConfig.enableMultiNetworking"),
            "gatewayApiConfig.channel": Api(f"{_CONTAINER}:Cluster.networkConfig.gatewayApiConfig.channel"),
            "initialNodeCount": Api(f"{_CONTAINER}:Cluster.initialNodeCount"),
            "ipAllocationPolicy.clusterSecondaryRangeName": Api(
                f"{_CONTAINER}:Cluster.ipAllocationPolicy.clusterSecondaryRangeName"
            ),
            "ipAllocationPolicy.servicesSecondaryRangeName": Api(
                f"{_CONTAINER}:Cluster.ipAllocationPolicy.servicesSecondaryRangeName"
            ),
            "location": Free(_PARENT),
            "maintenancePolicy.recurringWindow.endTime": Api(
                f"{_CONTAINER}:Cluster.maintenancePolicy.window.recurringWindow.window.endTime"
            ),
            "maintenancePolicy.recurringWindow.recurrence": Api(
                f"{_CONTAINER}:Cluster.maintenancePolicy.window.recurringWindow.recurrence"
            ),
            "maintenancePolicy.recurringWindow.startTime": Api(
                f"{_CONTAINER}:Cluster.maintenancePolicy.window.recurringWindow.window.startTime"
            ),
            "minMasterVersion": Api(f"{_CONTAINER}:Cluster.initialClusterVersion"),
            "name": Api(f"{_CONTAINER}:Cluster.name"),
            "network": Ref(f"{_CONTAINER}:Cluster.network"),
            "networkingMode": Free(
                "the provider's own enum (VPC_NATIVE | ROUTES): VPC_NATIVE becomes "
                "ipAllocationPolicy.useIpAliases = true"
            ),
            "privateClusterConfig.enablePrivateEndpoint": Api(
                f"{_CONTAINER}:Cluster.privateClusterConfig.enablePrivateEndpoint"
            ),
            "privateClusterConfig.enablePrivateNodes": Api(
                f"{_CONTAINER}:Cluster.privateClusterConfig.enablePrivateNodes"
            ),
            "privateClusterConfig.masterIpv4CidrBlock": Api(
                f"{_CONTAINER}:Cluster.privateClusterConfig.masterIpv4CidrBlock"
            ),
            "project": Free(_PARENT),
            "releaseChannel.channel": Api(f"{_CONTAINER}:Cluster.releaseChannel.channel"),
            "removeDefaultNodePool": Free(
                "the provider deletes the default node pool after creating the cluster "
                "(a DeleteNodePool call)"
            ),
            "subnetwork": Ref(f"{_CONTAINER}:Cluster.subnetwork"),
            "workloadIdentityConfig.workloadPool": Api(
                f"{_CONTAINER}:Cluster.workloadIdentityConfig.workloadPool"
            ),
        },
    ),
    "gcp:container/nodePool:NodePool": Table(
        f"{_GCP_DOCS}container/nodepool/ ; https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools",
        {
            "cluster": Free(
                "a segment of the parent path projects/<project>/locations/<location>/clusters/<cluster>"
            ),
            "location": Free(_PARENT),
            "project": Free(_PARENT),
            "autoscaling.locationPolicy": Api(f"{_NP}.autoscaling.locationPolicy"),
            "autoscaling.totalMaxNodeCount": Api(f"{_NP}.autoscaling.totalMaxNodeCount"),
            "autoscaling.totalMinNodeCount": Api(f"{_NP}.autoscaling.totalMinNodeCount"),
            "management.autoRepair": Api(f"{_NP}.management.autoRepair"),
            "management.autoUpgrade": Api(f"{_NP}.management.autoUpgrade"),
            "maxPodsPerNode": Api(f"{_NP}.maxPodsConstraint.maxPodsPerNode"),
            "name": Api(f"{_NP}.name"),
            "networkConfig.additionalNodeNetworkConfigs[].network": Api(
                f"{_NP}.networkConfig.additionalNodeNetworkConfigs.network"
            ),
            "networkConfig.additionalNodeNetworkConfigs[].subnetwork": Api(
                f"{_NP}.networkConfig.additionalNodeNetworkConfigs.subnetwork"
            ),
            "nodeConfig.diskSizeGb": Api(f"{_NC}.diskSizeGb"),
            "nodeConfig.guestAccelerators[].count": Api(f"{_NC}.accelerators.acceleratorCount"),
            "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion": Api(
                f"{_NC}.accelerators.gpuDriverInstallationConfig.gpuDriverVersion"
            ),
            "nodeConfig.guestAccelerators[].type": Api(
                f"{_NC}.accelerators.acceleratorType", documented="gke-accelerator-types"
            ),
            "nodeConfig.flexStart": Api(f"{_NC}.flexStart"),
            "nodeConfig.gvnic.enabled": Api(f"{_NC}.gvnic.enabled"),
            "nodeConfig.imageType": Api(f"{_NC}.imageType", documented="gke-image-types"),
            "nodeConfig.labels{key}": Api(f"{_NC}.labels{{key}}"),
            "nodeConfig.labels{value}": Api(f"{_NC}.labels{{value}}"),
            "nodeConfig.localNvmeSsdBlockConfig.localSsdCount": Api(
                f"{_NC}.localNvmeSsdBlockConfig.localSsdCount"
            ),
            "nodeConfig.machineType": Api(f"{_NC}.machineType", documented="gke-machine-types"),
            "nodeConfig.oauthScopes[]": Api(f"{_NC}.oauthScopes"),
            "nodeConfig.reservationAffinity.consumeReservationType": Api(
                f"{_NC}.reservationAffinity.consumeReservationType"
            ),
            "nodeConfig.reservationAffinity.key": Api(f"{_NC}.reservationAffinity.key"),
            "nodeConfig.reservationAffinity.values[]": Api(f"{_NC}.reservationAffinity.values"),
            "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring": Api(
                f"{_NC}.shieldedInstanceConfig.enableIntegrityMonitoring"
            ),
            "nodeConfig.shieldedInstanceConfig.enableSecureBoot": Api(
                f"{_NC}.shieldedInstanceConfig.enableSecureBoot"
            ),
            "nodeConfig.taints[].effect": Api(f"{_NC}.taints.effect"),
            "nodeConfig.taints[].key": Api(f"{_NC}.taints.key"),
            "nodeConfig.taints[].value": Api(f"{_NC}.taints.value"),
            "nodeConfig.workloadMetadataConfig.mode": Api(f"{_NC}.workloadMetadataConfig.mode"),
            "nodeCount": Api(f"{_NP}.initialNodeCount"),
            "nodeLocations[]": Api(f"{_NP}.locations"),
            "placementPolicy.type": Api(f"{_NP}.placementPolicy.type"),
            "upgradeSettings.maxSurge": Api(f"{_NP}.upgradeSettings.maxSurge"),
            "upgradeSettings.maxUnavailable": Api(f"{_NP}.upgradeSettings.maxUnavailable"),
            "upgradeSettings.strategy": Api(f"{_NP}.upgradeSettings.strategy"),
        },
    ),
    "gcp:projects/iAMMember:IAMMember": Table(
        f"{_GCP_DOCS}projects/iammember/ ; https://cloud.google.com/resource-manager/reference/rest/v1/projects/setIamPolicy",
        {
            "project": Api("cloudresourcemanager.v1:cloudresourcemanager.projects.setIamPolicy(resource)"),
            "role": Api("cloudresourcemanager.v1:Binding.role"),
        },
    ),
    "gcp:serviceaccount/account:Account": Table(
        f"{_GCP_DOCS}serviceaccount/account/ ; https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/create",
        {
            "accountId": Api("iam.v1:CreateServiceAccountRequest.accountId"),
            "displayName": Api("iam.v1:CreateServiceAccountRequest.serviceAccount.displayName"),
            "project": Free("a segment of the name path projects/<project>, whose pattern only refuses '/'"),
        },
    ),
    "gcp:servicenetworking/connection:Connection": Table(
        f"{_GCP_DOCS}servicenetworking/connection/ ; https://cloud.google.com/service-infrastructure/docs/service-networking/reference/rest/v1/services.connections/create",
        {
            "network": Ref("servicenetworking.v1:Connection.network"),
            "reservedPeeringRanges[]": Api("servicenetworking.v1:Connection.reservedPeeringRanges"),
            "service": Free(
                "a segment of the parent path services/<service>, whose pattern only refuses '/'"
            ),
        },
    ),
    "gcp:sql/database:Database": Table(
        f"{_GCP_DOCS}sql/database/ ; {_SQL_DOCS}databases/insert",
        {
            "instance": Api("sqladmin.v1beta4:Database.instance"),
            "name": Api("sqladmin.v1beta4:Database.name"),
            "project": Api("sqladmin.v1beta4:Database.project"),
        },
    ),
    "gcp:sql/databaseInstance:DatabaseInstance": Table(
        f"{_GCP_DOCS}sql/databaseinstance/ ; {_SQL_DOCS}instances/insert",
        {
            "databaseVersion": Api(f"{_SQL}.databaseVersion"),
            "deletionProtection": Free(
                "the provider's own guard against `pulumi destroy`; never sent to the API"
            ),
            "name": Api(f"{_SQL}.name"),
            "project": Api(f"{_SQL}.project"),
            "region": Api(f"{_SQL}.region"),
            "settings.availabilityType": Api(f"{_SQL}.settings.availabilityType"),
            "settings.backupConfiguration.backupRetentionSettings.retainedBackups": Api(
                f"{_SQL}.settings.backupConfiguration.backupRetentionSettings.retainedBackups"
            ),
            "settings.backupConfiguration.backupRetentionSettings.retentionUnit": Api(
                f"{_SQL}.settings.backupConfiguration.backupRetentionSettings.retentionUnit"
            ),
            "settings.backupConfiguration.enabled": Api(f"{_SQL}.settings.backupConfiguration.enabled"),
            "settings.backupConfiguration.pointInTimeRecoveryEnabled": Api(
                f"{_SQL}.settings.backupConfiguration.pointInTimeRecoveryEnabled"
            ),
            "settings.backupConfiguration.startTime": Api(f"{_SQL}.settings.backupConfiguration.startTime"),
            "settings.backupConfiguration.transactionLogRetentionDays": Api(
                f"{_SQL}.settings.backupConfiguration.transactionLogRetentionDays"
            ),
            "settings.deletionProtectionEnabled": Api(f"{_SQL}.settings.deletionProtectionEnabled"),
            "settings.diskAutoresize": Api(f"{_SQL}.settings.storageAutoResize"),
            "settings.diskAutoresizeLimit": Api(f"{_SQL}.settings.storageAutoResizeLimit"),
            "settings.diskSize": Api(f"{_SQL}.settings.dataDiskSizeGb"),
            "settings.diskType": Api(f"{_SQL}.settings.dataDiskType"),
            "settings.edition": Api(f"{_SQL}.settings.edition"),
            "settings.ipConfiguration.ipv4Enabled": Api(f"{_SQL}.settings.ipConfiguration.ipv4Enabled"),
            "settings.ipConfiguration.privateNetwork": Ref(f"{_SQL}.settings.ipConfiguration.privateNetwork"),
            "settings.ipConfiguration.sslMode": Api(f"{_SQL}.settings.ipConfiguration.sslMode"),
            "settings.maintenanceWindow.day": Api(f"{_SQL}.settings.maintenanceWindow.day"),
            "settings.maintenanceWindow.hour": Api(f"{_SQL}.settings.maintenanceWindow.hour"),
            "settings.maintenanceWindow.updateTrack": Api(f"{_SQL}.settings.maintenanceWindow.updateTrack"),
            "settings.retainBackupsOnDelete": Api(f"{_SQL}.settings.retainBackupsOnDelete"),
            "settings.tier": Api(f"{_SQL}.settings.tier", documented="cloud-sql-tiers"),
        },
    ),
    "gcp:sql/user:User": Table(
        f"{_GCP_DOCS}sql/user/ ; {_SQL_DOCS}users/insert",
        {
            "instance": Api("sqladmin.v1beta4:User.instance"),
            "name": Api("sqladmin.v1beta4:User.name"),
            "password": Secret("sqladmin.v1beta4:User.password"),
            "project": Api("sqladmin.v1beta4:User.project"),
        },
    ),
}

OTHER: dict[str, Table] = {
    "docker-build:index:Image": Table(
        "https://www.pulumi.com/registry/packages/docker-build/api-docs/image/",
        {
            "*": Free(
                "the serving image's build (BuildKit), not a cloud API: its pins are the version matrix's"
            )
        },
    ),
}

TABLES: dict[str, Table] = {**AWS, **GCP, **OTHER}
