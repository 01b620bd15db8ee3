"""Gateway layer: Gateway API + inference-extension CRDs, one gateway implementation, and the
Gateway + HTTPRoute that send every request through the endpoint picker to the InferencePool.
On GKE's managed gateway also the two policies that configure the pool's backend service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes import _utilities as k8s_utilities

from llmd_fleet.conventions import POOL_GROUP
from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS, GatewayConfig
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME, IMPLEMENTATION_NAMESPACE
from llmd_fleet.layers.serving.config import CANARY_SUFFIX
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

GATEWAY_CLASS = {"agentgateway": "agentgateway", "istio": "istio", "gke-l7-rilb": "gke-l7-rilb"}
CRD_MANIFESTS = ("gateway-api", "inference-extension", "llm-d-router-crds")
# CRDs no platform ships: the InferenceObjective CRD of llm-d-router (GKE, from the fleet's minimum
# Kubernetes version on, pre-installs the Gateway API and InferencePool CRDs, not this one).
ALWAYS_INSTALLED_CRDS = ("llm-d-router-crds",)
# GKE's gateway controller: the InferencePool's backend service is configured through its
# networking.gke.io policies, not through the HTTPRoute.
GKE_IMPLEMENTATIONS = frozenset({"gke-l7-rilb"})
GKE_POLICY_API_VERSION = "networking.gke.io/v1"
# Path of the pool's load-balancer health check. Prefill endpoints are vLLM's per-rank API servers,
# whose /health answers 503 once that rank's engine is dead; decode endpoints are the routing
# sidecar's per-rank servers, whose /health answers 200 on its own (llm-d-router
# pkg/sidecar/proxy/proxy.go), so a dead decode engine is left to the pod's readiness probe on the
# DP supervisor (the endpoint picker only picks ready pods).
POOL_HEALTH_PATH = "/health"
# llm-d-router's GKE provider checks every 2 s with a 2 s timeout instead of GCE's 5 s / 5 s, so a
# dead endpoint leaves the load balancer after ~4 s (two failures); vLLM's /health only reads a flag.
POOL_HEALTH_CHECK_SECONDS = 2
# GCPBackendPolicy logging.sampleRate is in millionths: 1,000,000 logs every request (GKE's
# default once logging is on, which llm-d-router's GKE provider turns on).
LOG_EVERY_REQUEST = 1_000_000
# Longest connection draining a GCE backend service allows (GCPBackendPolicy CRD maximum).
MAX_DRAINING_SECONDS = 3600


def implementation_values(implementation: str) -> dict[str, dict[str, Any]]:
    """Helm values per release of the chosen implementation, keyed by matrix chart name."""
    if implementation in MANAGED_IMPLEMENTATIONS:
        return {}
    if implementation == "agentgateway":
        # Turns on InferencePool support (and its RBAC) in the agentgateway controller.
        return {"agentgateway-crds": {}, "agentgateway": {"inferenceExtension": {"enabled": True}}}
    return {
        "istio-base": {},
        "istiod": {"pilot": {"env": {"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"}}},
    }


def gateway_spec(
    gateway: GatewayConfig,
    infrastructure_annotations: dict[str, str] | None = None,
    addresses: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The Gateway's spec: the implementation's GatewayClass and one HTTP listener on
    `gateway.listenerPort` that admits routes from its own namespace only."""
    spec: dict[str, Any] = {
        "gatewayClassName": GATEWAY_CLASS[gateway.implementation],
        "listeners": [
            {
                "name": "http",
                "protocol": "HTTP",
                "port": gateway.listener_port,
                "allowedRoutes": {"namespaces": {"from": "Same"}},
            }
        ],
    }
    if infrastructure_annotations:
        # Gateway API `infrastructure`: the implementation copies these onto what it generates
        # for the Gateway (its Service among them).
        spec["infrastructure"] = {"annotations": dict(infrastructure_annotations)}
    if addresses:
        # Addresses the Gateway must take (GKE: a reserved internal address, by name).
        spec["addresses"] = [dict(a) for a in addresses]
    return spec


def gateway_labels(config: StackConfig) -> dict[str, str]:
    """The Gateway's labels; with Istio also the opt-in that wires its ext_proc call to the endpoint
    picker."""
    labels = common_labels("gateway", config.serving.name)
    if config.gateway.implementation == "istio":
        # Istio wires the ext_proc call to the EPP only for gateways that opt in.
        labels["istio.io/enable-inference-extproc"] = "true"
    return labels


def pool_ref(pool_name: str) -> dict[str, str]:
    """The InferencePool as a route backend or a policy target."""
    return {"group": POOL_GROUP, "kind": "InferencePool", "name": pool_name}


