"""NetworkPolicies of the serving namespace: deny everything, then allow exactly the flows the
fleet needs (pure builders first, the `NetworkIsolation` component last).

Without them vLLM's unauthenticated API, its DP RPC, KV-event and NIXL ports are open to every
pod of the cluster, around the gateway and the router. The allowed flows:

| from | to | ports |
|---|---|---|
| gateway (proxy pods, or GKE's proxy-only subnet) | serving pods | client ports (the pool's target ports) |
| gateway | endpoint picker | ext_proc gRPC |
| GKE load-balancer health checks | serving pods, endpoint picker | client ports; ext_proc and gRPC health |
| endpoint picker | serving pods | client ports (requests, metrics), KV-event publishers |
| endpoint picker | tokenizer | HTTP |
| endpoint picker | the API server | TCP 443 and 6443, any address (its address is not known offline) |
| serving pod | serving pod of the same fleet | any port (DP RPC, NIXL, p2p KV, NCCL/Gloo bootstrap) |
| observability namespace | serving pods, endpoint picker, tokenizer, gateway proxies | metrics ports |
| every pod of the namespace | kube-dns | 53 UDP and TCP |
| serving pods, tokenizer | outside the cluster's pod and Service ranges | TCP 443 (the model hub) |
| anyone | gateway proxies | the listener port |
| with `serving.weightLoading: modelexpress`: serving pods | the ModelExpress server | its gRPC port |
| the ModelExpress server | the API server | TCP 443 and 6443 (its metadata lives in custom resources) |
| with `serving.preflight`: preflight pod | the other preflight pod | the probe's metadata port |
| with `llmd-fleet:responses`: the agentic API and its database | llmd_fleet/responses/network.py | |

With `serving.autoscaling` and `keda: install`, KEDA's namespace gets its own policies
(`keda_network_policy_specs`): deny everything, then

| from | to | ports |
|---|---|---|
| KEDA operator | Prometheus pods of the observability namespace (with prometheusAddress: any) | its port |
| the API server | KEDA metrics adapter (the external metrics API the HPA reads) | 6443 |
| the API server | KEDA admission webhooks (ScaledObject validation) | 9443 |
| KEDA metrics adapter | KEDA operator | gRPC 9666 |
| every KEDA pod | the API server | TCP 443 and 6443, any address |
| every KEDA pod | kube-dns | 53 UDP and TCP |

The API server's address is not known offline, so the two flows from it admit any source on the
adapter's and the webhooks' ports; nothing else reaches a KEDA pod.

Between serving pods every port is open: vLLM's DP coordinator, torch.distributed (NCCL/Gloo
bootstrap) and UCX's TCP transport pick ephemeral ports, so the named ports (DP RPC, NIXL side
channel, p2p, KV events) are not all they use. RDMA, EFA and TCPXO traffic on the GPU NICs is not
pod-network traffic and no NetworkPolicy sees it.

Enforcement is the CNI's: GKE's Dataplane V2 (`datapath_provider=ADVANCED_DATAPATH`,
llmd_fleet/cluster/gke.py), on EKS the VPC CNI with `enableNetworkPolicy` (llmd_fleet/cluster/eks.py), on-prem
whichever CNI the cluster runs (docs/security.md lists the ones that enforce NetworkPolicy).
"""

