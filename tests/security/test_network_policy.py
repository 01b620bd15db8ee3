"""The serving namespace's NetworkPolicies, evaluated on the rendered objects of every stack with
a small NetworkPolicy evaluator (tests/netpol.py): a table of flows that must get through and of
flows that must not."""

import copy
from typing import Any, NamedTuple

import pytest

from llmd_fleet.core.problems import ConfigError
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.security.isolation import cluster_ranges, network_policy_specs, union
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.targets.eks.config import EksTarget
from llmd_fleet.targets.gke.config import GkeTarget
from tests.netpol import Cluster, Endpoint
from tests.support import all_stacks, single_model_stacks, stack_raw_config, vllm_stacks

NAMESPACE = "llm-d"
GATEWAY_LABEL = {"gateway.networking.k8s.io/gateway-name": "llm-d-inference-gateway"}


class Network(NamedTuple):
    """Where a stack's pods and Services get addresses and where its API server answers (the
    stack files' and the config defaults' ranges; EKS picks its Service range itself)."""

    pods: str
    service: str
    api_ip: str
    api_port: int


NETWORK = {
    "onprem-h100": Network("10.244.", "10.96.0.10", "192.168.10.5", 6443),
    "gke-h100": Network("10.64.", "10.96.0.10", "172.16.0.2", 443),
    "eks-h100": Network("10.64.", "172.20.0.10", "10.64.3.20", 443),
    "onprem-h100-autoscale": Network("10.244.", "10.96.0.10", "192.168.10.5", 6443),
    # kind: its default pod and Service ranges, the control-plane container on kind's Docker network.
    "local-sim": Network("10.244.", "10.96.0.10", "172.18.0.2", 6443),
    "day-two": Network("10.244.", "10.96.0.10", "172.18.0.2", 6443),
    "quickstart-h100": Network("10.244.", "10.96.0.10", "192.168.10.5", 6443),
    # The 2-node cloud stacks keep their 68-node siblings' address plans.
    "gke-h100-2node": Network("10.64.", "10.96.0.10", "172.16.0.2", 443),
    "eks-h100-2node": Network("10.64.", "172.20.0.10", "10.64.3.20", 443),
}
MANAGED_GATEWAY = {"gke-h100", "gke-h100-2node"}
# Where each stack's response store answers (docs/responses.md): the CloudNativePG pods on-prem,
# an address in Cloud SQL's Private Service Access range (10.98.0.0/20), one in RDS's own subnets.
DATABASE = {
    "onprem-h100": "postgres",
    "gke-h100": "cloud-sql",
    "eks-h100": "rds",
    "onprem-h100-autoscale": "postgres",
    "local-sim": None,
    "day-two": None,
    "quickstart-h100": None,
    "gke-h100-2node": None,
    "eks-h100-2node": None,
}
SCRAPERS = {
    "onprem-h100": "monitoring",
    "gke-h100": "gmp-system",
    "eks-h100": "monitoring",
    "onprem-h100-autoscale": "monitoring",
    "local-sim": "monitoring",
    "day-two": "monitoring",
    "quickstart-h100": "monitoring",
    "gke-h100-2node": "monitoring",
    "eks-h100-2node": "monitoring",
}
# Stacks that install KEDA (serving.autoscaling with keda: install) into this namespace.
KEDA = {"onprem-h100-autoscale": "keda"}
# Stacks whose serving pods run the simulator (serving.engine simulator): their own flow table.
SIMULATOR_STACKS = set(all_stacks()) - set(vllm_stacks())
# Stacks with serving.preflight.enabled false: no preflight pods, so none of its flows.
NO_PREFLIGHT = {"quickstart-h100", "gke-h100-2node", "eks-h100-2node"}


def _template_labels(
    objects: list[dict[str, Any]], kind: str, name: str, role: str | None = None
) -> dict[str, str]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if kind == "DisaggregatedSet":
        (spec,) = [r["spec"] for r in obj["spec"]["roles"] if r["name"] == role]
        return dict(spec["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"])
    return dict(obj["spec"]["template"]["metadata"]["labels"])


