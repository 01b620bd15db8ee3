"""The stack program: config -> plan -> target cluster -> platform -> in-cluster layers -> outputs.

`add_serving_layers` declares the in-cluster layers every fleet has, on any cluster: the LWS
controller, the prefill/decode DisaggregatedSet, the gateway, the router and the serving
namespace's NetworkPolicies, wired in the order they need each other; with `llmd-fleet:responses`
also the agentic API and its routes. `build_fleet` adds the cluster, the accelerator drivers and
the image build around them; a program of one's own (examples/existing_cluster.py) can call
`add_serving_layers` on a cluster it manages itself.

The same function runs under `pulumi up` and under the mock engine of `llmd-fleet render`. Each
cloud target's components (and with them its SDK) are imported only when a stack uses that
target: the on-prem path imports no cloud SDK (docs/performance.md).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import import_module
from types import MappingProxyType
from typing import Any, TypeVar, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.deploy_secrets import placeholder_secret_problems
from llmd_fleet.config.model import client_model_name
from llmd_fleet.core.problems import PROJECT, ConfigError
from llmd_fleet.images.build import ImageBuild, ImageBuildArgs, serving_image
from llmd_fleet.images.spec import variant_for
from llmd_fleet.layers.assembly import Assembly
from llmd_fleet.layers.assembly import ServingLayersArgs as ServingLayersArgs  # its former home
from llmd_fleet.layers.gateway.component import GatewayLayer
from llmd_fleet.layers.responses.config import PASSWORD_KEY
from llmd_fleet.layers.router.component import Router
from llmd_fleet.layers.serving.canary import canary_config, canary_image
from llmd_fleet.layers.serving.component import ModelServing
from llmd_fleet.layers.serving.config import CANARY_SUFFIX
from llmd_fleet.layers.serving.specs import HF_TOKEN_SECRET
from llmd_fleet.plan.fleet import FleetPlan, PlanError
from llmd_fleet.platform.accelerators import AcceleratorPlatform, AcceleratorPlatformArgs
from llmd_fleet.platform.dra import DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR
from llmd_fleet.platform.lws import LeaderWorkerSetController
from llmd_fleet.security.isolation import NetworkIsolation
from llmd_fleet.stack.model import StackConfig, model_views
from llmd_fleet.stack.parse import check_stack_secrets, parse_config, read_pulumi_config
from llmd_fleet.stack.plans import plan_models
from llmd_fleet.stack.registry import DECLARED, LayerSpec
from llmd_fleet.targets.declared import DeclaredTarget, SecretSource, TargetBuild
from llmd_fleet.targets.extras import MissingExtraError, require_image_build_extra, require_target_extra
from llmd_fleet.targets.specs import BUILDS, fabric_for
from llmd_fleet.versions import Chart, versions

T = TypeVar("T")


@dataclass(frozen=True)
class ServingLayers:
    """What `add_serving_layers` declared: the LWS controller and each layer's components, by the
    name of its record in the registry (llmd_fleet/stack/registry.py `DECLARED`). The layers every
    stack has are typed attributes; any other is read by name and type (`get`, `all`)."""

    lws: LeaderWorkerSetController | None
    """The LWS controller release; None where the cluster runs it (`target.platform: preinstalled`)."""
    components: Mapping[str, tuple[object, ...]]
    """Layer name -> what its builder declared, in order: one per model for a layer declared per
    model with `llmd-fleet:models` (`serving`, `router`, `network`, `observability`), else one. A
    layer the stack does not use is absent (`responses` without `llmd-fleet:responses`,
    `autoscaling` without an autoscaled role, `canary` without `serving.canary`: its
    `CanaryLayers`)."""

    def all(self, layer: str, kind: type[T]) -> tuple[T, ...]:
        """Every component of `layer` (none when the stack does not use it); TypeError when one
        is not a `kind`."""
        found = self.components.get(layer, ())
        for component in found:
            if not isinstance(component, kind):
                raise TypeError(
                    f"layer {layer!r} declared a {type(component).__name__}, not a {kind.__name__}"
                )
        return cast(tuple[T, ...], found)

    def get(self, layer: str, kind: type[T]) -> T | None:
        """The first component of `layer` (the first model's), or None when the stack does not
        use it; TypeError when it is not a `kind`."""
        found = self.all(layer, kind)
        return found[0] if found else None

    def _one(self, layer: str, kind: type[T]) -> T:
        component = self.get(layer, kind)
        if component is None:
            raise LookupError(f"no {layer!r} layer was declared")
        return component

    @property
    def serving(self) -> ModelServing:
        """The (first model's) prefill/decode DisaggregatedSet."""
        return self._one("serving", ModelServing)

    @property
    def gateway(self) -> GatewayLayer:
        """The gateway in front of every model's pool."""
        return self._one("gateway", GatewayLayer)

    @property
    def router(self) -> Router:
        """The (first model's) endpoint picker and InferencePool."""
        return self._one("router", Router)


def _load(reference: str) -> Callable[[Assembly], Any]:
    """A `module:function` of a record's `Declaration`."""
    module, _, name = reference.partition(":")
    return cast(Callable[[Assembly], Any], getattr(import_module(module), name))


def _runs(specs: Sequence[LayerSpec], several_models: bool) -> list[tuple[bool, list[LayerSpec]]]:
    """The records in declaration order, as runs: with several models, consecutive records declared
    per model form one run declared model by model (`True`); every other record is a run of its
    own, declared once."""
    runs: list[tuple[bool, list[LayerSpec]]] = []
    for spec in specs:
        per_model = several_models and spec.per_model
        if per_model and runs and runs[-1][0]:
            runs[-1][1].append(spec)
        else:
            runs.append((per_model, [spec]))
    return runs


def add_serving_layers(
    args: ServingLayersArgs, provider: k8s.Provider, parent: pulumi.Resource | None = None
) -> ServingLayers:
    """Declare the LWS controller and every layer the registry's records declare (serving,
    gateway, router, the namespace's policies, and what the stack enables) on `provider`'s cluster
    (as children of `parent`, the `Fleet` component's, when given), in the records' order, each
    from its builder. With `llmd-fleet:models`, a layer declared per model gets each model's view
    and plan (one gateway in front, with the body-based router and a route per model:
    llmd_fleet/layers/gateway/bbr.py). Raises ConfigError before anything is declared when an
    input a layer needs is missing."""
    config = args["config"]
    several = bool(config.models)

    def on_cluster(*after: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=parent, providers={"kubernetes": provider}, depends_on=list(after)
        )

    views = model_views(config)
    plans = plan_models(config) if several else (args["plan"],)
    stack = Assembly(config, args["plan"], args, provider, on_cluster, None, views, None, (), {})
    if problems := [
        problem
        for spec in DECLARED
        if spec.declaration is not None and spec.declaration.input_problems is not None
        for problem in _load(spec.declaration.input_problems)(stack)
    ]:
        raise ConfigError(problems)
    lws = (
        LeaderWorkerSetController("lws", {"chart": versions().chart("lws")}, opts=on_cluster())
        if config.target.installs_platform
        else None
    )
    declared: dict[str, list[object]] = {}
    per_model: dict[tuple[str, int], object] = {}
    records = {spec.name: spec for spec in DECLARED}

    def declare(spec: LayerSpec, context: Assembly, index: int | None) -> None:
        assert spec.declaration is not None
        after: list[pulumi.Resource] = []
        for name in spec.declaration.after:
            # Declared model by model here and there: its own model's; else every one declared.
            if index is not None and records[name].per_model:
                found = [per_model[(name, index)]] if (name, index) in per_model else []
            else:
                found = declared.get(name, [])
            for component in found:
                if not isinstance(component, pulumi.Resource):
                    raise TypeError(f"{spec.name} depends on {name}, which declared no resource")
                after.append(component)
        context = replace(
            context,
            lws=lws,
            after=tuple(after),
            declared=MappingProxyType({name: tuple(found) for name, found in declared.items()}),
        )
        component = _load(spec.declaration.builder)(context)
        if component is None:
            return
        declared.setdefault(spec.name, []).append(component)
        if index is not None:
            per_model[(spec.name, index)] = component

    specs = [spec for spec in DECLARED if not several or (spec.declaration and spec.declaration.with_models)]
    for model_by_model, run in _runs(specs, several):
        if not model_by_model:
            for spec in run:
                declare(spec, stack, None)
            continue
        for index, (view, plan) in enumerate(zip(views, plans, strict=True)):
            for spec in run:
                declare(spec, replace(stack, config=view, plan=plan, model=view.serving.name), index)
    return ServingLayers(lws=lws, components={name: tuple(found) for name, found in declared.items()})


@dataclass(frozen=True)
class CanaryLayers:
    """The canary revision's own components (layers/serving/canary.py)."""

    serving: ModelServing
    router: Router
    network: NetworkIsolation


def declare_canary(ctx: Assembly) -> CanaryLayers | None:
    """The `canary` record's builder, with `serving.canary`: the canary's DisaggregatedSet (in the
    stable one's namespace, with its Secret and claim templates), its router and InferencePool (no
    objectives) and its NetworkPolicies, each after the stable serving. The gateway's route weighs
    the two pools (layers/gateway/component.py backend_refs). None without a canary."""
    config, plan = ctx.config, ctx.plan
    canary = config.serving.canary
    derived = canary_config(config)
    if canary is None or derived is None or plan.canary is None:
        return None
    (stable,) = ctx.after
    canary_plan = replace(plan, roles=plan.canary.roles, canary=None)
    opts = pulumi.ResourceOptions(providers={"kubernetes": ctx.provider}, depends_on=[stable])
    name = derived.serving.name
    serving = ModelServing(
        name,
        {
            "config": derived,
            "plan": canary_plan,
            "hf_token": ctx.args.get("hf_token"),
            "engine_image": canary_image(config) or ctx.args["engine_image"],
            "beside": cast(ModelServing, stable),
        },
        opts=opts,
    )
    router = Router(
        f"router{CANARY_SUFFIX}",
        {
            "config": derived,
            "plan": canary_plan,
            "hf_token_secret": HF_TOKEN_SECRET if ctx.args.get("hf_token") is not None else None,
            "objectives": False,
        },
        opts=opts,
    )
    network = NetworkIsolation(
        f"network-policies{CANARY_SUFFIX}",
        {"config": derived, "plan": canary_plan},
        opts=opts,
    )
    return CanaryLayers(serving=serving, router=router, network=network)


@dataclass(frozen=True)
class Fleet:
    """The top-level components of a stack."""

    cluster: Any
    """The target's cluster component (llmd_fleet/targets/<kind>/cluster.py): its `provider`
    reaches the cluster."""
    lws: LeaderWorkerSetController | None
    """The LWS controller the stack releases; None with `target.platform: preinstalled`."""
    serving: ModelServing
    gateway: GatewayLayer
    router: Router
    image_build: ImageBuild | None
    """The serving image build, when the stack asks for one (`llmd-fleet:images.build`)."""
    layers: ServingLayers
    """Every in-cluster layer `add_serving_layers` declared."""
    kubeconfig: pulumi.Output[str] | None = None
    """The kubeconfig of a cluster the stack created (`DeclaredTarget.kubeconfig`)."""


def _declare_target(
    config: StackConfig, secrets: SecretSource, parent: pulumi.Resource | None
) -> tuple[TargetBuild, DeclaredTarget]:
    """The target kind's Pulumi half (imported only for that kind: the on-prem path loads no cloud
    SDK) and the cluster it declares."""
    build = cast(TargetBuild, import_module(BUILDS[config.target.kind]))
    return build, build.declare(config, secrets, parent)


def _image_build(
    config: StackConfig,
    build: TargetBuild,
    target: DeclaredTarget,
    secrets: SecretSource,
    parent: pulumi.Resource | None,
) -> ImageBuild | None:
    """The wide-EP image build for the target's fabric, when the stack asks for one."""
    if not config.images.build:
        return None
    args: ImageBuildArgs = {
        "variant": variant_for(fabric_for(config.target.kind).name),
        "registry": build.image_registry(config, secrets),
        "repository": config.images.repository,
    }
    opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=parent), target.cloud_opts)
    return ImageBuild("serving-image", args, opts=opts)