import ipaddress
from dataclasses import dataclass
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.fleet import OnPremTargetConfig, StackConfig
from llmd_fleet.labels import common_labels
from llmd_fleet.plan.fleet import MX_SERVER_PORT, FleetPlan
from llmd_fleet.plan.observability import prometheus_port
from llmd_fleet.router.endpoint_picker import (
    GRPC_PORT,
    HEALTH_PORT,
    METRICS_PORT,
    TOKENIZER_PORT,
    epp_selector,
    pool_selector,
    tokenizer_selector,
)
from llmd_fleet.router.gateway import GATEWAY_NAME, IMPLEMENTATION_NAMESPACE, MANAGED_IMPLEMENTATIONS
from llmd_fleet.serving.modelexpress import server_selector
from llmd_fleet.serving.preflight import PORT as PREFLIGHT_PORT
from llmd_fleet.serving.preflight import probe_selector

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (Kubernetes 1.22+): selects a namespace by name."""
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
"""Label in-cluster gateway implementations put on the proxy pods of a Gateway (agentgateway's
deployer, Istio's gateway template)."""
KUBE_DNS = {"k8s-app": "kube-dns"}
"""Cluster DNS pods in kube-system: CoreDNS on kubeadm and EKS, kube-dns on GKE."""
MODEL_HUB_PORT = 443
API_SERVER_PORTS = (443, 6443)
"""The API server behind the `kubernetes` Service: 443 on GKE and EKS, 6443 on kubeadm control
planes (policies see the endpoint after the Service's DNAT)."""
GATEWAY_XDS_PORT = {"agentgateway": 9978, "istio": 15012}
"""Where a gateway proxy gets its configuration: agentgateway's controller xDS (chart value
controller.service.ports.agwGrpc), istiod's xDS and CA."""
GATEWAY_METRICS_PORT = 15020
"""Prometheus port of agentgateway and Istio gateway proxies."""
GCP_HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
"""Google Cloud load-balancer health-check probes (Cloud Load Balancing "Firewall rules"); the
regional internal Application Load Balancer's own traffic comes from the proxy-only subnet."""
EKS_SERVICE_RANGES = ("10.100.0.0/16", "172.20.0.0/16")
"""EKS assigns Service addresses from one of these when the cluster sets no serviceIpv4Cidr
(EKS API KubernetesNetworkConfigRequest); llmd_fleet/cluster/eks.py sets none."""
ANY_IPV4 = "0.0.0.0/0"


@dataclass(frozen=True)
class ClusterRanges:
    """Address ranges of the cluster, from the target config."""

    pods: tuple[str, ...]
    """Where pod IPs come from."""
    services: tuple[str, ...]
    """Where Service IPs come from."""
    gateway_sources: tuple[str, ...] = ()
    """Addresses a managed gateway's proxies connect from (GKE: the proxy-only subnet)."""
    health_check_sources: tuple[str, ...] = ()
    """Addresses a managed load balancer's health checks come from."""


def cluster_ranges(config: StackConfig) -> ClusterRanges:
    target = config.target
    if target.kind == "gke":
        assert target.gke is not None  # parse_config requires the section for kind gke
        net = target.gke.network
        managed = config.gateway.implementation in MANAGED_IMPLEMENTATIONS
        return ClusterRanges(
            pods=(net.pod_cidr,),
            services=(net.service_cidr,),
            gateway_sources=(net.proxy_only_cidr,) if managed else (),
            health_check_sources=GCP_HEALTH_CHECK_RANGES if managed else (),
        )
    if target.kind == "eks":
        assert target.eks is not None  # parse_config requires the section for kind eks
        # The VPC CNI gives pods addresses of the VPC's subnets.
        return ClusterRanges(pods=(target.eks.vpc_cidr,), services=EKS_SERVICE_RANGES)
    onprem = target.onprem or OnPremTargetConfig()
    return ClusterRanges(pods=(onprem.pod_cidr,), services=(onprem.service_cidr,))


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in sorted(set(ports))]


def _deny_all_but_dns() -> dict[str, dict[str, Any]]:
    """The first two policies of a namespace: everything not allowed by a later policy is refused,
    in both directions, and every pod may resolve names through the cluster DNS."""
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "dns": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{**_namespace("kube-system"), **_pods(KUBE_DNS)}],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                }
            ],
        },
    }


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def _pods(labels: dict[str, str]) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": dict(labels)}}


def _outside_cluster(ranges: ClusterRanges) -> dict[str, Any]:
    """Every IPv4 address except the cluster's pod and Service ranges. An ipBlock's `except`
    must lie inside its `cidr`, which 0.0.0.0/0 guarantees; overlapping entries are merged."""
    networks = ipaddress.collapse_addresses(
        ipaddress.IPv4Network(c) for c in (*ranges.pods, *ranges.services)
    )
    return {"ipBlock": {"cidr": ANY_IPV4, "except": [str(n) for n in networks]}}


def gateway_peers(config: StackConfig, ranges: ClusterRanges) -> list[dict[str, Any]]:
    """Where gateway traffic comes from: the Gateway's proxy pods in this namespace, or for a
    managed gateway its proxies' subnet."""
    if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
        peers = [{"ipBlock": {"cidr": cidr}} for cidr in ranges.gateway_sources]
    else:
        peers = [_pods({GATEWAY_NAME_LABEL: GATEWAY_NAME})]
    # An empty `from` would admit every source.
    assert peers, "a gateway without sources"
    return peers


@dataclass(frozen=True)
class PolicyPorts:
    """The fleet's ports, from the plan."""

    client: tuple[int, ...]
    """The pool's target ports: prefill engines, decode routing sidecars."""
    engine: tuple[int, ...]
    """Every vLLM API server port (each serves /metrics) and the DP supervisors."""
    kv_events: tuple[int, ...]
    """KV-event publishers the endpoint picker subscribes to."""


