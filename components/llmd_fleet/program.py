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

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import import_module
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.deploy_secrets import placeholder_secret_problems
from llmd_fleet.config.model import client_model_name
from llmd_fleet.core.problems import PROJECT, ConfigError
from llmd_fleet.images.build import ImageBuild, ImageBuildArgs, serving_image
from llmd_fleet.images.spec import variant_for
from llmd_fleet.layers.autoscaling.component import Autoscaling
from llmd_fleet.layers.gateway.bbr import BodyBasedRouter
from llmd_fleet.layers.gateway.component import GatewayLayer
from llmd_fleet.layers.observability.component import Observability
from llmd_fleet.layers.responses.component import ResponsesLayer
from llmd_fleet.layers.responses.config import PASSWORD_KEY, password_problems
from llmd_fleet.layers.router.component import Router
from llmd_fleet.layers.serving.canary import canary_config, canary_image
from llmd_fleet.layers.serving.component import HF_TOKEN_SECRET, ModelServing
from llmd_fleet.layers.serving.config import CANARY_SUFFIX
from llmd_fleet.plan.fleet import FleetPlan, PlanError
from llmd_fleet.platform.accelerators import AcceleratorPlatform, AcceleratorPlatformArgs
from llmd_fleet.platform.dra import DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR
from llmd_fleet.platform.lws import LeaderWorkerSetController
from llmd_fleet.security.isolation import NetworkIsolation
from llmd_fleet.stack.model import StackConfig, model_views
from llmd_fleet.stack.parse import check_stack_secrets, parse_config, read_pulumi_config
from llmd_fleet.stack.plans import plan_models
from llmd_fleet.targets.declared import DeclaredTarget, ManagedDatabase, SecretSource, TargetBuild
from llmd_fleet.targets.extras import MissingExtraError, require_image_build_extra, require_target_extra
from llmd_fleet.targets.specs import BUILDS, fabric_for
from llmd_fleet.versions import Chart, versions


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
class ServingLayers:
    """What `add_serving_layers` declared: one component per layer (`responses` only with
    `llmd-fleet:responses`)."""

    lws: LeaderWorkerSetController | None
    """The LWS controller release; None where the cluster runs it (`target.platform: preinstalled`)."""
    serving: ModelServing
    gateway: GatewayLayer
    router: Router
    network: NetworkIsolation
    """The serving namespace's NetworkPolicies (llmd_fleet/security/isolation.py)."""
    responses: ResponsesLayer | None = None
    """The agentic API and its routes (llmd_fleet/layers/responses/component.py), with
    `llmd-fleet:responses`."""
    observability: Observability | None = None
    """Monitors, alerts, dashboards and the endpoint picker's metrics auth
    (llmd_fleet/layers/observability/component.py)."""
    autoscaling: Autoscaling | None = None
    """KEDA and the roles' ScaledObjects (llmd_fleet/layers/autoscaling/component.py), with
    `serving.autoscaling` and at least one role enabled."""
    canary: "CanaryLayers | None" = None
    """The canary revision's serving, router and policies, with `serving.canary`."""


def add_serving_layers(
    args: ServingLayersArgs, provider: k8s.Provider, parent: pulumi.Resource | None = None
) -> ServingLayers:
    """Declare the LWS controller, serving, gateway and router on `provider`'s cluster (as children
    of `parent`, the `Fleet` component's, when given)."""
    config, plan = args["config"], args["plan"]
    hf_token = args.get("hf_token")
    responses_password = args.get("responses_password")
    if problems := password_problems(config.responses, responses_password is not None, PROJECT):
        raise ConfigError(problems)
    database = args.get("responses_database")
    reserved = database.gateway_address if database is not None else None

    def on_cluster(*after: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=parent, providers={"kubernetes": provider}, depends_on=list(after)
        )

    lws = (
        LeaderWorkerSetController("lws", {"chart": versions().chart("lws")}, opts=on_cluster())
        if config.target.installs_platform
        else None
    )
    if config.models:
        return _add_model_layers(args, provider, lws, on_cluster)
    serving = ModelServing(
        config.serving.name,
        {"config": config, "plan": plan, "hf_token": hf_token, "engine_image": args["engine_image"]},
        opts=on_cluster(*([lws] if lws is not None else []), *args.get("serving_after", [])),
    )
    gateway = GatewayLayer(
        "gateway",
        {
            "config": config,
            "pool_name": config.serving.name,
            "install_crds": args.get("install_gateway_crds", True),
            "infrastructure_annotations": args.get("gateway_annotations", {}),
            "addresses": reserved.gateway_addresses if reserved is not None else [],
        },
        opts=on_cluster(serving, *([reserved.resource] if reserved is not None else [])),
    )
    router = Router(
        "router",
        {
            "config": config,
            "plan": plan,
            "hf_token_secret": HF_TOKEN_SECRET if hf_token is not None else None,
        },
        # The InferencePool and objective CRDs come with the gateway layer.
        opts=on_cluster(gateway, serving),
    )
    # Default deny plus the fleet's flows, once the namespace exists.
    network = NetworkIsolation("network-policies", {"config": config, "plan": plan}, opts=on_cluster(serving))
    canary = add_canary(args, provider, serving)
    responses = None
    if config.responses is not None and responses_password is not None:
        # The agentic API ahead of the pool's route, and its database
        # (llmd_fleet/layers/responses/component.py).
        responses = ResponsesLayer(
            "responses",
            {
                "config": config,
                "pool_name": config.serving.name,
                "password": responses_password,
                "database": database,
            },
            opts=on_cluster(gateway, router, serving),
        )
    # Scrape objects, alert rules and dashboards of the namespace's workloads.
    observability = Observability(
        "observability", {"config": config, "plan": plan}, opts=on_cluster(serving, router)
    )
    autoscaling = None
    if any(role.autoscaled for role in plan.roles):
        # The scalers exist once the DisaggregatedSet does; KEDA reads the router's and the
        # engines' series from the Prometheus the observability layer feeds.
        autoscaling = Autoscaling(
            "autoscaling", {"config": config, "plan": plan}, opts=on_cluster(serving, router, observability)
        )
    return ServingLayers(
        lws=lws,
        serving=serving,
        gateway=gateway,
        router=router,
        network=network,
        responses=responses,
        observability=observability,
        autoscaling=autoscaling,
        canary=canary,
    )