def _engine_image(config: StackConfig, image_build: ImageBuild | None) -> pulumi.Input[str]:
    """The simulator's pinned image for `serving.engine: simulator`, else the serving image."""
    if config.serving.engine == "simulator":
        return versions().image("inference-sim").ref
    return serving_image(fabric_for(config.target.kind, config.images.build), image_build)


def accelerator_platform_args(
    config: StackConfig,
    *,
    driver_root: str | None = None,
    gpu_operator: bool = True,
    nic_driver: tuple[str, Chart, str] | None = None,
    critical_priority: bool = True,
) -> AcceleratorPlatformArgs | None:
    """The `AcceleratorPlatform` a stack's settings ask for, or None when no node group takes its
    GPUs through DRA: the pinned NVIDIA DRA driver, the GPU Operator (with `gpu_operator`; it
    installs the driver when `target.gpuDriver: gpu-operator`), DRANET (`nic_driver` overrides
    it) and its NIC DeviceClass where a node group names that class, and the drivers released
    only with `target.platform: install`. `driver_root` defaults from `target.gpuDriver` (`/`
    for host, `/run/nvidia/driver` for the GPU Operator's driver container). The stack program
    passes its target's values; a program of one's own on a cluster it runs takes the defaults
    (examples/existing_cluster.py)."""
    groups = config.fleet.node_groups.values()
    if not any(g.accelerator_allocation == "dra" for g in groups):
        return None
    uses_dranet = any(g.nic_device_class == DRANET_RDMA_CLASS for g in groups)
    if driver_root is None:
        driver_root = "/" if config.target.gpu_driver == "host" else "/run/nvidia/driver"
    return {
        "driver_root": driver_root,
        "dra_driver_chart": versions().chart("dra-driver-nvidia-gpu"),
        "gpu_operator": (
            (versions().chart("gpu-operator"), config.target.gpu_driver == "gpu-operator")
            if gpu_operator
            else None
        ),
        "nic_driver": nic_driver
        or (("dranet", versions().chart("dranet"), "kube-system") if uses_dranet else None),
        "nic_device_class": (DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR) if uses_dranet else None,
        "critical_priority": critical_priority,
        "install_drivers": config.target.installs_platform,
    }