def policy_ports(plan: FleetPlan) -> PolicyPorts:
    return PolicyPorts(
        client=tuple(sorted({p for role in plan.roles for p in role.client_ports})),
        engine=tuple(
            sorted(
                {
                    p
                    for role in plan.roles
                    for p in (*role.engine_ports, *([role.supervisor_port] if role.supervisor_port else []))
                }
            )
        ),
        kv_events=tuple(sorted({p for role in plan.roles for p in role.kv_events_ports})),
    )


def network_policy_specs(config: StackConfig, plan: FleetPlan) -> dict[str, dict[str, Any]]:
    """name suffix -> NetworkPolicy spec, for the serving namespace."""
    ranges = cluster_ranges(config)
    ports = policy_ports(plan)
    gateway = gateway_peers(config, ranges)
    monitoring = _namespace(config.observability.namespace)
    fleet = _pods(pool_selector(config))
    epp = _pods(epp_selector(config))
    health_checks = [{"ipBlock": {"cidr": cidr}} for cidr in ranges.health_check_sources]
    hub = [{"to": [_outside_cluster(ranges)], "ports": _tcp(MODEL_HUB_PORT)}]

    specs: dict[str, dict[str, Any]] = {
        **_deny_all_but_dns(),
        "model-server": {
            "podSelector": {"matchLabels": pool_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [*gateway, epp], "ports": _tcp(*ports.client)},
                # No rule without ports: an empty `ports` would admit every port (the simulator
                # publishes no KV events).
                *([{"from": [epp], "ports": _tcp(*ports.kv_events)}] if ports.kv_events else []),
                # DP RPC, NIXL, p2p KV, NCCL/Gloo bootstrap: any port inside the fleet.
                {"from": [fleet]},
                {"from": [monitoring], "ports": _tcp(*ports.engine)},
                *([{"from": health_checks, "ports": _tcp(*ports.client)}] if health_checks else []),
            ],
            # The simulator downloads nothing (its own tokenizer, no weights): no hub egress.
            "egress": [{"to": [fleet]}, *(hub if config.serving.engine == "vllm" else [])],
        },
        "endpoint-picker": {
            "podSelector": {"matchLabels": epp_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": gateway, "ports": _tcp(GRPC_PORT)},
                {"from": [monitoring], "ports": _tcp(METRICS_PORT)},
                *([{"from": health_checks, "ports": _tcp(GRPC_PORT, HEALTH_PORT)}] if health_checks else []),
            ],
            "egress": [
                {"to": [fleet], "ports": _tcp(*ports.client, *ports.kv_events)},
                {"to": [_pods(tokenizer_selector(config))], "ports": _tcp(TOKENIZER_PORT)},
                # Watches and the leader lease. The API server's address is known only to the
                # cluster (on EKS its interfaces sit in the pods' own subnets), so any address.
                {"ports": _tcp(*API_SERVER_PORTS)},
            ],
        },
        "tokenizer": {
            "podSelector": {"matchLabels": tokenizer_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [epp], "ports": _tcp(TOKENIZER_PORT)},
                # Its HTTP server's /metrics (llmd_fleet/observability/monitoring.py scrapes it).
                {"from": [monitoring], "ports": _tcp(TOKENIZER_PORT)},
            ],
            # The tokenizer and chat template come from the model hub.
            "egress": hub,
        },
    }
    if config.serving.preflight.enabled:
        # The probe pair (llmd_fleet/serving/preflight.py): the metadata exchange between its two
        # pods and nothing else. Its bytes go over the GPU NICs, which no NetworkPolicy sees; a
        # UCX that falls back to TCP on the pod network is refused here and fails the probe.
        probe = _pods(probe_selector(config))
        specs["preflight"] = {
            "podSelector": {"matchLabels": probe_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [probe], "ports": _tcp(PREFLIGHT_PORT)}],
            "egress": [{"to": [probe], "ports": _tcp(PREFLIGHT_PORT)}],
        }
    implementation = config.gateway.implementation
    if implementation not in MANAGED_IMPLEMENTATIONS:
        specs["gateway"] = {
            "podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: GATEWAY_NAME}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                # Clients: the Gateway's listener, from anywhere its Service admits.
                {"ports": _tcp(config.gateway.listener_port)},
                {"from": [monitoring], "ports": _tcp(GATEWAY_METRICS_PORT)},
            ],
            "egress": [
                {"to": [epp], "ports": _tcp(GRPC_PORT)},
                {"to": [fleet], "ports": _tcp(*ports.client)},
                {
                    "to": [_namespace(IMPLEMENTATION_NAMESPACE[implementation])],
                    "ports": _tcp(GATEWAY_XDS_PORT[implementation]),
                },
            ],
        }
    if config.serving.weight_loading == "modelexpress":
        # Peer weight transfers run serving pod to serving pod (open above); the server only
        # answers the pods' gRPC and keeps its records through the API server.
        server = _pods(server_selector(config))
        specs["model-server"]["egress"].append({"to": [server], "ports": _tcp(MX_SERVER_PORT)})
        specs["modelexpress-server"] = {
            "podSelector": {"matchLabels": server_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [fleet], "ports": _tcp(MX_SERVER_PORT)}],
            "egress": [{"ports": _tcp(*API_SERVER_PORTS)}],
        }
    if config.responses is not None:
        # The agentic API and its database (llmd_fleet/responses/network.py).
        from llmd_fleet.responses.network import gateway_egress_rules, responses_policy_specs

        if "gateway" in specs:
            specs["gateway"]["egress"] += gateway_egress_rules(config)
        specs.update(responses_policy_specs(config, ranges))
    return specs