def _add_model_layers(
    args: ServingLayersArgs,
    provider: k8s.Provider,
    lws: LeaderWorkerSetController | None,
    on_cluster: Callable[..., pulumi.ResourceOptions],
) -> ServingLayers:
    """`llmd-fleet:models`: per model its serving, router (InferencePool, picker pair,
    objectives), NetworkPolicies and observability, each from the model's view; one gateway in
    front with the body-based router and a route per model (llmd_fleet/layers/gateway/bbr.py)."""
    config = args["config"]
    hf_token = args.get("hf_token")
    plans = plan_models(config)
    views = model_views(config)
    first: ModelServing | None = None
    servings: list[ModelServing] = []
    for view, plan in zip(views, plans, strict=True):
        serving = ModelServing(
            view.serving.name,
            {
                "config": view,
                "plan": plan,
                "hf_token": hf_token,
                "engine_image": args["engine_image"],
                "alongside": first,
            },
            opts=on_cluster(*([lws] if lws is not None else []), *args.get("serving_after", [])),
        )
        first = first or serving
        servings.append(serving)
    gateway = GatewayLayer(
        "gateway",
        {
            "config": config,
            "pool_name": config.serving.name,
            "install_crds": args.get("install_gateway_crds", True),
            "infrastructure_annotations": args.get("gateway_annotations", {}),
            "route": False,
        },
        opts=on_cluster(*servings),
    )
    BodyBasedRouter("model-routing", views, opts=on_cluster(gateway, *servings))
    routers: list[Router] = []
    observability: Observability | None = None
    network: NetworkIsolation | None = None
    for view, plan, serving in zip(views, plans, servings, strict=True):
        model = view.serving.name
        router = Router(
            f"router-{model}",
            {
                "config": view,
                "plan": plan,
                "hf_token_secret": HF_TOKEN_SECRET if hf_token is not None else None,
                "objective_prefix": f"{model}-",
            },
            opts=on_cluster(gateway, serving),
        )
        routers.append(router)
        network = NetworkIsolation(
            f"network-policies-{model}", {"config": view, "plan": plan}, opts=on_cluster(serving)
        )
        observability = Observability(
            f"observability-{model}", {"config": view, "plan": plan}, opts=on_cluster(serving, router)
        )
    assert network is not None and observability is not None  # at least one model
    return ServingLayers(
        lws=lws,
        serving=servings[0],
        gateway=gateway,
        router=routers[0],
        network=network,
        observability=observability,
    )


@dataclass(frozen=True)
class CanaryLayers:
    """The canary revision's own components (layers/serving/canary.py)."""

    serving: ModelServing
    router: Router
    network: NetworkIsolation


def add_canary(args: ServingLayersArgs, provider: k8s.Provider, stable: ModelServing) -> CanaryLayers | None:
    """With `serving.canary`: the canary's DisaggregatedSet (in the stable one's namespace, with its
    Secret and claim templates), its router and InferencePool (no objectives) and its
    NetworkPolicies. The gateway's route weighs the two pools (layers/gateway/component.py
    backend_refs). None without a canary."""
    config, plan = args["config"], args["plan"]
    canary = config.serving.canary
    derived = canary_config(config)
    if canary is None or derived is None or plan.canary is None:
        return None
    canary_plan = replace(plan, roles=plan.canary.roles, canary=None)
    opts = pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=[stable])
    name = derived.serving.name
    serving = ModelServing(
        name,
        {
            "config": derived,
            "plan": canary_plan,
            "hf_token": args.get("hf_token"),
            "engine_image": canary_image(config) or args["engine_image"],
            "beside": stable,
        },
        opts=opts,
    )
    router = Router(
        f"router{CANARY_SUFFIX}",
        {
            "config": derived,
            "plan": canary_plan,
            "hf_token_secret": HF_TOKEN_SECRET if args.get("hf_token") is not None else None,
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