def endpoints(stack: str, objects: list[dict[str, Any]]) -> dict[str, Endpoint]:
    """Every party of the flow table, the fleet's own pods with their rendered labels."""
    net = NETWORK[stack]
    pod = net.pods
    fleet = stack_raw_config(stack)["serving"]["name"]

    def in_ns(name: str, ip: str, labels: dict[str, str], namespace: str = NAMESPACE) -> Endpoint:
        return Endpoint(name, pod + ip, namespace, labels)

    prefill = _template_labels(objects, "DisaggregatedSet", fleet, "prefill")
    postgres = {"cnpg.io/cluster": "agentic-api-postgres", "cnpg.io/instanceRole": "primary"}
    parties = {
        "prefill": in_ns("prefill", "1.10", prefill),
        "prefill-2": in_ns("prefill-2", "1.11", prefill),
        "decode": in_ns("decode", "2.10", _template_labels(objects, "DisaggregatedSet", fleet, "decode")),
        "epp": in_ns("epp", "3.10", _template_labels(objects, "Deployment", f"{fleet}-epp")),
        "tokenizer": in_ns(
            "tokenizer", "3.20", _template_labels(objects, "Deployment", f"{fleet}-tokenizer")
        ),
        "debug-pod": in_ns("debug-pod", "3.30", {"app": "debug"}),
        "other-ns-pod": in_ns("other-ns-pod", "9.10", {"app": "debug"}, "default"),
        # A pod elsewhere that copies the serving pods' labels: selectors are per namespace.
        "impostor": in_ns("impostor", "9.11", prefill, "default"),
        # The scrapers' namespace is the stack's (`gmp-system` under GKE's managed collection).
        "prometheus": in_ns("prometheus", "8.10", {"app.kubernetes.io/name": "prometheus"}, SCRAPERS[stack]),
        "kube-dns": in_ns("kube-dns", "0.10", {"k8s-app": "kube-dns"}, "kube-system"),
        "xds": in_ns("xds", "7.10", {"app.kubernetes.io/name": "agentgateway"}, "agentgateway-system"),
        "client": Endpoint("client", "203.0.113.9"),
        "model-hub": Endpoint("model-hub", "198.51.100.10"),
        "service-ip": Endpoint("service-ip", net.service),
        "api-server": Endpoint("api-server", net.api_ip),
        "gcp-health-check": Endpoint("gcp-health-check", "35.191.3.4"),
        "agentic-api": in_ns(
            "agentic-api",
            "3.40",
            _template_labels(objects, "Deployment", "agentic-api") if DATABASE[stack] else {"app": "none"},
        ),
        # CloudNativePG instance pods (the labels the operator sets), its operator, the backup store.
        "postgres": in_ns("postgres", "5.10", postgres),
        "postgres-2": in_ns("postgres-2", "5.11", {**postgres, "cnpg.io/instanceRole": "replica"}),
        "cnpg-operator": in_ns(
            "cnpg-operator", "6.10", {"app.kubernetes.io/name": "cloudnative-pg"}, "cnpg-system"
        ),
        "backup-store": Endpoint("backup-store", "198.51.100.20"),
        "cloud-sql": Endpoint("cloud-sql", "10.98.0.3"),
        "rds": Endpoint("rds", "10.64.192.10"),
        # GKE: the internal address the stack reserves for the managed gateway.
        "gateway-address": Endpoint("gateway-address", "10.0.15.252"),
        # KEDA's pods (the `app` labels of the keda chart's Deployments) in its namespace.
        "keda-operator": in_ns("keda-operator", "11.10", {"app": "keda-operator"}, KEDA.get(stack, "keda")),
        "keda-metrics-adapter": in_ns(
            "keda-metrics-adapter",
            "11.20",
            {"app": "keda-operator-metrics-apiserver"},
            KEDA.get(stack, "keda"),
        ),
        "keda-webhooks": in_ns(
            "keda-webhooks", "11.30", {"app": "keda-admission-webhooks"}, KEDA.get(stack, "keda")
        ),
        "keda-stray": in_ns("keda-stray", "11.40", {"app": "debug"}, KEDA.get(stack, "keda")),
        # A Prometheus in a namespace other than the scrapers'.
        "other-prometheus": in_ns(
            "other-prometheus", "9.20", {"app.kubernetes.io/name": "prometheus"}, "default"
        ),
    }
    if stack not in SIMULATOR_STACKS | NO_PREFLIGHT:
        # The two preflight pods (Job completion index 0 listens, index 1 connects); the simulator
        # stacks have no fabric and no preflight.
        probe = _template_labels(objects, "Job", f"{fleet}-preflight")
        parties["preflight-0"] = in_ns("preflight-0", "1.20", probe)
        parties["preflight-1"] = in_ns("preflight-1", "2.20", probe)
    if stack in MANAGED_GATEWAY:
        # GKE's regional internal Application Load Balancer: its proxies in the proxy-only subnet.
        parties["gateway"] = Endpoint("gateway", "10.97.0.7")
    else:
        parties["gateway"] = in_ns("gateway", "4.10", dict(GATEWAY_LABEL))
    return parties