# KEDA's pods and ports (the pinned kedacore/charts keda: the `app` labels of its Deployments, the
# metrics adapter's `service.portHttpsTarget`, the operator's gRPC port the adapter dials through
# `--metrics-service-address`, the webhooks' default `--port`).
KEDA_OPERATOR = {"app": "keda-operator"}
KEDA_METRICS_ADAPTER = {"app": "keda-operator-metrics-apiserver"}
KEDA_WEBHOOKS = {"app": "keda-admission-webhooks"}
KEDA_METRICS_API_PORT = 6443
KEDA_OPERATOR_GRPC_PORT = 9666
KEDA_WEBHOOK_PORT = 9443
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
"""Label prometheus-operator puts on every Prometheus server pod (v0.93.0
pkg/prometheus/server/statefulset.go)."""


def keda_network_policy_specs(config: StackConfig) -> dict[str, dict[str, Any]]:
    """name suffix -> NetworkPolicy spec, for KEDA's namespace (only when the stack installs KEDA)."""
    scaling = config.serving.autoscaling
    assert scaling is not None
    if scaling.prometheus_address is None:
        # The default address: prometheus-operated of the observability namespace.
        prometheus_peer: dict[str, Any] = {
            "to": [{**_namespace(config.observability.namespace), **_pods(PROMETHEUS_POD)}],
            "ports": _tcp(prometheus_port(config)),
        }
    else:
        # An address the stack cannot resolve offline: its port, any destination.
        prometheus_peer = {"ports": _tcp(prometheus_port(config))}
    api_server = {"ports": _tcp(*API_SERVER_PORTS)}
    return {
        **_deny_all_but_dns(),
        "operator": {
            "podSelector": {"matchLabels": dict(KEDA_OPERATOR)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [_pods(KEDA_METRICS_ADAPTER)], "ports": _tcp(KEDA_OPERATOR_GRPC_PORT)}],
            # The triggers' queries; watches, leader lease and the scale subresource writes.
            "egress": [prometheus_peer, api_server],
        },
        "metrics-adapter": {
            "podSelector": {"matchLabels": dict(KEDA_METRICS_ADAPTER)},
            "policyTypes": ["Ingress", "Egress"],
            # The API server's aggregation layer serves external.metrics.k8s.io from here.
            "ingress": [{"ports": _tcp(KEDA_METRICS_API_PORT)}],
            "egress": [
                {"to": [_pods(KEDA_OPERATOR)], "ports": _tcp(KEDA_OPERATOR_GRPC_PORT)},
                api_server,
            ],
        },
        "webhooks": {
            "podSelector": {"matchLabels": dict(KEDA_WEBHOOKS)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": _tcp(KEDA_WEBHOOK_PORT)}],
            "egress": [api_server],
        },
    }


class NetworkIsolationArgs(TypedDict):
    """Arguments of `NetworkIsolation`. Every key is required.

    - `config` (required): the validated stack config; `serving` names the namespace and the
      policies, `target`, `gateway`, `observability` and `responses` shape the allowed flows
      (`network_policy_specs`).
    - `plan` (required): the fleet plan; its roles give the serving pods' ports.
    """

    config: StackConfig
    """The validated stack configuration."""
    plan: FleetPlan
    """The fleet plan (its ports)."""


class NetworkIsolation(pulumi.ComponentResource):
    """The serving namespace's NetworkPolicies (`network_policy_specs`)."""

    policies: dict[str, k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkIsolationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:security:NetworkIsolation", name, {}, opts)
        config = args["config"]
        serving = config.serving
        self.policies = {
            suffix: k8s.networking.v1.NetworkPolicy(
                f"{name}-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{serving.name}-{suffix}",
                    namespace=serving.namespace,
                    labels=common_labels("network-policy", serving.name),
                ),
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for suffix, spec in network_policy_specs(config, args["plan"]).items()
        }
        self.register_outputs({})
