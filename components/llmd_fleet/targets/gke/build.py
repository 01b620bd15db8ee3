"""Kind gke, the Pulumi half: the GKE cluster, its TCPXO node setup, the image build's registry and
the Cloud SQL response store. Imported only for a gke stack (it loads the Google Cloud SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi

from llmd_fleet.layers.responses.component import ManagedDatabase
from llmd_fleet.targets.declared import DeclaredTarget, SecretSource
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
    )


def image_registry_args(config: StackConfig, secrets: SecretSource) -> dict[str, Any]:
    """The image build pushes to Artifact Registry in the cluster's project and region."""
    gke = _target(config).gke
    return {
        "gcp_project": gke.project,
        "gcp_location": gke.region,
    }


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
