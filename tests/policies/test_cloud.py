"""The policy pack: cloud."""

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from tests.policies.helpers import (
    p5_node_group,
    record,
    violations,
)

# The cloud SDKs are loaded at run time: they are large enough that type-checking them would
# dominate `make test`, and these tests only register their resources under mocks.
aws: Any = importlib.import_module("pulumi_aws")
gcp: Any = importlib.import_module("pulumi_gcp")


def test_gpu_pools_are_tainted():
    taint = gcp.container.NodePoolNodeConfigTaintArgs(
        key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE"
    )

    def pools(tainted: bool) -> Callable[[], None]:
        def build() -> None:
            gcp.container.NodePool(
                "a3",
                cluster="c",
                node_count=2,
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type="a3-megagpu-8g",
                    guest_accelerators=[
                        gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                            type="nvidia-h100-mega-80gb", count=8
                        )
                    ],
                    taints=[taint] if tainted else None,
                ),
            )
            gcp.container.NodePool(
                "cpu",
                cluster="c",
                node_config=gcp.container.NodePoolNodeConfigArgs(machine_type="n2-standard-8"),
            )
            p5_node_group(
                nodes=1,
                ami_type="AL2023_x86_64_NVIDIA",
                taints=[aws.eks.NodeGroupTaintArgs(key="nvidia.com/gpu", value="true", effect="NO_SCHEDULE")]
                if tainted
                else None,
            )

        return build

    assert violations("gpu-pool-taint", record(pools(True))) == []
    assert violations("gpu-pool-taint", record(pools(False))) == [
        "gcp:container/nodePool:NodePool a3: GPU nodes (a3-megagpu-8g) without the "
        "nvidia.com/gpu:NoSchedule taint",
        "aws:eks/nodeGroup:NodeGroup p5: GPU node group (p5.48xlarge) without the nvidia.com/gpu:NoSchedule "
        "taint",
    ]


def test_gke_cluster_protection_and_private_nodes():
    def clusters(safe: bool) -> Callable[[], None]:
        def build() -> None:
            gcp.container.Cluster(
                "gke",
                location="us-central1-a",
                deletion_protection=None if safe else False,
                private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                    enable_private_nodes=safe
                ),
            )
            gcp.container.NodePool(
                "pool",
                cluster="gke",
                network_config=gcp.container.NodePoolNetworkConfigArgs(enable_private_nodes=safe),
            )

        return build

    safe, unsafe = record(clusters(True)), record(clusters(False))
    assert (
        violations("cluster-deletion-protection", safe) == [] and violations("gke-private-nodes", safe) == []
    )
    assert violations("cluster-deletion-protection", unsafe) == [
        "gcp:container/cluster:Cluster gke: deletionProtection is off, so one `pulumi destroy` or replace "
        "deletes the cluster"
    ]
    assert violations("gke-private-nodes", unsafe) == [
        "gcp:container/cluster:Cluster gke: nodes get public IPs; enable private nodes",
        "gcp:container/nodePool:NodePool pool: networkConfig.enablePrivateNodes is false, so its nodes get "
        "public IPs",
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_eks_cluster_endpoint_protection_and_imdsv2():
    def cluster(safe: bool) -> Callable[[], None]:
        def build() -> None:
            aws.eks.Cluster(
                "eks",
                role_arn="arn:aws:iam::0:role/c",
                deletion_protection=True if safe else None,
                vpc_config=aws.eks.ClusterVpcConfigArgs(
                    subnet_ids=["s"],
                    endpoint_private_access=True,
                    endpoint_public_access=True,
                    public_access_cidrs=["203.0.113.0/24"] if safe else None,
                ),
            )
            aws.ec2.LaunchTemplate(
                "p5",
                metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                    http_tokens="required" if safe else "optional"
                ),
            )

        return build

    safe, unsafe = record(cluster(True)), record(cluster(False))
    for name in ("cluster-deletion-protection", "eks-restricted-endpoint", "eks-imdsv2"):
        assert violations(name, safe) == [], name
    assert violations("cluster-deletion-protection", unsafe) == [
        "aws:eks/cluster:Cluster eks: deletionProtection is off, so one `pulumi destroy` or replace deletes "
        "the cluster"
    ]
    assert violations("eks-restricted-endpoint", unsafe) == [
        "aws:eks/cluster:Cluster eks: the public API endpoint is open to the internet (publicAccessCidrs "
        "unset = 0.0.0.0/0)"
    ]
    assert violations("eks-imdsv2", unsafe) == [
        "aws:ec2/launchTemplate:LaunchTemplate p5: metadataOptions.httpTokens is optional, so IMDSv1 hands "
        "node credentials to any pod that can reach 169.254.169.254"
    ]