class Flow(NamedTuple):
    source: str
    destination: str
    port: int
    allowed: bool
    why: str
    protocol: str = "TCP"


# Ports (README): prefill vLLM 8000-8007 (supervisor 8008); decode routing sidecar 8000-8007,
# vLLM 8200-8207 (supervisor 8208); DP RPC 5555; KV events 5557-5564; NIXL 5600-5607; p2p
# 7777-7784; EPP ext_proc 9002, metrics 9090; tokenizer 8000; gateway listener 80.
COMMON_FLOWS = [
    Flow("gateway", "decode", 8000, True, "the gateway sends requests to decode's sidecar"),
    Flow("gateway", "prefill", 8007, True, "prefill ranks are pool endpoints too"),
    Flow("gateway", "epp", 9002, True, "ext_proc: the gateway asks the EPP which rank"),
    Flow("epp", "decode", 8003, True, "the EPP scrapes each rank's metrics on its client port"),
    Flow("epp", "prefill", 5557, True, "precise prefix routing subscribes to KV events"),
    Flow("epp", "decode", 5564, True, "KV events of the last local rank"),
    Flow("epp", "tokenizer", 8000, True, "the token producer renders prompts"),
    Flow("epp", "api-server", 6443, True, "watches and the leader lease (443 on gke and eks)"),
    Flow("decode", "prefill", 8000, True, "the sidecar runs the remote prefill"),
    Flow("prefill", "decode", 5600, True, "NIXL side channel"),
    Flow("decode", "prefill", 5603, True, "NIXL side channel, rank 3"),
    Flow("prefill", "prefill-2", 5555, True, "DP RPC to the group's leader"),
    Flow("prefill", "prefill-2", 41231, True, "NCCL/Gloo bootstrap on an ephemeral port"),
    Flow("decode", "prefill", 7777, True, "p2p KV pull"),
    Flow("prometheus", "prefill", 8004, True, "vLLM metrics"),
    Flow("prometheus", "decode", 8208, True, "decode supervisor metrics"),
    Flow("prometheus", "epp", 9090, True, "EPP metrics"),
    Flow("prometheus", "tokenizer", 8000, True, "tokenizer metrics"),
    Flow("prefill", "kube-dns", 53, True, "DNS", "UDP"),
    Flow("tokenizer", "kube-dns", 53, True, "DNS over TCP"),
    Flow("epp", "kube-dns", 53, True, "DNS", "UDP"),
    Flow("prefill", "model-hub", 443, True, "weights from the model hub"),
    Flow("tokenizer", "model-hub", 443, True, "tokenizer files from the model hub"),
    # Denied.
    Flow("other-ns-pod", "prefill", 8000, False, "vLLM's API only through gateway or EPP"),
    Flow("other-ns-pod", "decode", 8200, False, "decode's vLLM behind its sidecar"),
    Flow("other-ns-pod", "decode", 5555, False, "DP RPC is fleet-internal"),
    Flow("other-ns-pod", "prefill", 5600, False, "NIXL is fleet-internal"),
    Flow("other-ns-pod", "prefill", 5557, False, "KV events only to the EPP"),
    Flow("other-ns-pod", "epp", 9002, False, "only the gateway calls the EPP"),
    Flow("other-ns-pod", "tokenizer", 8000, False, "only the EPP (and the scrapers) call the tokenizer"),
    Flow("impostor", "prefill", 5555, False, "the fleet's labels in another namespace are not the fleet"),
    Flow("debug-pod", "prefill", 8000, False, "a stray pod in the serving namespace"),
    Flow("debug-pod", "epp", 9002, False, "a stray pod in the serving namespace"),
    Flow("client", "prefill", 8000, False, "no direct path from outside"),
    Flow("client", "epp", 9002, False, "no direct path from outside"),
    Flow("tokenizer", "prefill", 8000, False, "the tokenizer talks to the hub only"),
    Flow("gateway", "prefill", 5555, False, "the gateway reaches client ports only"),
    Flow("gateway", "decode", 8200, False, "the gateway goes through decode's sidecar"),
    Flow("epp", "decode", 5555, False, "the EPP has no business with DP RPC"),
    Flow("epp", "prefill", 5600, False, "nor with NIXL"),
    Flow("prometheus", "prefill", 5555, False, "metrics ports only"),
    Flow("prometheus", "tokenizer", 5557, False, "the scrapers reach the tokenizer's HTTP port only"),
    Flow("prefill", "model-hub", 80, False, "the hub on 443 only"),
    Flow("prefill", "other-ns-pod", 443, False, "port 443 excludes the pod range"),
    Flow("prefill", "service-ip", 443, False, "port 443 excludes the Service range"),
    Flow("tokenizer", "other-ns-pod", 443, False, "port 443 excludes the pod range"),
    Flow("prefill", "kube-dns", 80, False, "kube-dns on 53 only"),
    Flow("prefill", "epp", 9002, False, "serving pods do not call the EPP"),
    Flow("prefill", "api-server", 6443, False, "serving pods have no API access"),
    Flow("epp", "other-ns-pod", 8080, False, "the EPP's egress is the fleet, tokenizer, DNS, API"),
    Flow("debug-pod", "model-hub", 443, False, "default deny covers the whole namespace"),
]
# The fabric preflight (on in every vLLM stack): its metadata exchange and nothing else.
PREFLIGHT_FLOWS = [
    Flow("preflight-1", "preflight-0", 5590, True, "the initiator fetches the target's NIXL metadata"),
    Flow("preflight-0", "preflight-1", 5590, True, "either pod may hold either index"),
    Flow("preflight-0", "kube-dns", 53, True, "the peer's name", "UDP"),
    Flow("preflight-1", "preflight-0", 41231, False, "UCX falling back to TCP on the pod network"),
    Flow("preflight-1", "preflight-0", 5600, False, "the metadata port only"),
    Flow("preflight-0", "prefill", 5600, False, "the probe never reaches the serving pods"),
    Flow("decode", "preflight-0", 5590, False, "serving pods do not talk to the probe"),
    Flow("other-ns-pod", "preflight-0", 5590, False, "the probe pair only"),
    Flow("debug-pod", "preflight-1", 5590, False, "a stray pod in the serving namespace"),
    Flow("preflight-0", "model-hub", 443, False, "the probe downloads nothing"),
    Flow("preflight-1", "api-server", 443, False, "the probe has no API access"),
]
IN_CLUSTER_GATEWAY_FLOWS = [
    Flow("client", "gateway", 80, True, "the listener, from anywhere"),
    Flow("gateway", "xds", 9978, True, "agentgateway's controller configures its proxies"),
    Flow("prometheus", "gateway", 15020, True, "proxy metrics"),
    Flow("gateway", "model-hub", 443, False, "the gateway has no egress to the internet"),
    Flow("client", "gateway", 15021, False, "the listener port only"),
]
MANAGED_GATEWAY_FLOWS = [
    Flow("gcp-health-check", "decode", 8005, True, "HealthCheckPolicy: each endpoint on its own port"),
    Flow("gcp-health-check", "prefill", 8000, True, "HealthCheckPolicy: each endpoint on its own port"),
    Flow("gcp-health-check", "epp", 9003, True, "the load balancer checks the EPP's gRPC health"),
    Flow("gcp-health-check", "prefill", 5555, False, "health checks reach client ports only"),
    Flow("gcp-health-check", "epp", 9090, False, "not the EPP's metrics"),
    Flow("client", "decode", 8000, False, "clients come through the load balancer's proxies"),
]