def declare_fleet(
    config: StackConfig, plan: FleetPlan, secrets: SecretSource, parent: pulumi.Resource | None = None
) -> Fleet:
    """Declare every resource of a fleet: the target's cluster, the accelerator drivers, the image
    build and the serving layers, as children of `parent` when given. `secrets` holds the stack's
    secrets (`pulumi.Config()` in the stack program, the `Fleet` component's secret inputs in
    llmd_fleet/facade/component.py)."""
    build, target = _declare_target(config, secrets, parent)
    cluster = target.cluster
    accelerators = accelerator_platform_args(
        config,
        driver_root=target.driver_root,
        gpu_operator=target.gpu_operator,
        nic_driver=target.nic_driver,
        critical_priority=target.critical_priority,
    )
    if accelerators is not None:
        AcceleratorPlatform(
            "accelerators",
            accelerators,
            opts=pulumi.ResourceOptions(
                parent=parent, providers={"kubernetes": cluster.provider}, depends_on=target.node_setup
            ),
        )
    image_build = _image_build(config, build, target, secrets, parent)
    responses_password = secrets.get_secret(PASSWORD_KEY) if config.responses is not None else None
    layers = add_serving_layers(
        {
            "config": config,
            "plan": plan,
            "hf_token": secrets.get_secret("hfToken") if config.has_hf_token else None,
            # The one place the engine image comes from; a build makes serving wait for the push.
            "engine_image": _engine_image(config, image_build),
            "install_gateway_crds": target.install_gateway_crds,
            "gateway_annotations": target.gateway_annotations,
            "serving_after": target.node_setup,
            "responses_password": responses_password,
            "responses_database": (
                build.responses_database(config, target, responses_password)
                if responses_password is not None
                else None
            ),
        },
        cluster.provider,
        parent,
    )
    return Fleet(
        cluster=cluster,
        lws=layers.lws,
        serving=layers.serving,
        gateway=layers.gateway,
        router=layers.router,
        image_build=image_build,
        layers=layers,
        kubeconfig=target.kubeconfig,
    )


