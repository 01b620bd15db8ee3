"""Routing by the request's `model` field when one gateway fronts several models
(`llmd-fleet:models`): the body-based router and one HTTPRoute per model.

The body-based router is the Gateway API inference extension's (cmd/bbr), an ext_proc server the
gateway calls before routing. Its `body-field-to-header` plugin copies the request body's `model`
into `X-Gateway-Model-Name`; its `base-model-to-header` plugin sets `X-Gateway-Base-Model-Name`
to the base model of a LoRA adapter (or the model itself), read from ConfigMaps labelled
`inference.networking.k8s.io/bbr-managed: "true"` with keys `baseModel` and `adapters`
(gateway-api-inference-extension pkg/bbr/plugins/basemodelextractor, at the tag the image pins in
images/versions.toml). Each model's route
matches that header on the model's client name, so a request for an adapter reaches the pool of
the model whose engines load it. A request for a name no route matches gets the gateway's own
no-route answer (Gateway API: 404 for an HTTPRoute with no matching rule).

The router's pin is the extension's last release that has it, one minor below the release whose
InferencePool CRD the stack installs, which moved it to llm-d/llm-d-inference-payload-processor
(that release's README); images/versions.toml says why.

These functions only build specs; the HTTPRoute per model is kept apart from the single-model
route (gateway/component.py) so the two evolve separately. Pure apart from `BodyBasedRouter` and
`declare`, the layer's builder (here, above component.py, as it declares both).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.model import client_model_name, model_list_body
from llmd_fleet.core.netpol import API_SERVER_PORTS, PolicySpec, pods, tcp
from llmd_fleet.core.pod_context import (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip,
    restricted_container_context,
    restricted_pod_context,
    skip_annotations,
)
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.gateway.component import GKE_IMPLEMENTATIONS, GatewayLayer, GatewayLayerArgs, pool_ref
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME, GATEWAY_NAME_LABEL, gateway_peers
from llmd_fleet.targets.specs import cluster_ranges
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

BBR_NAME = "body-based-router"
# The router's ports and headers (gateway-api-inference-extension pkg/bbr/server/options.go
# DefaultGrpcPort/DefaultGrpcHealthPort; plugins/bodyfieldtoheader ModelHeader;
# plugins/basemodelextractor BaseModelHeader and the ConfigMap label and keys).
BBR_GRPC_PORT = 9004
BBR_HEALTH_PORT = 9005
MODEL_HEADER = "X-Gateway-Model-Name"
BASE_MODEL_HEADER = "X-Gateway-Base-Model-Name"
BBR_MANAGED_LABEL = "inference.networking.k8s.io/bbr-managed"
BBR_SKIPS = (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip("CKV_K8S_38", "the body-based router watches the ConfigMaps that map adapters to base models"),
)


def bbr_labels() -> dict[str, str]:
    """The body-based router's labels (its pods' selector, `bbr_selector`, is a subset)."""
    return common_labels("body-based-router", BBR_NAME)


def bbr_selector() -> dict[str, str]:
    """The labels that select the body-based router's pods (Service, NetworkPolicies)."""
    return {"app.kubernetes.io/component": "body-based-router", "app.kubernetes.io/instance": BBR_NAME}


def bbr_args() -> list[str]:
    """The router's command line: streaming ext_proc (the gateway's full-duplex body mode), both
    plugins as the extension's chart configures them, no tracing, and plaintext gRPC: agentgateway
    calls an ext_proc Service without TLS (agentgateway controller/pkg/agentgateway/plugins/
    traffic_plugin.go processExtProcTraffic adds no TLS policy, unlike the endpoint picker's
    INSECURE_ALL one in inference_plugin.go), and the router serves TLS by default
    (pkg/bbr/server/options.go SecureServing)."""
    field_to_header = json.dumps({"fieldName": "model", "headerName": MODEL_HEADER}, separators=(",", ":"))
    return [
        "--streaming",
        f"--grpc-port={BBR_GRPC_PORT}",
        f"--grpc-health-port={BBR_HEALTH_PORT}",
        "--plugin",
        f"body-field-to-header:model-extractor:{field_to_header}",
        "--plugin",
        "base-model-to-header:base-model-mapper",
        "--tracing=false",
        "--secure-serving=false",
    ]


AGENTGATEWAY_POLICY_API = "agentgateway.dev/v1alpha1"


def ext_proc_policy_spec() -> dict[str, Any]:
    """agentgateway's AgentgatewayPolicy that calls the body-based router before routing: phase
    PreRouting (only there can a header it sets pick the route; the phase needs a Gateway target,
    CRD rule at the pinned agentgateway), extProc to its Service. agentgateway fails such a call
    closed (FAIL_CLOSED in traffic_plugin.go): the router runs two replicas."""
    return {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
        "traffic": {
            "phase": "PreRouting",
            "extProc": {"backendRef": {"name": BBR_NAME, "port": BBR_GRPC_PORT}},
        },
    }


