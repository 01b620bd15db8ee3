"""The registry: one typed record per section owner (each layer under layers/, the target, the
config core's sections, the image), from which the stack's key tables, its cross-field rules and
the serving namespace's flow table are derived. It sits above layers/ and targets/ and imports
them; config/ imports neither (docs/architecture.md, "The registry").

Adding a layer is a folder under layers/ and one `LayerSpec` in `LAYERS` (its public names,
`LAYER_EXPORTS`, follow); a layer that owns a config key also declares that key's field on
`StackConfig` (llmd_fleet/stack/model.py: a static class, so the type checker sees every
section), and tests/test_registry.py holds the two against each other. A layer the program
declares has a `Declaration` (its builder in its own folder, its position, what it depends on):
`add_serving_layers` (llmd_fleet/program.py) loops over `DECLARED`. Adding a target kind
is a folder under targets/ and its entry in llmd_fleet/targets/specs.py (`SPECS`, `BUILDS`),
which the `target` record reads. Pure.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import TypeAdapter

from llmd_fleet.config.rules import model_problems, node_group_problems, workload_problems
from llmd_fleet.core.netpol import ClusterRanges, PolicySpec
from llmd_fleet.core.problems import Problem
from llmd_fleet.layers.autoscaling.rules import autoscaling_problems
from llmd_fleet.layers.gateway import flows as gateway_flows
from llmd_fleet.layers.gateway.rules import gateway_problems
from llmd_fleet.layers.modelexpress import flows as modelexpress_flows
from llmd_fleet.layers.modelexpress.rules import weight_loading_problems
from llmd_fleet.layers.observability.rules import observability_problems
from llmd_fleet.layers.preflight import flows as preflight_flows
from llmd_fleet.layers.preflight.rules import preflight_problems
from llmd_fleet.layers.responses import flows as responses_flows
from llmd_fleet.layers.responses.rules import responses_problems
from llmd_fleet.layers.router import flows as router_flows
from llmd_fleet.layers.router.rules import router_problems
from llmd_fleet.layers.serving import flows as serving_flows
from llmd_fleet.layers.serving.rules import (
    canary_problems,
    kv_tier_problems,
    role_problems,
    simulator_problems,
)
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.stack.model import MODELS_KEY, SECRET_KEYS, StackConfig, TargetConfig
from llmd_fleet.stack.models import lora_problems
from llmd_fleet.targets.base import kubernetes_version_problems
from llmd_fleet.targets.images import images_problems
from llmd_fleet.targets.specs import SPECS

Rule = Callable[[StackConfig], list[Problem]]
"""A cross-field rule: the problems of a validated, completed config (none: it holds)."""
Flows = Callable[[StackConfig, FleetPlan, ClusterRanges], Mapping[str, PolicySpec]]
"""A layer's NetworkPolicy flows in the serving namespace: policy name suffix -> spec."""


@dataclass(frozen=True)
class Declaration:
    """How the program declares a layer (`add_serving_layers`, llmd_fleet/program.py loops over
    the records): its builder, where it stands in the order of declaration, what it depends on
    and whether it is declared with several models."""

    builder: str
    """`module:function` of its builder, in its own folder (imported only by the program): the
    function takes the program's context (llmd_fleet/layers/assembly.py `Assembly`), reads its
    arguments from the config, the plan and the program's inputs, and returns its component, or
    None when the stack does not use the layer."""
    position: int
    """Its place in the order the program declares the layers (ascending; after every layer in
    `after`). With `llmd-fleet:models`, consecutive layers declared per model are declared model
    by model (the first model's, then the next's)."""
    after: tuple[str, ...] = ()
    """The layers whose components its component depends on (Pulumi `depends_on`), in order: per
    model, its own model's component of a layer declared per model; once, every model's."""
    with_models: bool = True
    """Whether it is declared on a stack with `llmd-fleet:models` (False: single-model stacks
    only, as the responses API, autoscaling and the canary are today)."""
    input_problems: str | None = None
    """`module:function` of a check of the program's inputs (the `Assembly` -> `Problem`s), run
    for every record before anything is declared."""