# The Responses layer (on in every stack): the agentic API between the gateway and the database.
RESPONSES_FLOWS = [
    Flow("gateway", "agentic-api", 9000, True, "the gateway sends /v1/responses to the agentic API"),
    Flow("agentic-api", "database", 5432, True, "the agentic API stores and rehydrates responses"),
    Flow("agentic-api", "database", 5433, False, "PostgreSQL's port only"),
    Flow("other-ns-pod", "agentic-api", 9000, False, "the agentic API only through the gateway"),
    Flow("debug-pod", "agentic-api", 9000, False, "a stray pod in the serving namespace"),
    Flow("client", "agentic-api", 9000, False, "no direct path from outside"),
    Flow("agentic-api", "prefill", 8000, False, "the agentic API never bypasses the endpoint picker"),
    Flow("agentic-api", "decode", 8000, False, "the agentic API never bypasses the endpoint picker"),
    Flow("agentic-api", "epp", 9002, False, "only the gateway calls the EPP"),
    Flow("agentic-api", "model-hub", 443, False, "the agentic API has no egress to the internet"),
    Flow("agentic-api", "api-server", 443, False, "the agentic API has no API access"),
    Flow("tokenizer", "database", 5432, False, "only the agentic API reaches the database"),
    Flow("prefill", "database", 5432, False, "only the agentic API reaches the database"),
    Flow("epp", "agentic-api", 9000, False, "the EPP does not call the agentic API"),
]
RESPONSES_IN_CLUSTER_GATEWAY_FLOWS = [
    Flow("agentic-api", "gateway", 80, True, "inference requests go back through the gateway's proxies"),
    Flow("gateway", "agentic-api", 9001, False, "the agentic API's port only"),
]
RESPONSES_MANAGED_GATEWAY_FLOWS = [
    Flow("agentic-api", "gateway-address", 80, True, "inference requests go back through the gateway"),
    Flow("agentic-api", "gateway-address", 443, False, "the listener port only"),
    Flow("gcp-health-check", "agentic-api", 9000, True, "HealthCheckPolicy on the agentic API's /health"),
    Flow("gcp-health-check", "agentic-api", 5432, False, "health checks reach port 9000 only"),
    Flow("agentic-api", "rds", 5432, False, "outside Cloud SQL's range, no database port"),
]
CLOUDNATIVE_PG_FLOWS = [
    Flow("postgres", "postgres-2", 5432, True, "streaming replication"),
    Flow("postgres-2", "postgres", 8000, True, "instance managers talk to each other"),
    Flow("cnpg-operator", "postgres", 8000, True, "the operator polls each instance manager"),
    Flow("prometheus", "postgres", 9187, True, "PostgreSQL metrics"),
    Flow("postgres", "api-server", 6443, True, "the instance manager reads its Cluster and Secrets"),
    Flow("postgres", "backup-store", 9000, True, "WAL archive and base backups to the S3-compatible store"),
    Flow("cnpg-operator", "postgres", 5432, False, "the operator only talks to instance managers"),
    Flow("other-ns-pod", "postgres", 5432, False, "the database only from the agentic API"),
    Flow("impostor", "postgres", 5432, False, "the fleet's labels in another namespace are not the fleet"),
    Flow("debug-pod", "postgres", 5432, False, "a stray pod in the serving namespace"),
    Flow("epp", "postgres", 5432, False, "only the agentic API reaches the database"),
    Flow("prometheus", "postgres", 5432, False, "metrics port only"),
    Flow("postgres", "model-hub", 80, False, "outside the cluster, the backup store's and API ports only"),
    Flow("postgres", "other-ns-pod", 9000, False, "the backup rule excludes the pod range"),
    Flow("postgres", "prefill", 8000, False, "the database has no business with the engines"),
]