def bbr_deployment_spec() -> dict[str, Any]:
    """Two replicas of the body-based router, restricted, probed on its gRPC health port. It
    holds no state beyond the ConfigMaps it watches, so any replica answers any request."""
    probe = {"grpc": {"port": BBR_HEALTH_PORT}, "periodSeconds": 10, "timeoutSeconds": 5}
    resources = {"cpu": "1", "memory": "512Mi"}
    return {
        "replicas": 2,
        "selector": {"matchLabels": bbr_selector()},
        "template": {
            "metadata": {"labels": bbr_labels()},
            "spec": {
                "serviceAccountName": BBR_NAME,
                "securityContext": restricted_pod_context(),
                "containers": [
                    {
                        "name": "bbr",
                        "image": versions().image("body-based-router").ref,
                        "imagePullPolicy": "IfNotPresent",
                        "args": bbr_args(),
                        # Watch only this namespace's ConfigMaps (cmd/bbr/runner/runner.go).
                        "env": [
                            {
                                "name": "NAMESPACE",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            }
                        ],
                        "ports": [
                            {"name": "grpc", "containerPort": BBR_GRPC_PORT, "protocol": "TCP"},
                            {"name": "grpc-health", "containerPort": BBR_HEALTH_PORT, "protocol": "TCP"},
                        ],
                        "readinessProbe": probe,
                        "livenessProbe": {**probe, "failureThreshold": 3},
                        "resources": {"requests": dict(resources), "limits": resources},
                        "securityContext": restricted_container_context(),
                    }
                ],
            },
        },
    }


def bbr_policy_specs(view: StackConfig) -> dict[str, PolicySpec]:
    """The body-based router's NetworkPolicy and the gateway proxies' egress to it (policies add
    up: each model's own `<model>-gateway` policy keeps its flows).

    | from | to | ports |
    |---|---|---|
    | gateway proxies | body-based router | ext_proc gRPC |
    | body-based router | the API server | TCP 443 and 6443 (its ConfigMap watch) |
    """
    specs: dict[str, PolicySpec] = {
        BBR_NAME: {
            "podSelector": {"matchLabels": bbr_selector()},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": gateway_peers(view, cluster_ranges(view)), "ports": tcp(BBR_GRPC_PORT)}],
            "egress": [{"ports": tcp(*API_SERVER_PORTS)}],
        }
    }
    if view.gateway.implementation not in MANAGED_IMPLEMENTATIONS:
        specs[f"{BBR_NAME}-gateway"] = {
            "podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: GATEWAY_NAME}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [pods(bbr_selector())], "ports": tcp(BBR_GRPC_PORT)}],
        }
    return specs


def adapters_config_map_data(view: StackConfig) -> dict[str, str]:
    """The `base-model-to-header` plugin's entry for one model: its client name and its
    adapters' served names (a YAML list)."""
    adapters = [adapter.name for adapter in view.model.lora_adapters]
    return {"baseModel": client_model_name(view.model), "adapters": json.dumps(adapters)}


MODEL_LIST_PATH = "/v1/models"
MODEL_LIST_NAME = "models-list"


def model_route_spec(view: StackConfig) -> dict[str, Any]:
    """One model's HTTPRoute: requests whose base model (the header the body-based router sets)
    is this model's client name go to its InferencePool."""
    rule: dict[str, Any] = {
        "matches": [
            {
                "path": {"type": "PathPrefix", "value": "/"},
                "headers": [
                    {"type": "Exact", "name": BASE_MODEL_HEADER, "value": client_model_name(view.model)}
                ],
            }
        ],
        "backendRefs": [pool_ref(view.serving.name)],
    }
    if view.gateway.implementation not in GKE_IMPLEMENTATIONS:
        rule["timeouts"] = {"request": f"{view.gateway.request_timeout_seconds}s"}
    return {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
        "rules": [rule],
    }


def model_list_route_spec(first: StackConfig) -> dict[str, Any]:
    """`GET /v1/models` has no body to route by, so no model's route takes it: this route matches
    it and its AgentgatewayPolicy (model_list_policy_spec) answers it with every model's names.
    The backend is the first model's pool only because a rule needs one; the policy answers before
    any backend is called (agentgateway, at the pinned release,
    crates/agentgateway/src/proxy/httpproxy.rs applies a route's directResponse with its other
    request policies, before the backend call)."""
    return {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
        "rules": [
            {
                "matches": [{"path": {"type": "Exact", "value": MODEL_LIST_PATH}, "method": "GET"}],
                "backendRefs": [pool_ref(first.serving.name)],
            }
        ],
    }


def model_list_policy_spec(views: tuple[StackConfig, ...]) -> dict[str, Any]:
    """agentgateway's AgentgatewayPolicy on the model-list route: a direct response, status 200,
    JSON, listing every model and adapter (model_list)."""
    return {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": MODEL_LIST_NAME}],
        "traffic": {
            "directResponse": {"status": 200, "body": model_list_body(tuple(view.model for view in views))},
            "headerModifiers": {"response": {"set": [{"name": "content-type", "value": "application/json"}]}},
        },
    }


