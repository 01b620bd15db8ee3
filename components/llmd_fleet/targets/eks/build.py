"""Kind eks, the Pulumi half: the EKS cluster, the image build's registry (ECR) and the RDS response
store. Imported only for an eks stack (it loads the AWS SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi

from llmd_fleet.layers.gateway.specs import aws_nlb_annotations
from llmd_fleet.layers.responses.component import ManagedDatabase
from llmd_fleet.targets.declared import DeclaredTarget, SecretSource
from llmd_fleet.targets.eks.cluster import ADDONS, EksCluster
from llmd_fleet.targets.eks.config import EksTarget
from llmd_fleet.targets.eks.database import EksResponses
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def _target(config: StackConfig) -> EksTarget:
    assert isinstance(config.target, EksTarget), "the eks build ran for another kind"
    return config.target


def declare(
    config: StackConfig, secrets: SecretSource, parent: pulumi.Resource | None = None
) -> DeclaredTarget:
    eks = _target(config).eks
    cluster = EksCluster(
        "cluster",
        {
            "eks": eks,
            "node_groups": config.fleet.node_groups,
            "cluster_name": f"llmd-{pulumi.get_stack()}",
            "kubernetes_version": versions().kubernetes.eks,
            "addon_versions": {name: versions().software[f"eks-addon-{name}"] for name in ADDONS},
        },
        opts=pulumi.ResourceOptions(parent=parent),
    )
    # AL2023 NVIDIA AMI: host driver at /, no GPU Operator. aws-dranet publishes the EFAs and
    # ships the efa.networking.k8s.aws DeviceClass itself.
    return DeclaredTarget(
        cluster,
        [],
        "/",
        gpu_operator=False,
        install_gateway_crds=True,
        nic_driver=("aws-dranet", versions().chart("aws-dranet"), "kube-system"),
        gateway_annotations=aws_nlb_annotations(eks.load_balancer_scheme),
        cloud_opts=pulumi.ResourceOptions(providers={"aws": cluster.aws_provider}),
    )


def image_registry_args(config: StackConfig, secrets: SecretSource) -> dict[str, Any]:
    """The image build pushes to ECR in the cluster's region: nothing to add."""
    return {}


def responses_database(
    config: StackConfig, target: DeclaredTarget, password: pulumi.Input[str]
) -> ManagedDatabase | None:
    """The RDS response store in the cluster's VPC."""
    eks, cluster = _target(config).eks, target.cluster
    assert config.responses is not None and isinstance(cluster, EksCluster)
    return EksResponses(
        "responses-db",
        {
            "eks": eks,
            "responses": config.responses,
            "cluster_name": cluster.cluster_name,
            "vpc_id": cluster.vpc.id,
            "cluster_security_group_id": cluster.cluster_security_group_id,
            "password": password,
            "tags": cluster.tags,
        },
        opts=target.cloud_opts,
    ).database
