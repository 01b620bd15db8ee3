"""Kinds onprem and local, the Pulumi half: an existing cluster through the kubeconfig."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from llmd_fleet.images.build import ImageRegistry, own_registry
from llmd_fleet.targets.declared import DeclaredTarget, ManagedDatabase, SecretSource
from llmd_fleet.targets.onprem.cluster import OnPremCluster

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def declare(
    config: StackConfig, secrets: SecretSource, parent: pulumi.Resource | None = None
) -> DeclaredTarget:
    cluster = OnPremCluster(
        "cluster",
        {
            "kubeconfig": secrets.get_secret("kubeconfig"),
            "context": config.target.kubeconfig_context,
        },
        opts=pulumi.ResourceOptions(parent=parent),
    )
    driver_root = "/" if config.target.gpu_driver == "host" else "/run/nvidia/driver"
    return DeclaredTarget(cluster, [], driver_root, gpu_operator=True, install_gateway_crds=True)


def image_registry(config: StackConfig, secrets: SecretSource) -> ImageRegistry:
    """The image build pushes to the stack's own registry (`images.registry`; kind local builds
    nothing)."""
    images = config.images
    return own_registry(images.registry, images.registry_username, secrets.get_secret("registryPassword"))


def responses_database(
    config: StackConfig, target: DeclaredTarget, password: pulumi.Input[str]
) -> ManagedDatabase | None:
    """None: the serving layers declare CloudNativePG in the cluster."""
    return None
