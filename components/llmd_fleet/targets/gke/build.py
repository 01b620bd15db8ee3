"""Kind gke, the Pulumi half: the GKE cluster, its TCPXO node setup, the image build's registry
(Artifact Registry) and the Cloud SQL response store. Imported only for a gke stack (it loads the
Google Cloud SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from llmd_fleet.images.build import ImageRegistry, RegistryPush
from llmd_fleet.images.spec import IMAGE_NAME
from llmd_fleet.targets.declared import DeclaredTarget, ManagedDatabase, SecretSource
from llmd_fleet.targets.gke.cluster import GkeCluster
from llmd_fleet.targets.gke.config import GkeTarget
from llmd_fleet.targets.gke.database import GkeResponses
from llmd_fleet.targets.gke.tcpxo import TcpxoNodeSetup
from llmd_fleet.targets.gke.tcpxo_plan import GKE_DRIVER_ROOT

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def _target(config: StackConfig) -> GkeTarget:
    assert isinstance(config.target, GkeTarget), "the gke build ran for another kind"
    return config.target


def declare(
    config: StackConfig, secrets: SecretSource, parent: pulumi.Resource | None = None
) -> DeclaredTarget:
    gke = _target(config).gke
    cluster = GkeCluster(
        "cluster",
        {"gke": gke, "node_groups": config.fleet.node_groups},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    setup = TcpxoNodeSetup(
        "tcpxo",
        {
            "gpu_networks": [(n.vpc, n.subnet) for n in cluster.gpu_network_names],
            "accelerators": cluster.accelerators,
        },
        opts=pulumi.ResourceOptions(parent=parent, providers={"kubernetes": cluster.provider}),
    )
    # GKE ships the Gateway API and InferencePool CRDs (from the fleet's minimum Kubernetes
    # version on); no GPU Operator on COS.
    return DeclaredTarget(
        cluster,
        [setup],
        GKE_DRIVER_ROOT,
        gpu_operator=False,
        install_gateway_crds=False,
        critical_priority=False,
        kubeconfig=cluster.kubeconfig,
    )


GCP_REGISTRY_USER = "oauth2accesstoken"
"""Artifact Registry accepts an OAuth access token as the password of this user."""


def artifact_registry(project: pulumi.Input[str], location: str) -> ImageRegistry:
    """An Artifact Registry repository in `project` and `location`, pushed to with the
    provider's access token."""

    def declare(name: str, repository: str, parent: pulumi.Resource) -> RegistryPush:
        import pulumi_gcp as gcp  # its submodules load on first use: only these two

        ar = gcp.artifactregistry.Repository(
            f"{name}-repository",
            repository_id=repository,
            location=location,
            project=project,
            format="DOCKER",
            description="llmd-fleet serving images",
            opts=pulumi.ResourceOptions(parent=parent),
        )
        host = f"{location}-docker.pkg.dev"
        url = pulumi.Output.all(ar.project, ar.repository_id).apply(
            lambda a: f"{host}/{a[0]}/{a[1]}/{IMAGE_NAME}"
        )
        token = gcp.organizations.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=parent))
        return RegistryPush(url, host, GCP_REGISTRY_USER, token.access_token)

    return declare


def image_registry(config: StackConfig, secrets: SecretSource) -> ImageRegistry:
    """The image build pushes to Artifact Registry in the cluster's project and region."""
    gke = _target(config).gke
    return artifact_registry(gke.project, gke.region)


def responses_database(
    config: StackConfig, target: DeclaredTarget, password: pulumi.Input[str]
) -> ManagedDatabase | None:
    """The Cloud SQL response store on the cluster's network."""
    assert config.responses is not None and isinstance(target.cluster, GkeCluster)
    gke = _target(config).gke
    network = target.cluster.network
    return GkeResponses(
        "responses-db",
        {
            "gke": gke,
            "responses": config.responses,
            "gateway_implementation": config.gateway.implementation,
            "network": network.network.id,
            "subnet": network.subnet.id,
            "password": password,
        },
    ).database