def backend_refs(config: StackConfig, pool_name: str) -> list[dict[str, Any]]:
    """A route rule's backends: the pool alone, or with `serving.canary` the stable pool and the
    canary's pool (layers/serving/canary.py) with the canary's `weight` percent between them.
    Gateway API splits a rule's requests in proportion to its backendRefs' weights (a weight of 0
    gets none); the canary is refused where the pinned gateway's handling of weighted
    InferencePool backends is not verified (canary.py WEIGHTED_POOL_IMPLEMENTATIONS)."""
    canary = config.serving.canary
    if canary is None:
        return [pool_ref(pool_name)]
    return [
        {**pool_ref(pool_name), "weight": 100 - canary.weight},
        {**pool_ref(f"{pool_name}{CANARY_SUFFIX}"), "weight": canary.weight},
    ]


def http_route_spec(config: StackConfig, pool_name: str) -> dict[str, Any]:
    """The HTTPRoute from the Gateway's listener to the InferencePool (every path, `backend_refs`),
    with the gateway's request timeout where the implementation takes it on the route."""
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
        "backendRefs": backend_refs(config, pool_name),
    }
    # Agent turns prefill ~200k tokens and stream for minutes; the default would cut them. GKE does
    # not implement HTTPRoute timeouts (HTTPRouteRequestTimeout is exempt in the conformance run of
    # GoogleCloudPlatform/gke-gateway-api, and llm-d-router's chart leaves the field out on GKE):
    # there the same timeout goes into the GCPBackendPolicy.
    if config.gateway.implementation not in GKE_IMPLEMENTATIONS:
        rule["timeouts"] = {"request": f"{config.gateway.request_timeout_seconds}s"}
    return {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
        "rules": [rule],
    }


def gke_health_check_policy_spec(pool_name: str) -> dict[str, Any]:
    """HealthCheckPolicy of the InferencePool's backend service. Without it GKE checks `/` on each
    endpoint, which vLLM answers 404, and marks every endpoint unhealthy.

    Each endpoint is checked on its own port (`USE_SERVING_PORT`, GCE's rule for NEG endpoints),
    so every data-parallel rank is judged by its own API server. A fixed port cannot serve a pool
    that holds both roles: the DP supervisor listens on engine base + 8, 8008 on prefill and 8208
    on decode, and is no pool target on either."""
    return {
        "targetRef": pool_ref(pool_name),
        "default": {
            "checkIntervalSec": POOL_HEALTH_CHECK_SECONDS,
            "timeoutSec": POOL_HEALTH_CHECK_SECONDS,
            "config": {
                "type": "HTTP",
                "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": POOL_HEALTH_PATH},
            },
        },
    }


def gke_backend_policy_spec(config: StackConfig, pool_name: str) -> dict[str, Any]:
    """GCPBackendPolicy of the InferencePool's backend service: the route's request timeout as the
    backend service timeout (30 s when unset, which would cut long agent turns), connection
    draining as long as the pods drain (0 s when unset: the load balancer would cut the streams of
    a terminating pod that vLLM is still finishing), and request logging."""
    return {
        "targetRef": pool_ref(pool_name),
        "default": {
            "timeoutSec": config.gateway.request_timeout_seconds,
            "connectionDraining": {
                "drainingTimeoutSec": min(config.serving.drain_seconds, MAX_DRAINING_SECONDS)
            },
            "logging": {"enabled": True, "sampleRate": LOG_EVERY_REQUEST},
        },
    }


class _GatewayObject(pulumi.CustomResource):
    """A Gateway whose `status` is read back, so its address can be a stack output."""

    status: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        metadata: k8s.meta.v1.ObjectMetaArgs,
        spec: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ):
        props = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": metadata,
            "spec": spec,
            "status": None,
        }
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_utilities.get_version()))
        super().__init__("kubernetes:gateway.networking.k8s.io/v1:Gateway", name, props, opts)


def _first_address(status: Any) -> str | None:
    addresses = (status or {}).get("addresses") or []
    return addresses[0].get("value") if addresses else None


class GatewayLayerArgs(TypedDict):
    """Arguments of `GatewayLayer`."""

    config: StackConfig
    """The validated stack config; `gateway` picks the implementation, listener port and request
    timeout, `serving` the namespace."""
    pool_name: str
    """The InferencePool the HTTPRoute sends traffic to; also the route's name."""
    install_crds: bool
    """Install the Gateway API and inference-extension CRDs (False where the platform ships them);
    the llm-d-router CRDs are installed either way. With `target.platform: preinstalled` no CRD
    bundle, namespace or chart of the implementation is declared, only the Gateway, the route and
    (GKE) the backend policies."""
    infrastructure_annotations: NotRequired[dict[str, str]]
    """Annotations the implementation copies onto what it generates for the Gateway
    (`spec.infrastructure`; e.g. the AWS NLB annotations on EKS); default none."""
    addresses: NotRequired[list[dict[str, str]]]
    """The Gateway's `spec.addresses` (GKE with Responses on: the reserved internal address);
    default none."""
    route: NotRequired[bool]
    """Declare the HTTPRoute to `pool_name`, and on GKE its backend policies (default `True`); False
    with `llmd-fleet:models`, whose routes per model come with the body-based router
    (llmd_fleet/layers/gateway/bbr.py)."""