# KEDA (stacks that install it): the operator queries Prometheus, the API server reaches the
# metrics adapter (external metrics for the HPA) and the webhooks; nothing more.
KEDA_FLOWS = [
    Flow("keda-operator", "prometheus", 9090, True, "the triggers' PromQL queries"),
    Flow("api-server", "keda-metrics-adapter", 6443, True, "the HPA's external metrics API"),
    Flow("api-server", "keda-webhooks", 9443, True, "ScaledObject admission webhooks"),
    Flow("keda-metrics-adapter", "keda-operator", 9666, True, "the adapter asks the operator's gRPC"),
    Flow("keda-operator", "api-server", 6443, True, "watches, the leader lease, /scale writes"),
    Flow("keda-metrics-adapter", "api-server", 6443, True, "delegated authn/authz"),
    Flow("keda-webhooks", "api-server", 6443, True, "reads the scale targets it validates"),
    Flow("keda-operator", "kube-dns", 53, True, "DNS", "UDP"),
    Flow("keda-operator", "prometheus", 9091, False, "Prometheus's query port only"),
    Flow("keda-operator", "other-prometheus", 9090, False, "only the scrapers' namespace's Prometheus"),
    Flow("keda-operator", "prefill", 8000, False, "KEDA never talks to the engines"),
    Flow("keda-operator", "epp", 9090, False, "KEDA reads the EPP's series from Prometheus, not the EPP"),
    Flow("keda-operator", "model-hub", 80, False, "outside the cluster, the API server ports only"),
    Flow("other-ns-pod", "keda-operator", 9666, False, "only the metrics adapter calls the operator"),
    Flow("keda-stray", "keda-operator", 9666, False, "not even a stray pod of KEDA's namespace"),
    Flow("keda-metrics-adapter", "prometheus", 9090, False, "only the operator queries Prometheus"),
    Flow("keda-webhooks", "prometheus", 9090, False, "only the operator queries Prometheus"),
    Flow("keda-metrics-adapter", "keda-webhooks", 9443, False, "no flow between adapter and webhooks"),
    Flow("keda-stray", "model-hub", 80, False, "default deny covers KEDA's namespace"),
    Flow("prefill", "keda-metrics-adapter", 6443, False, "serving pods have no business with KEDA"),
]
# The simulator stack (kind local): the same request path and scrapes; no KV events, no DP
# supervisor, nothing from the model hub for the engines; no Responses layer.
SIMULATOR_FLOWS = [
    Flow("gateway", "decode", 8000, True, "the gateway sends requests to decode's sidecar"),
    Flow("gateway", "prefill", 8001, True, "both prefill ranks are pool endpoints"),
    Flow("gateway", "epp", 9002, True, "ext_proc: the gateway asks the EPP which rank"),
    Flow("epp", "decode", 8001, True, "the EPP scrapes each rank's metrics on its client port"),
    Flow("epp", "tokenizer", 8000, True, "the token producer renders prompts"),
    Flow("epp", "api-server", 6443, True, "watches and the leader lease"),
    Flow("decode", "prefill", 8000, True, "the sidecar runs the remote prefill"),
    Flow("prefill", "prefill-2", 41231, True, "anything inside the fleet"),
    Flow("prometheus", "prefill", 8001, True, "the simulator's metrics, rank 1"),
    Flow("prometheus", "decode", 8200, True, "decode's simulator metrics behind the sidecar"),
    Flow("prometheus", "epp", 9090, True, "EPP metrics"),
    Flow("prometheus", "tokenizer", 8000, True, "tokenizer metrics"),
    Flow("prefill", "kube-dns", 53, True, "DNS", "UDP"),
    Flow("tokenizer", "kube-dns", 53, True, "DNS over TCP"),
    Flow("epp", "kube-dns", 53, True, "DNS", "UDP"),
    Flow("tokenizer", "model-hub", 443, True, "tokenizer files from the model hub"),
    # Denied.
    Flow("epp", "prefill", 5557, False, "no KV-event port: the simulator publishes none"),
    Flow("epp", "decode", 5558, False, "no KV-event port: the simulator publishes none"),
    Flow("prometheus", "decode", 8202, False, "no DP supervisor: engine ports only"),
    Flow("prefill", "model-hub", 443, False, "the simulator downloads nothing"),
    Flow("decode", "model-hub", 443, False, "the simulator downloads nothing"),
    Flow("other-ns-pod", "prefill", 8000, False, "the simulator's API only through gateway or EPP"),
    Flow("other-ns-pod", "decode", 8200, False, "decode's simulator behind its sidecar"),
    Flow("impostor", "prefill", 5555, False, "the fleet's labels in another namespace are not the fleet"),
    Flow("debug-pod", "prefill", 8000, False, "a stray pod in the serving namespace"),
    Flow("client", "prefill", 8000, False, "no direct path from outside"),
    Flow("client", "epp", 9002, False, "no direct path from outside"),
    Flow("gateway", "decode", 8200, False, "the gateway goes through decode's sidecar"),
    Flow("prefill", "epp", 9002, False, "serving pods do not call the EPP"),
    Flow("prefill", "api-server", 6443, False, "serving pods have no API access"),
    Flow("debug-pod", "model-hub", 443, False, "default deny covers the whole namespace"),
]


