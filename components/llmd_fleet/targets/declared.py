"""What a target's Pulumi half hands the program: the cluster and what the platform layer needs to
know about it (`declare` in llmd_fleet/targets/<kind>/build.py), and the contract that half keeps
(`TargetBuild`)."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pulumi

from llmd_fleet.conventions import POSTGRES_PORT
from llmd_fleet.versions import Chart

if TYPE_CHECKING:
    from llmd_fleet.images.build import ImageRegistry
    from llmd_fleet.stack.model import StackConfig


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
    kubeconfig: pulumi.Output[str] | None = None
    """The kubeconfig of a cluster the stack created, exported as the stack's `kubeconfig`
    output; None where the cluster is reached through the user's kubeconfig."""


@dataclass(frozen=True)
class ReservedGatewayAddress:
    """An internal address the target reserves for a gateway its platform manages (GKE's
    gke-l7-rilb), which the agentic API sends its inference requests back to."""

    address: str
    """The IPv4 address (the agentic API's hostAliases map the upstream host to it)."""
    gateway_addresses: list[dict[str, str]]
    """The Gateway's `spec.addresses` naming it (GKE: a `NamedAddress`)."""
    resource: pulumi.Resource
    """The reservation, which the Gateway waits for."""


@dataclass(frozen=True)
class ManagedDatabase:
    """A database a target's platform runs for `llmd-fleet:responses` (Cloud SQL, RDS): where the
    agentic API reaches it."""

    host: pulumi.Output[str]
    """Private address or DNS name of the primary."""
    port: int = POSTGRES_PORT
    resources: list[pulumi.Resource] = field(default_factory=list)
    """What the agentic API waits for (the instance, its database and user)."""
    gateway_address: ReservedGatewayAddress | None = None
    """The address reserved for the platform's managed gateway, when the stack uses it."""


class TargetBuild(Protocol):
    """A target kind's Pulumi half: the module `BUILDS[kind]` names (llmd_fleet/targets/specs.py),
    imported only for a stack of that kind."""

    def declare(
        self, config: "StackConfig", secrets: SecretSource, parent: pulumi.Resource | None = None
    ) -> DeclaredTarget:
        """Create (or reach) the cluster and what the platform layer needs to know about it."""
        ...

    def image_registry(self, config: "StackConfig", secrets: SecretSource) -> "ImageRegistry":
        """Where the serving image build pushes, with its credentials (`ImageBuildArgs.registry`)."""
        ...

    def responses_database(
        self, config: "StackConfig", target: DeclaredTarget, password: pulumi.Input[str]
    ) -> "ManagedDatabase | None":
        """The kind's managed database for `llmd-fleet:responses`; None: CloudNativePG in the cluster."""
        ...
