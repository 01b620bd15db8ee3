"""What the program hands a layer's builder: the stack's in-cluster layers are declared by a loop
over the registry's records (llmd_fleet/stack/registry.py `Declaration`, llmd_fleet/program.py
`add_serving_layers`), and each record names a builder in its own layer's folder that reads this
context and returns its component (None: the stack does not use the layer).

The program's inputs (`ServingLayersArgs`), the config and plan the layer is declared for (one
model's view when it is declared per model with `llmd-fleet:models`), the components of the
layers its record says it depends on (`after`) and how a resource lands on the cluster. Pure: the
Pulumi and config types are read by the type checker only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    import pulumi
    import pulumi_kubernetes as k8s

    from llmd_fleet.plan.fleet import FleetPlan
    from llmd_fleet.platform.lws import LeaderWorkerSetController
    from llmd_fleet.stack.model import StackConfig
    from llmd_fleet.targets.declared import ManagedDatabase


class ServingLayersArgs(TypedDict):
    """Arguments of `add_serving_layers`."""

    config: StackConfig
    """The validated stack configuration."""
    plan: FleetPlan
    """The fleet plan derived from it."""
    engine_image: pulumi.Input[str]
    """The image every engine container runs (`serving_image`, llmd_fleet/images/build.py)."""
    hf_token: NotRequired[pulumi.Input[str] | None]
    """Hugging Face token (a secret; default none); when set, `ModelServing` creates the token
    Secret and the router's tokenizer reads it."""
    install_gateway_crds: NotRequired[bool]
    """`GatewayLayer`'s `install_crds` (default `True`; False where the platform ships the CRDs, as
    GKE does)."""
    gateway_annotations: NotRequired[dict[str, str]]
    """`GatewayLayer`'s `infrastructure_annotations` (default `{}`; on EKS the NLB's)."""
    serving_after: NotRequired[list[pulumi.Resource]]
    """Resources `ModelServing` depends on besides the LWS controller: node setup the serving pods
    need first (e.g. GKE's TCPXO DaemonSets); default `[]`."""
    responses_password: NotRequired[pulumi.Input[str] | None]
    """The response store owner's password (a secret; default none); required when
    `config.responses` is set (ConfigError otherwise), and `ResponsesLayer` is declared only with
    it."""
    responses_database: NotRequired[ManagedDatabase | None]
    """With `llmd-fleet:responses` on a cloud target: its managed database (`GkeResponses`,
    `EksResponses`), whose reserved gateway address, if any, becomes the Gateway's address; None
    (the default) declares the CloudNativePG operator and a Cluster in the cluster (on-prem)."""


@dataclass(frozen=True)
class Assembly:
    """The context of one layer's declaration (one model's, for a layer declared per model)."""

    config: StackConfig
    """The stack's config, or the model's view (`model_views`) for a layer declared per model
    with `llmd-fleet:models`."""
    plan: FleetPlan
    """Its plan (the model's, per model; else the one `add_serving_layers` was given)."""
    args: ServingLayersArgs
    """What `add_serving_layers` was called with."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    on_cluster: Callable[..., pulumi.ResourceOptions]
    """Options that put a resource on the cluster, as a child of the program's parent (if any),
    depending on the resources given."""
    lws: LeaderWorkerSetController | None
    """The LWS controller the program released; None where the cluster runs it."""
    views: tuple[StackConfig, ...]
    """Every served model's view, in stack order (one, the config itself, without
    `llmd-fleet:models`)."""
    model: str | None
    """The model this declaration is for (its `models[].name`), when the layer is declared per
    model with `llmd-fleet:models`; else None."""
    after: tuple[pulumi.Resource, ...]
    """The components of the layers the record names in `after`, in that order, that the stack
    declared: a layer declared per model gets its own model's, a layer declared once every
    model's."""
    declared: Mapping[str, tuple[object, ...]]
    """What the layers declared before this one: layer name -> its components so far (per model:
    one per model already declared)."""

    @property
    def several_models(self) -> bool:
        """Whether the stack serves several models (`llmd-fleet:models`)."""
        return bool(self.args["config"].models)

    def options(self, *extra: pulumi.Resource) -> pulumi.ResourceOptions:
        """`on_cluster` depending on `after` and then on `extra`."""
        return self.on_cluster(*self.after, *extra)