def build_fleet(config: StackConfig, plan: FleetPlan) -> Fleet:
    """Declare every resource of the stack and its outputs."""
    fleet = declare_fleet(config, plan, pulumi.Config())
    serving, gateway, router = fleet.serving, fleet.gateway, fleet.router
    image_build = fleet.image_build
    pulumi.export("gatewayAddress", gateway.address)
    pulumi.export("inferencePool", router.inference_pool.id.apply(lambda _: config.serving.name))
    pulumi.export("namespace", config.serving.namespace)
    pulumi.export("disaggregatedSet", serving.disaggregated_set.id.apply(lambda _: config.serving.name))
    # With `llmd-fleet:models`, every model's GPUs (the plan passed in is the first model's).
    pulumi.export("gpus", sum(p.gpus for p in plan_models(config)) if config.models else plan.gpus)
    if config.models:
        # Every model's pool and the name clients send for it (`inferencePool` is the first's).
        pulumi.export(
            "models",
            [
                {"name": view.serving.name, "servedName": client_model_name(view.model)}
                for view in model_views(config)
            ],
        )
    if image_build is not None:
        pulumi.export("servingImage", image_build.ref)
    if fleet.kubeconfig is not None:  # the stack made the cluster: hand over its kubeconfig
        pulumi.export("kubeconfig", fleet.kubeconfig)
    pulumi.export(
        "roles",
        {r.name: {"instances": r.instances, "nodesPerInstance": r.nodes_per_instance} for r in plan.roles},
    )
    return fleet