@dataclass(frozen=True)
class LayerSpec:
    """What the rest of the package needs to know about one section owner: a layer (its folder
    under layers/) or a section of the config core, the target or the image (`folder` None)."""

    name: str
    """The owner's name; a layer's is its folder under `layers/`."""
    keys: tuple[str, ...] = ()
    """The `llmd-fleet:<key>` sections it owns, each a field of `StackConfig` (its model and
    whether it is required come from that field). A layer configured inside another's section
    (autoscaling, preflight and ModelExpress under `serving`) owns none."""
    rules: tuple[Rule, ...] = ()
    """Its cross-field rules, run in this order after every section validated."""
    namespace_flows: Flows | None = None
    """The NetworkPolicy flows of its pods in the serving namespace (its `flows.py`)."""
    build: str | None = None
    """`module:Component` that declares it (imported only by the program), None for a section
    without resources of its own."""
    per_model: bool = False
    """Whether it is declared once per served model (`llmd-fleet:models`): by the program, or by
    the `declared_by` layer's component, which is then per model too."""
    folder: bool = True
    """Whether it is a folder under `layers/` (False: the config core, the target, the image)."""
    declared_by: str | None = None
    """The layer whose component declares this one's as a child (preflight and ModelExpress:
    `serving`); None: the program declares it (`add_serving_layers`), and the package exports it."""
    declaration: Declaration | None = None
    """How the program declares it (None: it declares nothing, or another layer's component does)."""

    @property
    def component(self) -> tuple[str, str] | None:
        """`(module, class)` of its component, from `build`."""
        if self.build is None:
            return None
        module, _, name = self.build.partition(":")
        return module, name

    @property
    def exports(self) -> dict[str, str]:
        """Its public names (the component and its `<Component>Args` TypedDict) -> their module:
        none for a component another layer declares."""
        if self.component is None or self.declared_by is not None:
            return {}
        module, name = self.component
        return {name: module, f"{name}Args": module}


def _target_kind_problems(config: StackConfig) -> list[Problem]:
    """The rules of the stack's target kind (llmd_fleet/targets/<kind>/rules.py via `SPECS`)."""
    return SPECS[config.target.kind].problems(config)


def _target_fleet_problems(config: StackConfig) -> list[Problem]:
    """The kind's rules of the other sections (`TargetSpec.fleet_problems`: its node groups, the
    engine), after the Kubernetes version rule."""
    return SPECS[config.target.kind].fleet_problems(config)


LAYERS: tuple[LayerSpec, ...] = (
    LayerSpec(
        "target",
        keys=("target",),
        rules=(_target_kind_problems, kubernetes_version_problems, _target_fleet_problems),
        folder=False,
    ),
    LayerSpec("fleet", keys=("fleet",), rules=(node_group_problems,), folder=False),
    LayerSpec("model", keys=("model",), rules=(model_problems, lora_problems), folder=False),
    LayerSpec(
        "serving",
        keys=("serving",),
        rules=(simulator_problems, role_problems, kv_tier_problems, canary_problems),
        namespace_flows=serving_flows.flows,
        build="llmd_fleet.layers.serving.component:ModelServing",
        per_model=True,
        declaration=Declaration("llmd_fleet.layers.serving.component:declare", position=10),
    ),
    LayerSpec(
        "router",
        keys=("router",),
        rules=(router_problems,),
        namespace_flows=router_flows.flows,
        build="llmd_fleet.layers.router.component:Router",
        per_model=True,
        declaration=Declaration(
            "llmd_fleet.layers.router.component:declare", position=30, after=("gateway", "serving")
        ),
    ),
    LayerSpec(
        "preflight",
        rules=(preflight_problems,),
        namespace_flows=preflight_flows.flows,
        build="llmd_fleet.layers.preflight.component:FabricPreflight",
        per_model=True,
        declared_by="serving",
    ),
    LayerSpec(
        "gateway",
        keys=("gateway",),
        rules=(gateway_problems,),
        namespace_flows=gateway_flows.flows,
        build="llmd_fleet.layers.gateway.component:GatewayLayer",
        declaration=Declaration("llmd_fleet.layers.gateway.bbr:declare", position=20, after=("serving",)),
    ),
    LayerSpec(
        "modelexpress",
        rules=(weight_loading_problems,),
        namespace_flows=modelexpress_flows.flows,
        build="llmd_fleet.layers.modelexpress.component:ModelExpressServer",
        per_model=True,
        declared_by="serving",
    ),
    LayerSpec("images", keys=("images",), rules=(images_problems,), build=None, folder=False),
    LayerSpec(
        "observability",
        keys=("observability",),
        rules=(observability_problems,),
        build="llmd_fleet.layers.observability.component:Observability",
        per_model=True,
        declaration=Declaration(
            "llmd_fleet.layers.observability.component:declare", position=70, after=("serving", "router")
        ),
    ),
    LayerSpec(
        "responses",
        keys=("responses",),
        rules=(responses_problems,),
        namespace_flows=responses_flows.flows,
        build="llmd_fleet.layers.responses.component:ResponsesLayer",
        declaration=Declaration(
            "llmd_fleet.layers.responses.component:declare",
            position=60,
            after=("gateway", "router", "serving"),
            with_models=False,
            input_problems="llmd_fleet.layers.responses.component:input_problems",
        ),
    ),
    LayerSpec("workload", keys=("workload",), rules=(workload_problems,), folder=False),
    LayerSpec(
        "autoscaling",
        rules=(autoscaling_problems,),
        build="llmd_fleet.layers.autoscaling.component:Autoscaling",
        declaration=Declaration(
            "llmd_fleet.layers.autoscaling.component:declare",
            position=80,
            after=("serving", "router", "observability"),
            with_models=False,
        ),
    ),
    # The serving namespace's NetworkPolicies (the union of the layers' flows above) and the
    # canary revision (serving, router and policies of a derived config): declared by the program
    # with the layers, neither a folder under layers/ nor a config owner.
    LayerSpec(
        "network",
        per_model=True,
        folder=False,
        declaration=Declaration("llmd_fleet.security.isolation:declare", position=40, after=("serving",)),
    ),
    LayerSpec(
        "canary",
        folder=False,
        declaration=Declaration(
            "llmd_fleet.program:declare_canary", position=50, after=("serving",), with_models=False
        ),
    ),
)
"""Every section owner, in the order their keys are validated and reported, their rules run and
their flows are united (an owner's policy before the rules a later layer adds to it)."""

