"""The in-cluster layers every fleet has, on any cluster: the LWS controller, the prefill/decode
DisaggregatedSet, the gateway, the router and the serving namespace's NetworkPolicies, wired in
the order they need each other; with `llmd-fleet:responses` also the agentic API and its routes.

The stack program (llmd_fleet/program.py) adds the cluster, the accelerator drivers and the image
build around it; a program of one's own (examples/existing_cluster.py) can call it on a cluster
it manages itself.
"""

from dataclasses import dataclass
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.fleet import PROJECT, ConfigError, StackConfig
from llmd_fleet.config.responses import password_problems
from llmd_fleet.observability.monitoring import Observability
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.platform.lws import LeaderWorkerSetController
from llmd_fleet.responses.layer import ManagedDatabase, ResponsesLayer, gke_gateway_addresses
from llmd_fleet.router.endpoint_picker import Router
from llmd_fleet.router.gateway import GatewayLayer
from llmd_fleet.security.network_policy import NetworkIsolation
from llmd_fleet.serving.autoscaling import Autoscaling
from llmd_fleet.serving.model_serving import HF_TOKEN_SECRET, ModelServing
from llmd_fleet.versions import versions


class ServingLayersArgs(TypedDict):
    """Arguments of `add_serving_layers`.

    - `config` (required): the validated stack config.
    - `plan` (required): the fleet plan derived from it.
    - `engine_image` (required): the image every engine container runs (`serving_image`).
    - `hf_token` (default `None`): Hugging Face token (a secret); when set, `ModelServing` creates
      the token Secret and the router's tokenizer reads it.
    - `install_gateway_crds` (default `True`): passed to `GatewayLayer` as `install_crds`.
    - `gateway_annotations` (default `{}`): passed to `GatewayLayer` as
      `infrastructure_annotations`.
    - `serving_after` (default `[]`): resources `ModelServing` depends on besides the LWS
      controller.
    - `responses_password` (default `None`): the response store owner's password (a secret);
      required when `config.responses` is set (ConfigError otherwise), and `ResponsesLayer` is
      declared only with it.
    - `responses_database` (default `None`): the cloud target's managed database (`GkeResponses`,
      `EksResponses`); None declares CloudNativePG in the cluster. Its reserved gateway address,
      if any, becomes the Gateway's address.
    """

    config: StackConfig
    """The validated stack configuration."""
    plan: FleetPlan
    """The fleet plan derived from it."""
    engine_image: pulumi.Input[str]
    """The image every engine container runs (llmd_fleet/images/build.py serving_image)."""
    hf_token: NotRequired[pulumi.Input[str] | None]
    """Hugging Face token (a secret); none by default."""
    install_gateway_crds: NotRequired[bool]
    """Install the Gateway API / inference-extension CRDs (default true; false where the platform
    ships them, as GKE does)."""
    gateway_annotations: NotRequired[dict[str, str]]
    """Annotations for the Gateway's generated Service (EKS: the NLB)."""
    serving_after: NotRequired[list[pulumi.Resource]]
    """Node setup the serving pods need first (e.g. GKE's TCPXO DaemonSets)."""
    responses_password: NotRequired[pulumi.Input[str] | None]
    """With `llmd-fleet:responses`: the response store owner's password (a secret), required."""
    responses_database: NotRequired[ManagedDatabase | None]
    """With `llmd-fleet:responses` on a cloud target: its managed database; None declares the
    CloudNativePG operator and a Cluster in the cluster (on-prem)."""


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
    """The serving namespace's NetworkPolicies (llmd_fleet/security/network_policy.py)."""
    responses: ResponsesLayer | None = None
    """The agentic API and its routes (llmd_fleet/responses/layer.py), with `llmd-fleet:responses`."""
    observability: Observability | None = None
    """Monitors, alerts, dashboards and the endpoint picker's metrics auth
    (llmd_fleet/observability/monitoring.py)."""
    autoscaling: Autoscaling | None = None
    """KEDA and the roles' ScaledObjects (llmd_fleet/serving/autoscaling.py), with
    `serving.autoscaling` and at least one role enabled."""


def add_serving_layers(args: ServingLayersArgs, provider: k8s.Provider) -> ServingLayers:
    """Declare the LWS controller, serving, gateway and router on `provider`'s cluster."""
    config, plan = args["config"], args["plan"]
    hf_token = args.get("hf_token")
    responses_password = args.get("responses_password")
    if problems := password_problems(config.responses, responses_password is not None, PROJECT):
        raise ConfigError(problems)
    database = args.get("responses_database")
    reserved = database.gateway_address if database is not None else None

    def on_cluster(*after: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=list(after))

    lws = (
        LeaderWorkerSetController("lws", {"chart": versions().chart("lws")}, opts=on_cluster())
        if config.target.installs_platform
        else None
    )
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
            "addresses": gke_gateway_addresses(reserved.name) if reserved is not None else [],
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
    responses = None
    if config.responses is not None and responses_password is not None:
        # The agentic API ahead of the pool's route, and its database (llmd_fleet/responses/layer.py).
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
    )