def load_from_pulumi() -> StackConfig:
    """Load and validate the current stack's config from the Pulumi runtime (the program reads
    it here; the config layer itself stays free of Pulumi)."""
    from pulumi.runtime import config as runtime_config

    keys = list({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})
    # `pulumi up` passes secret key names in the environment; mocks and the automation API set them
    # in the runtime, so both are consulted.
    env_secrets = set(runtime_config.get_config_secret_keys_env())
    raw, secrets = read_pulumi_config(
        runtime_config.get_config,
        keys,
        lambda key: key in env_secrets or runtime_config.is_config_secret(key),
    )
    return check_stack_secrets(parse_config(raw, secrets))


def load() -> tuple[StackConfig, FleetPlan]:
    """Validate the stack config and plan it (raises ConfigError or PlanError)."""
    config = load_from_pulumi()
    # With `llmd-fleet:models` every model is planned on its share of the node groups; the first
    # model's plan stands for the stack where one plan is read.
    return config, plan_models(config)[0]


def refuse_placeholder_secrets(stack: str) -> None:
    """Under `pulumi up` (not offline rendering, which calls build_fleet with placeholders): a
    secret whose value is a placeholder is refused, naming the key and the command that sets it
    (llmd_fleet/config/deploy_secrets.py). Raises ConfigError."""
    from pulumi.runtime import config as runtime_config

    secret_keys = set(runtime_config.get_config_secret_keys_env())
    values = {
        key.split(":", 1)[1]: runtime_config.get_config(key) or ""
        for key in {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
        if key.startswith(f"{PROJECT}:") and (key in secret_keys or runtime_config.is_config_secret(key))
    }
    if problems := placeholder_secret_problems(values, stack):
        raise ConfigError(problems)


def main() -> None:
    """Entry for `pulumi up`: bad input ends the run with one clean message, no traceback."""
    try:
        config, plan = load()
        require_target_extra(config.target.kind)
        require_image_build_extra(config.images.build)
        refuse_placeholder_secrets(pulumi.get_stack())
    except (ConfigError, PlanError, MissingExtraError) as exc:
        raise pulumi.RunError(str(exc)) from None
    build_fleet(config, plan)