def flows(stack: str) -> list[Flow]:
    if stack in SIMULATOR_STACKS:
        return SIMULATOR_FLOWS + IN_CLUSTER_GATEWAY_FLOWS
    api_port = NETWORK[stack].api_port
    table = [
        f._replace(port=api_port) if f.destination == "api-server" and f.allowed else f
        for f in COMMON_FLOWS
        + ([] if stack in NO_PREFLIGHT else PREFLIGHT_FLOWS)
        + (CLOUDNATIVE_PG_FLOWS if DATABASE[stack] == "postgres" else [])
    ]
    database = DATABASE[stack]
    if database is not None:
        table += [
            f._replace(destination=database) if f.destination == "database" else f for f in RESPONSES_FLOWS
        ]
    responses_gateway = (
        []
        if database is None
        else RESPONSES_MANAGED_GATEWAY_FLOWS
        if stack in MANAGED_GATEWAY
        else RESPONSES_IN_CLUSTER_GATEWAY_FLOWS
    )
    if stack in MANAGED_GATEWAY:
        table += MANAGED_GATEWAY_FLOWS + responses_gateway
    else:
        table += IN_CLUSTER_GATEWAY_FLOWS + responses_gateway
    if stack in KEDA:
        table += [
            f._replace(port=api_port) if f.destination == "api-server" and f.allowed else f
            for f in KEDA_FLOWS
        ]
    return table