class GatewayLayer(pulumi.ComponentResource):
    """The Gateway API CRDs, the gateway implementation (unless managed), the Gateway and the
    HTTPRoute to the InferencePool; on GKE's managed gateway also the pool's backend policies.
    `address` is the Gateway's first status address."""

    address: pulumi.Output[str | None]
    route: k8s.apiextensions.CustomResource | None
    """The HTTPRoute to the pool; None with `route: False`."""
    backend_policies: list[k8s.apiextensions.CustomResource]
    """GKE's HealthCheckPolicy and GCPBackendPolicy on the InferencePool (empty elsewhere)."""

    def __init__(self, name: str, args: GatewayLayerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:gateway:GatewayLayer", name, {}, opts)
        config = args["config"]
        implementation = config.gateway.implementation
        child = pulumi.ResourceOptions(parent=self)
        crds: list[pulumi.Resource] = []
        # A preinstalled platform runs the gateway controller and every CRD bundle already.
        installs = config.target.installs_platform
        manifests = (CRD_MANIFESTS if args["install_crds"] else ALWAYS_INSTALLED_CRDS) if installs else ()
        for manifest in manifests:
            crds.append(
                k8s.yaml.v2.ConfigFile(
                    f"{name}-{manifest}", file=versions().manifest(manifest).url, opts=child
                )
            )
        releases: list[pulumi.Resource] = []
        namespace = IMPLEMENTATION_NAMESPACE.get(implementation, "")
        ns: list[pulumi.Resource] = []
        if installs and implementation not in MANAGED_IMPLEMENTATIONS:
            ns.append(
                k8s.core.v1.Namespace(
                    f"{name}-{implementation}-namespace",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=namespace,
                        # Pod Security `baseline`: the controllers (agentgateway, istiod) need no
                        # host access or added capabilities, but their charts set no seccomp
                        # profile or non-root user by default, which `restricted` requires. The
                        # gateway proxies run in the serving namespace, beside their Gateway.
                        labels={
                            **common_labels("gateway", implementation),
                            **pod_security_labels("baseline"),
                        },
                    ),
                    opts=child,
                )
            )
        for chart_name, values in (implementation_values(implementation) if installs else {}).items():
            releases.append(
                pinned_release(
                    f"{name}-{chart_name}",
                    chart_name,
                    versions().chart(chart_name),
                    namespace,
                    values,
                    # Charts install in order: CRDs first, then the controller.
                    pulumi.ResourceOptions(parent=self, depends_on=[*ns, *crds, *releases]),
                )
            )
        serving_ns = config.serving.namespace
        gateway = _GatewayObject(
            f"{name}-gateway",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=GATEWAY_NAME, namespace=serving_ns, labels=gateway_labels(config)
            ),
            spec=gateway_spec(config.gateway, args.get("infrastructure_annotations"), args.get("addresses")),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*crds, *releases]),
        )
        self.route = None
        self.backend_policies = []
        if args.get("route", True):
            self._declare_route(name, config, args["pool_name"], gateway)
        self.address = gateway.status.apply(_first_address)
        self.register_outputs({"address": self.address})

    def _declare_route(
        self, name: str, config: StackConfig, pool_name: str, gateway: pulumi.Resource
    ) -> None:
        """The HTTPRoute to the pool and, on GKE, the pool's backend policies."""
        serving_ns = config.serving.namespace
        self.route = k8s.apiextensions.CustomResource(
            f"{name}-route",
            api_version="gateway.networking.k8s.io/v1",
            kind="HTTPRoute",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=pool_name,
                namespace=serving_ns,
                labels=common_labels("gateway", config.serving.name),
            ),
            spec=http_route_spec(config, pool_name),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
        )
        if config.gateway.implementation in GKE_IMPLEMENTATIONS:
            self.backend_policies = self._gke_backend_policies(name, config, pool_name)

    def _gke_backend_policies(
        self, name: str, config: StackConfig, pool_name: str
    ) -> list[k8s.apiextensions.CustomResource]:
        """Both policies live beside the InferencePool they target (GKE requires the same
        namespace) and carry its name."""
        return [
            k8s.apiextensions.CustomResource(
                f"{name}-{suffix}",
                api_version=GKE_POLICY_API_VERSION,
                kind=kind,
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=pool_name,
                    namespace=config.serving.namespace,
                    labels=common_labels("gateway", config.serving.name),
                ),
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for suffix, kind, spec in (
                ("health-check-policy", "HealthCheckPolicy", gke_health_check_policy_spec(pool_name)),
                ("backend-policy", "GCPBackendPolicy", gke_backend_policy_spec(config, pool_name)),
            )
        ]