class BodyBasedRouter(pulumi.ComponentResource):
    """The body-based router (Deployment, Service, RBAC), one adapters ConfigMap and one
    HTTPRoute per model."""

    routes: dict[str, k8s.apiextensions.CustomResource]
    """Each model's HTTPRoute, by its serving name."""

    def __init__(
        self,
        name: str,
        views: tuple[StackConfig, ...],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llmd-fleet:gateway:BodyBasedRouter", name, {}, opts)
        namespace = views[0].serving.namespace
        child = pulumi.ResourceOptions(parent=self)

        def meta(object_name: str, labels: dict[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=namespace, labels=labels if labels is not None else bbr_labels()
            )

        account = k8s.core.v1.ServiceAccount(f"{name}-service-account", metadata=meta(BBR_NAME), opts=child)
        role = k8s.rbac.v1.Role(
            f"{name}-role",
            metadata=meta(BBR_NAME),
            rules=[{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}],
            opts=child,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-role-binding",
            metadata=meta(BBR_NAME),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": BBR_NAME},
            subjects=[{"kind": "ServiceAccount", "name": BBR_NAME, "namespace": namespace}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account, role]),
        )
        for view in views:
            k8s.core.v1.ConfigMap(
                f"{name}-{view.serving.name}-adapters",
                metadata=meta(
                    f"{view.serving.name}-adapters",
                    {**common_labels("body-based-router", view.serving.name), BBR_MANAGED_LABEL: "true"},
                ),
                data=adapters_config_map_data(view),
                opts=child,
            )
        k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=BBR_NAME,
                namespace=namespace,
                labels=bbr_labels(),
                annotations=skip_annotations(BBR_SKIPS),
            ),
            spec=bbr_deployment_spec(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding]),
        )
        k8s.core.v1.Service(
            f"{name}-service",
            metadata=meta(BBR_NAME),
            spec={
                "type": "ClusterIP",
                "selector": bbr_selector(),
                "ports": [
                    {
                        "name": "grpc-ext-proc",
                        "port": BBR_GRPC_PORT,
                        "targetPort": BBR_GRPC_PORT,
                        "protocol": "TCP",
                        "appProtocol": "kubernetes.io/h2c",
                    }
                ],
            },
            opts=child,
        )
        if views[0].gateway.implementation == "agentgateway":
            k8s.apiextensions.CustomResource(
                f"{name}-ext-proc",
                api_version=AGENTGATEWAY_POLICY_API,
                kind="AgentgatewayPolicy",
                metadata=meta(BBR_NAME),
                spec=ext_proc_policy_spec(),
                opts=child,
            )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta(BBR_NAME),
            # Every request passes through it (fail closed): never drain both replicas at once.
            spec={"minAvailable": 1, "selector": {"matchLabels": bbr_selector()}},
            opts=child,
        )
        for policy_name, spec in bbr_policy_specs(views[0]).items():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-policy-{policy_name}",
                metadata=meta(policy_name, common_labels("network-policy", BBR_NAME)),
                spec=spec,
                opts=child,
            )
        self.routes = {
            view.serving.name: k8s.apiextensions.CustomResource(
                f"{name}-route-{view.serving.name}",
                api_version="gateway.networking.k8s.io/v1",
                kind="HTTPRoute",
                metadata=meta(view.serving.name, common_labels("gateway", view.serving.name)),
                spec=model_route_spec(view),
                opts=child,
            )
            for view in views
        }
        list_route = k8s.apiextensions.CustomResource(
            f"{name}-route-{MODEL_LIST_NAME}",
            api_version="gateway.networking.k8s.io/v1",
            kind="HTTPRoute",
            metadata=meta(MODEL_LIST_NAME, common_labels("gateway", MODEL_LIST_NAME)),
            spec=model_list_route_spec(views[0]),
            opts=child,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-{MODEL_LIST_NAME}",
            api_version=AGENTGATEWAY_POLICY_API,
            kind="AgentgatewayPolicy",
            metadata=meta(MODEL_LIST_NAME, common_labels("gateway", MODEL_LIST_NAME)),
            spec=model_list_policy_spec(views),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[list_route]),
        )
        self.register_outputs({})


def declare(ctx: Assembly) -> GatewayLayer:
    """The gateway layer's builder (its registry record's `Declaration`): the Gateway after every
    model's serving; on one model its route to the pool and, with a managed database's reserved
    address, that address (and after it); with several models a route per model (`route` off)
    behind the body-based router."""
    args: GatewayLayerArgs = {
        "config": ctx.config,
        "pool_name": ctx.config.serving.name,
        "install_crds": ctx.args.get("install_gateway_crds", True),
        "infrastructure_annotations": ctx.args.get("gateway_annotations", {}),
    }
    if ctx.several_models:
        args["route"] = False
        gateway = GatewayLayer("gateway", args, opts=ctx.options())
        BodyBasedRouter("model-routing", ctx.views, opts=ctx.on_cluster(gateway, *ctx.after))
        return gateway
    database = ctx.args.get("responses_database")
    reserved = database.gateway_address if database is not None else None
    args["addresses"] = reserved.gateway_addresses if reserved is not None else []
    return GatewayLayer(
        "gateway", args, opts=ctx.options(*([reserved.resource] if reserved is not None else []))
    )
