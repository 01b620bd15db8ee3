"""Kind eks, the Pulumi half: the EKS cluster, the image build's registry (ECR) and the RDS response
store. Imported only for an eks stack (it loads the AWS SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from llmd_fleet.images.build import CACHE_TAG_PREFIX, ImageRegistry, RegistryPush, registry_host
from llmd_fleet.images.spec import IMAGE_NAME
from llmd_fleet.targets.declared import DeclaredTarget, ManagedDatabase, SecretSource
from llmd_fleet.targets.eks.cluster import ADDONS, EksCluster
from llmd_fleet.targets.eks.config import EksTarget
from llmd_fleet.targets.eks.database import EksResponses
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def _target(config: StackConfig) -> EksTarget:
    assert isinstance(config.target, EksTarget), "the eks build ran for another kind"
    return config.target


def aws_nlb_annotations(scheme: str) -> dict[str, str]:
    """Service annotations that put a Gateway's LoadBalancer Service behind an AWS Network Load
    Balancer (EKS's built-in service controller); `scheme` is `internal` or `internet-facing`."""
    annotations = {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
    if scheme == "internal":
        annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] = "true"
    return annotations


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
        kubeconfig=cluster.kubeconfig,
    )


def ecr_registry(name: str, repository: str, parent: pulumi.Resource) -> RegistryPush:
    """An ECR repository `<repository>/<image>` (scanned on push, tags immutable but the build
    cache's), pushed to with the registry's authorization token."""
    import pulumi_aws as aws

    ecr = aws.ecr.Repository(
        f"{name}-repository",
        name=f"{repository}/{IMAGE_NAME}",
        image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
        # Image tags hash their inputs, so a tag never needs to move; only the build cache tags
        # are rewritten by every build.
        image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
        image_tag_mutability_exclusion_filters=[
            aws.ecr.RepositoryImageTagMutabilityExclusionFilterArgs(
                filter=f"{CACHE_TAG_PREFIX}*", filter_type="WILDCARD"
            )
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )
    auth = aws.ecr.get_authorization_token_output(
        registry_id=ecr.registry_id, opts=pulumi.InvokeOutputOptions(parent=parent)
    )
    return RegistryPush(
        ecr.repository_url, ecr.repository_url.apply(registry_host), auth.user_name, auth.password
    )


def image_registry(config: StackConfig, secrets: SecretSource) -> ImageRegistry:
    """The image build pushes to ECR in the cluster's region (the region's provider comes with
    the build's options, `DeclaredTarget.cloud_opts`)."""
    return ecr_registry


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