REGISTERED_LAYERS = frozenset(spec.name for spec in LAYERS if spec.folder)
"""The folders under `layers/` the registry knows (tests/test_registry.py: every one of them)."""
REGISTERED_TARGETS = frozenset(SPECS)
"""The folders under `targets/` the registry knows: one per kind (`SPECS`; its Pulumi half is
`BUILDS[kind]`, kind local's the onprem one)."""


def _section_type(key: str) -> Any:
    """The model of `llmd-fleet:<key>`: its `StackConfig` field's type without `None`."""
    annotation = StackConfig.model_fields[key].annotation
    if get_origin(annotation) is Union or type(annotation).__name__ == "UnionType":
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _adapter(key: str) -> TypeAdapter[Any]:
    """How `llmd-fleet:<key>` is validated on its own (the target by its discriminated union)."""
    return TypeAdapter(TargetConfig if key == "target" else _section_type(key))


SECTION_KEYS = tuple(key for spec in LAYERS for key in spec.keys)
"""Every section key, in registry order."""
OBJECT_KEYS: dict[str, TypeAdapter[Any]] = {
    key: _adapter(key) for key in SECTION_KEYS if StackConfig.model_fields[key].is_required()
}
"""The required sections and how each is validated, in the order errors are reported."""
OPTIONAL_OBJECT_KEYS: dict[str, TypeAdapter[Any]] = {
    key: _adapter(key) for key in SECTION_KEYS if not StackConfig.model_fields[key].is_required()
}
"""The optional sections: their models default every field (`responses`: absent is off)."""
RULES: tuple[Rule, ...] = tuple(rule for spec in LAYERS for rule in spec.rules)
"""The cross-field rules, in the order their problems are reported."""
NAMESPACE_FLOWS: tuple[Flows, ...] = tuple(
    spec.namespace_flows for spec in LAYERS if spec.namespace_flows is not None
)
"""Every layer with pods in the serving namespace, in the order their policies are declared."""
LAYER_EXPORTS: dict[str, str] = {name: module for spec in LAYERS for name, module in spec.exports.items()}
"""The layers' public names -> their module: what `llmd_fleet` exports besides its own table
(components/llmd_fleet/__init__.py reads it on first use)."""
TARGET_EXPORTS: dict[str, str] = {
    exported: module
    for spec in SPECS.values()
    for module, _, name in (component.partition(":") for component in spec.components)
    for exported in (name, f"{name}Args")
}
"""The target kinds' public components and their `<Component>Args` -> their module (each kind's
`TargetSpec.components`): what `llmd_fleet` exports besides its table and the layers' names."""
DECLARED: tuple[LayerSpec, ...] = tuple(
    sorted(
        (spec for spec in LAYERS if spec.declaration is not None),
        key=lambda spec: spec.declaration.position if spec.declaration is not None else 0,
    )
)
"""The records the program declares, in its order of declaration (`Declaration.position`)."""
KNOWN_KEYS = frozenset(OBJECT_KEYS) | frozenset(OPTIONAL_OBJECT_KEYS) | frozenset(SECRET_KEYS) | {MODELS_KEY}
"""Every key a stack file may set under `llmd-fleet:`."""