# One pool per stack here; the multi-model stack's flows between its models are in
# tests/layers/gateway/test_models.py.
TABLE = [(stack, flow) for stack in single_model_stacks() for flow in flows(stack)]


@pytest.mark.parametrize(
    ("stack", "flow"),
    TABLE,
    ids=[
        f"{s}:{f.source}->{f.destination}:{f.port}/{f.protocol}:{'allow' if f.allowed else 'deny'}"
        for s, f in TABLE
    ],
)
def test_flow_table(stack, flow, rendered):
    objects = rendered(stack)
    cluster = Cluster.from_objects(objects)
    parties = endpoints(stack, objects)
    verdict = cluster.allows(parties[flow.source], parties[flow.destination], flow.port, flow.protocol)
    assert verdict == flow.allowed, flow.why


@pytest.mark.parametrize("stack", single_model_stacks())
def test_every_denial_comes_from_the_policies(stack, rendered):
    """Without the rendered policies every flow of the table gets through: each denial above is
    the policies' doing, not the evaluator's."""
    objects = rendered(stack)
    parties = endpoints(stack, objects)
    open_cluster = Cluster(policies=())
    assert all(
        open_cluster.allows(parties[f.source], parties[f.destination], f.port, f.protocol)
        for f in flows(stack)
    )
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    namespaces = {NAMESPACE, *([KEDA[stack]] if stack in KEDA else [])}
    assert {p["metadata"]["namespace"] for p in policies} == namespaces
    for namespace in namespaces:
        default_deny = [
            p
            for p in policies
            if p["metadata"]["namespace"] == namespace
            and p["spec"]["podSelector"] == {}
            and not {"ingress", "egress"} & set(p["spec"])
        ]
        assert len(default_deny) == 1 and default_deny[0]["spec"]["policyTypes"] == ["Ingress", "Egress"]


@pytest.mark.parametrize("stack", single_model_stacks())
def test_every_policy_rule_is_used_by_an_allowed_flow(stack, rendered):
    """Each allow rule admits at least one flow of the table: the table covers the policies."""
    objects = rendered(stack)
    parties = endpoints(stack, objects)
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    allowed = [f for f in flows(stack) if f.allowed]
    for policy in policies:
        for direction in ("ingress", "egress"):
            for index, _ in enumerate(policy["spec"].get(direction) or ()):
                without = copy.deepcopy(policy)
                del without["spec"][direction][index]
                cluster = Cluster.from_objects([*(p for p in objects if p is not policy), without])
                broken = [
                    f
                    for f in allowed
                    if not cluster.allows(parties[f.source], parties[f.destination], f.port, f.protocol)
                ]
                assert broken, (
                    f"{policy['metadata']['name']} {direction}[{index}] admits no flow of the table"
                )


def test_observability_namespace_is_configurable():
    raw = stack_raw_config()
    raw["observability"] = {"namespace": "gmp-system"}
    config = parse_config(raw)
    specs = network_policy_specs(config, plan_fleet(config))
    operator = {"kubernetes.io/metadata.name": "cnpg-system"}  # the database operator, not metrics
    metrics_sources = [
        peer["namespaceSelector"]["matchLabels"]
        for spec in specs.values()
        for rule in spec.get("ingress", ())
        for peer in rule.get("from", ())
        if "namespaceSelector" in peer and peer["namespaceSelector"]["matchLabels"] != operator
    ]
    assert metrics_sources and all(
        s == {"kubernetes.io/metadata.name": "gmp-system"} for s in metrics_sources
    )


def test_cluster_ranges_come_from_the_target_config():
    onprem = stack_raw_config("onprem-h100")
    assert cluster_ranges(parse_config(onprem)).pods == ("10.244.0.0/16",)
    onprem["target"]["onprem"] = {"podCidr": "192.168.0.0/16", "serviceCidr": "10.32.0.0/16"}
    ranges = cluster_ranges(parse_config(onprem))
    assert ranges.pods == ("192.168.0.0/16",) and ranges.services == ("10.32.0.0/16",)
    gke = parse_config(stack_raw_config("gke-h100"))
    assert isinstance(gke.target, GkeTarget)
    assert cluster_ranges(gke).pods == (gke.target.gke.network.pod_cidr,)
    assert cluster_ranges(gke).gateway_sources == (gke.target.gke.network.proxy_only_cidr,)
    eks = parse_config(stack_raw_config("eks-h100"))
    assert isinstance(eks.target, EksTarget)
    assert cluster_ranges(eks).pods == (eks.target.eks.vpc_cidr,)
    assert set(cluster_ranges(eks).services) == {"10.100.0.0/16", "172.20.0.0/16"}


