"""What a target's Pulumi half hands the program: the cluster and what the platform layer needs to
know about it (`declare` in llmd_fleet/targets/<kind>/build.py)."""

from dataclasses import dataclass, field
from typing import Any, Protocol

import pulumi

from llmd_fleet.versions import Chart


class SecretSource(Protocol):
    """Where a target's secrets (`kubeconfig`, `registryPassword`) come from: the stack's config
    (`pulumi.Config`) in the stack program, the component's secret inputs in the `Fleet` component
    (llmd_fleet/facade/component.py)."""

    def get_secret(self, key: str) -> pulumi.Output[str] | None: ...


@dataclass(frozen=True)
class DeclaredTarget:
    """The cluster of a target kind and what the platform layer needs to know about it."""

    cluster: Any
    """The target's cluster component: it has `provider` (and `kubeconfig` when the stack made it)."""
    node_setup: list[pulumi.Resource]
    """Per-target node setup (drivers, fabric) that serving pods need first."""
    driver_root: str
    gpu_operator: bool
    install_gateway_crds: bool
    critical_priority: bool = True
    """Whether driver pods outside kube-system may use system-*-critical priority (not on GKE)."""
    nic_driver: tuple[str, Chart, str] | None = None
    """(release, chart, namespace) of the target's NIC DRA driver when it ships its own DeviceClass
    (EKS: aws-dranet); None installs upstream DRANET where a node group uses its class."""
    gateway_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations for the Gateway's generated Service (EKS: the NLB)."""
    cloud_opts: pulumi.ResourceOptions | None = None
    """Options for the stack's other cloud resources (EKS: the region's AWS provider)."""
