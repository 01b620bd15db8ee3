"""Cloud clusters and GPU node pools (GKE through pulumi_gcp, EKS through pulumi_aws)."""

import re
from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Resource, as_int, dig, resource_rule, schema

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_INSTANCE = "aws:ec2/instance:Instance"

# Accelerator-optimized GCE machine families (GPUs attached by the machine type) and EC2 GPU families.
_GCE_GPU_MACHINES = re.compile(r"^(a2|a3|a4|a4x|g2|g4)-")
_EC2_GPU_TYPES = re.compile(r"^(p\d+[a-z]*|g\d+[a-z]*)(-[a-z0-9]+)?\.")


def _has_gpu_taint(taints: Any, key: str) -> bool:
    return any(
        isinstance(t, dict) and t.get("key") == key and t.get("effect") in ("NO_SCHEDULE", "NoSchedule")
        for t in taints or []
    )


def _check_taint(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    key, props = cfg["gpuTaintKey"], resource.props
    if resource.type in (GKE_NODE_POOL, GKE_CLUSTER):
        node_config = props.get("nodeConfig")
        if not isinstance(node_config, dict):
            return
        gpus = sum(as_int(a.get("count")) or 0 for a in node_config.get("guestAccelerators") or [])
        if (
            gpus or _GCE_GPU_MACHINES.match(str(node_config.get("machineType") or ""))
        ) and not _has_gpu_taint(node_config.get("taints"), key):
            report(
                f"{resource.ref()}: GPU nodes ({node_config.get('machineType')}) without the "
                f"{key}:NoSchedule taint"
            )
    elif resource.type == EKS_NODE_GROUP:
        types = [str(t) for t in props.get("instanceTypes") or []]
        gpu = any(_EC2_GPU_TYPES.match(t) for t in types) or any(
            word in str(props.get("amiType") or "") for word in ("GPU", "NVIDIA")
        )
        if gpu and not _has_gpu_taint(props.get("taints"), key):
            report(
                f"{resource.ref()}: GPU node group ({', '.join(types) or props.get('amiType')}) without "
                f"the {key}:NoSchedule taint"
            )


gpu_pool_taint = resource_rule(
    name="gpu-pool-taint",
    description="Every GPU node pool carries the nvidia.com/gpu NoSchedule taint, so only pods that "
    "ask for GPUs land on GPU nodes.",
    remediation="Add `taints=[{key: nvidia.com/gpu, value: present, effect: NO_SCHEDULE}]` to the GKE "
    "node pool's node_config or the EKS node group, and the matching toleration to GPU pods.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(GKE_NODE_POOL, GKE_CLUSTER, EKS_NODE_GROUP),
    check=_check_taint,
    config=schema(
        {
            "gpuTaintKey": {
                "type": "string",
                "default": "nvidia.com/gpu",
                "description": "Taint key of GPU pools.",
            }
        }
    ),
    tags=["cloud", "gpu", "scheduling"],
)


def _check_deletion(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    value = resource.props.get("deletionProtection")
    # GKE defaults deletion protection on; EKS defaults it off.
    enabled = value is not False if resource.type == GKE_CLUSTER else value is True
    if not enabled:
        report(
            f"{resource.ref()}: deletionProtection is off, so one `pulumi destroy` or replace "
            "deletes the cluster"
        )


cluster_deletion_protection = resource_rule(
    name="cluster-deletion-protection",
    description="Kubernetes clusters have deletion protection on.",
    remediation="Set `deletion_protection=True` on the gcp.container.Cluster or aws.eks.Cluster; turn it "
    "off in a separate, reviewed update before a deliberate teardown.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    types=(GKE_CLUSTER, EKS_CLUSTER),
    check=_check_deletion,
    tags=["cloud", "availability"],
)


def _check_private_nodes(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    props = resource.props
    if resource.type == GKE_CLUSTER:
        if dig(props, "privateClusterConfig", "enablePrivateNodes") is not True:
            report(f"{resource.ref()}: nodes get public IPs; enable private nodes")
    elif dig(props, "networkConfig", "enablePrivateNodes") is False:
        report(f"{resource.ref()}: networkConfig.enablePrivateNodes is false, so its nodes get public IPs")


gke_private_nodes = resource_rule(
    name="gke-private-nodes",
    description="GKE nodes have internal IP addresses only.",
    remediation="Set `private_cluster_config.enable_private_nodes=True` on the cluster (with Cloud NAT "
    "for egress) and never set `network_config.enable_private_nodes=False` on a node pool.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(GKE_CLUSTER, GKE_NODE_POOL),
    check=_check_private_nodes,
    tags=["cloud", "security", "gke"],
)


def _check_endpoint(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    vpc = resource.props.get("vpcConfig") or {}
    if vpc.get("endpointPublicAccess") is False:
        if vpc.get("endpointPrivateAccess") is not True:
            report(f"{resource.ref()}: both API endpoints are off; enable endpointPrivateAccess")
        return
    cidrs = [str(c) for c in vpc.get("publicAccessCidrs") or []]
    open_cidrs = [c for c in cidrs if c in ("0.0.0.0/0", "::/0")]
    if not cidrs or open_cidrs:
        report(
            f"{resource.ref()}: the public API endpoint is open to the internet "
            f"({', '.join(open_cidrs) or 'publicAccessCidrs unset = 0.0.0.0/0'})"
        )
    if vpc.get("endpointPrivateAccess") is not True:
        report(
            f"{resource.ref()}: endpointPrivateAccess is off, so nodes reach the API server over the internet"
        )


eks_restricted_endpoint = resource_rule(
    name="eks-restricted-endpoint",
    description="The EKS API endpoint is private, or public only to listed CIDRs.",
    remediation="Set `vpc_config.endpoint_private_access=True` and either "
    "`endpoint_public_access=False` or `public_access_cidrs` to the operators' ranges.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(EKS_CLUSTER,),
    check=_check_endpoint,
    tags=["cloud", "security", "eks"],
)


def _check_imds(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    tokens = dig(resource.props, "metadataOptions", "httpTokens")
    if tokens != "required":
        report(
            f"{resource.ref()}: metadataOptions.httpTokens is {tokens or 'unset (optional)'}, so IMDSv1 "
            "hands node credentials to any pod that can reach 169.254.169.254"
        )


eks_imdsv2 = resource_rule(
    name="eks-imdsv2",
    description="EC2 launch templates and instances require IMDSv2 session tokens.",
    remediation="Set `metadata_options={http_tokens: required, http_put_response_hop_limit: 2}` "
    "(hop limit 1 to keep pods away from the node role).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(LAUNCH_TEMPLATE, EC2_INSTANCE),
    check=_check_imds,
    tags=["cloud", "security", "eks"],
)

POLICIES = [
    gpu_pool_taint,
    cluster_deletion_protection,
    gke_private_nodes,
    eks_restricted_endpoint,
    eks_imdsv2,
]