@pytest.mark.parametrize(
    ("onprem", "key", "words"),
    [
        ({"podCidr": "10.244.1.0/16"}, "target.onprem.podCidr", "no host bits"),
        ({"serviceCidr": "10.96.0.0"}, "target.onprem.serviceCidr", "CIDR notation"),
        ({"serviceCidr": "10.244.0.0/20"}, "target.onprem.serviceCidr", "must not overlap podCidr"),
        ({"podCidr": "$(id)/8"}, "target.onprem.podCidr", "CIDR notation"),
    ],
)
def test_bad_cluster_ranges_are_refused(onprem, key, words):
    raw = stack_raw_config()
    raw["target"]["onprem"] = onprem
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert any(where == f"llmd-fleet:{key}" and words in message for where, message in caught.value.problems)


def test_onprem_ranges_only_on_onprem_and_observability_namespace_is_a_dns_label():
    raw = stack_raw_config("gke-h100")
    raw["target"]["onprem"] = {}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert ("llmd-fleet:target.onprem", "only for kind onprem or local") in caught.value.problems
    raw = stack_raw_config()
    raw["observability"] = {"namespace": "Monitoring; rm"}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert any(
        where == "llmd-fleet:observability.namespace" and "DNS-1123 label" in message
        for where, message in caught.value.problems
    )
    assert parse_config(stack_raw_config()).observability.namespace == "monitoring"


# --- The evaluator itself ----------------------------------------------------------------------------


def _policy(spec: dict[str, Any], namespace: str = "a") -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": namespace}, "spec": spec}


def test_evaluator_semantics():
    web = Endpoint("web", "10.0.0.1", "a", {"app": "web"})
    db = Endpoint("db", "10.0.0.2", "a", {"app": "db"})
    other = Endpoint("other", "10.0.1.1", "b", {"app": "web"})
    outside = Endpoint("outside", "8.8.8.8")
    # Not selected: not isolated.
    assert Cluster((_policy({"podSelector": {"matchLabels": {"app": "db"}}}),)).allows(db, web, 80)
    # Selected for ingress (policyTypes defaults to Ingress): nothing in.
    isolated = Cluster((_policy({"podSelector": {"matchLabels": {"app": "db"}}}),))
    assert not isolated.allows(web, db, 5432) and isolated.allows(db, web, 80)
    # Same-namespace podSelector, port and protocol.
    rule = {"from": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 5432}]}
    cluster = Cluster((_policy({"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [rule]}),))
    assert cluster.allows(web, db, 5432) and not cluster.allows(web, db, 5433)
    assert not cluster.allows(web, db, 5432, "UDP") and not cluster.allows(other, db, 5432)
    # namespaceSelector AND podSelector in one peer; endPort ranges.
    both = {
        "namespaceSelector": {"matchLabels": {"team": "x"}},
        "podSelector": {"matchLabels": {"app": "web"}},
    }
    spec = {"podSelector": {}, "ingress": [{"from": [both], "ports": [{"port": 1, "endPort": 9}]}]}
    cluster = Cluster((_policy(spec),), {"b": {"team": "x"}})
    assert cluster.allows(other, db, 9) and not cluster.allows(other, db, 10)
    assert not cluster.allows(Endpoint("o2", "10.0.1.2", "b", {"app": "x"}), db, 5)
    # ipBlock with except; egress isolation.
    block = {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}
    cluster = Cluster((_policy({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [block]}]}),))
    assert cluster.allows(web, outside, 443) and not cluster.allows(web, other, 443)
    # An empty rule admits everyone; matchExpressions.
    expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}
    cluster = Cluster((_policy({"podSelector": expr, "ingress": [{}]}),))
    assert cluster.allows(outside, db, 1) and cluster.allows(other, db, 2)


def test_layers_add_rules_only_to_a_policy_another_layer_defines():
    """The union keeps each policy's owner: a later layer's rules follow the owner's, and rules for
    a policy no layer defines, or a second definition, are refused."""
    owner = {"model-server": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": ["fleet"]}]}}
    extra = {"model-server": {"egress": [{"to": ["server"]}]}}
    assert union([owner, extra])["model-server"]["egress"] == [{"to": ["fleet"]}, {"to": ["server"]}]
    assert owner["model-server"]["egress"] == [{"to": ["fleet"]}]
    with pytest.raises(AssertionError, match="before a layer defines it"):
        union([extra, owner])
    with pytest.raises(AssertionError, match="defined by two layers"):
        union([owner, owner])
