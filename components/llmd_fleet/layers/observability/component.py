"""Scraping, alerts and dashboards of the fleet, per target (pure builders first, the
`Observability` component last; docs/observability.md).

`observability.prometheus` picks who scrapes:

- `operator`: PodMonitors (one per role, one for the tokenizer), a ServiceMonitor for the endpoint
  picker and a PrometheusRule, for a prometheus-operator already in the cluster;
- `install`: the same, plus kube-prometheus-stack (pinned chart) in `observability.namespace`;
- `gmp` (gke): PodMonitorings (per role, the endpoint picker, the tokenizer) and Rules for Managed
  Service for Prometheus;
- `none`: no scrape or rule objects.

Every vLLM rank runs its own API server with its own /metrics, so each role's monitor lists one
endpoint per local rank port (8 per pod). Decode's routing sidecar (llm-d-router at the pinned
tag) serves metrics only with `--metrics-port`, and then only MoRI-IO DNS counters, so decode is
scraped on its engine ports behind the sidecar. Every target gets `role` (pod label `llm-d.ai/role`) and
`component` (pod label `app.kubernetes.io/component`) labels, which the alerts and dashboards
select on.

The endpoint picker authenticates and authorises its metrics scrapes (`--metrics-endpoint-auth`,
on by default at the pinned tag): it creates TokenReviews and SubjectAccessReviews, so its
ServiceAccount gets a ClusterRole for those, and the scraper presents the token of a dedicated
`<pool>-metrics-reader` ServiceAccount that may `get` the non-resource URL /metrics (the same
objects llm-d-router's chart renders). Under GMP the managed collector reads that token Secret
through a Role bound to `gmp-system:collector`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import MODEL_SCOPE_LABEL, common_labels
from llmd_fleet.layers.observability.alerts import rule_groups
from llmd_fleet.layers.observability.config import GMP_NAMESPACE
from llmd_fleet.layers.observability.dashboards import DASHBOARD_LABEL, dashboard_json, fleet_dashboards
from llmd_fleet.layers.router.specs import (
    METRICS_PORT,
    TOKENIZER_PORT,
    RouterNames,
    epp_selector,
    tokenizer_selector,
)
from llmd_fleet.plan.admission import PROGRAM_SERIES
from llmd_fleet.plan.fleet import FleetPlan, RoleName
from llmd_fleet.plan.observability import ObservabilityPlan, plan_observability
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

PROMETHEUS_OPERATOR_API = "monitoring.coreos.com/v1"
GMP_API = "monitoring.googleapis.com/v1"
KUBE_PROMETHEUS_STACK = "kube-prometheus-stack"
METRICS_PATH = "/metrics"
# Target labels every monitor attaches, from the pod's labels.
TARGET_LABELS = {"role": "llm-d.ai/role", "component": "app.kubernetes.io/component"}
TOKEN_KEY = "token"
# The Service port names of the router's Services (llmd_fleet/layers/router/component.py).
EPP_METRICS_PORT_NAME = "http-metrics"
TOKENIZER_PORT_NAME = "http"


def rank_port_names(role: RoleName, ranks: int) -> list[str]:
    """The pod's named ports of each local rank's API server (llmd_fleet/layers/serving/pod.py names them)."""
    prefix = "rank" if role == "prefill" else "vllm-rank"
    return [f"{prefix}{i}" for i in range(ranks)]


def monitor_labels(config: StackConfig) -> dict[str, str]:
    """Labels of every monitor and rule object: the fleet's own plus `observability.monitorLabels`."""
    return {**common_labels("monitoring", config.serving.name), **config.observability.monitor_labels}


def _target_labels(config: StackConfig) -> dict[str, str]:
    """Target label -> pod label; with `llmd-fleet:models` also the model's (its pods' instance
    label), which tells the models sharing the namespace apart."""
    if config.model_scope is None:
        return TARGET_LABELS
    return {**TARGET_LABELS, MODEL_SCOPE_LABEL: "app.kubernetes.io/instance"}


def _relabelings(config: StackConfig) -> list[dict[str, Any]]:
    """prometheus-operator: copy the pod labels into the target labels the rules select on."""
    return [
        {"sourceLabels": [f"__meta_kubernetes_pod_label_{_sanitize(label)}"], "targetLabel": target}
        for target, label in _target_labels(config).items()
    ]


def _sanitize(label: str) -> str:
    """Prometheus's Kubernetes discovery meta-label form of a label name."""
    return "".join(c if c.isalnum() else "_" for c in label)


def _interval(config: StackConfig) -> str:
    return f"{config.observability.scrape_interval_seconds}s"


def role_selector(config: StackConfig, role: RoleName) -> dict[str, str]:
    """The labels that select one serving role's pods of this stack (the role's PodMonitor)."""
    return {
        "llm-d.ai/inference-serving": "true",
        "app.kubernetes.io/instance": config.serving.name,
        "llm-d.ai/role": role,
    }


def pod_monitor_spec(config: StackConfig, obs: ObservabilityPlan, role: RoleName) -> dict[str, Any]:
    """prometheus-operator PodMonitor of one role: every local rank's API port."""
    targets = obs.role(role)
    return {
        "selector": {"matchLabels": role_selector(config, role)},
        "namespaceSelector": {"matchNames": [config.serving.namespace]},
        "podMetricsEndpoints": [
            {
                "port": name,
                "path": METRICS_PATH,
                "interval": _interval(config),
                "relabelings": _relabelings(config),
            }
            for name in rank_port_names(role, len(targets.ports))
        ],
    }


def tokenizer_monitor_spec(config: StackConfig) -> dict[str, Any]:
    """The tokenizer (`vllm launch render`) serves vLLM's HTTP server metrics on its port."""
    return {
        "selector": {"matchLabels": tokenizer_selector(config)},
        "namespaceSelector": {"matchNames": [config.serving.namespace]},
        "podMetricsEndpoints": [
            {
                "port": TOKENIZER_PORT_NAME,
                "path": METRICS_PATH,
                "interval": _interval(config),
                "relabelings": _relabelings(config),
            }
        ],
    }


def reader_names(config: StackConfig) -> dict[str, str]:
    """Names of the metrics-reader identity and of the endpoint picker's auth RBAC."""
    pool, ns = config.serving.name, config.serving.namespace
    return {
        "account": f"{pool}-metrics-reader",
        "secret": f"{pool}-metrics-reader-token",
        # Cluster-scoped: namespace and pool keep two fleets apart.
        "reader_role": f"llmd-fleet-{ns}-{pool}-metrics-reader",
        "epp_auth_role": f"llmd-fleet-{ns}-{pool}-epp-metrics-auth",
        "secret_reader": f"{pool}-metrics-reader-secret-read",
    }


def service_monitor_spec(config: StackConfig) -> dict[str, Any]:
    """prometheus-operator ServiceMonitor of the endpoint picker's metrics port, with the
    metrics-reader token its authentication requires."""
    return {
        "selector": {"matchLabels": epp_selector(config)},
        "namespaceSelector": {"matchNames": [config.serving.namespace]},
        "endpoints": [
            {
                "port": EPP_METRICS_PORT_NAME,
                "path": METRICS_PATH,
                "interval": _interval(config),
                "authorization": {
                    "type": "Bearer",
                    "credentials": {"name": reader_names(config)["secret"], "key": TOKEN_KEY},
                },
                "relabelings": _relabelings(config),
                "metricRelabelings": [_drop_program_series()],
            }
        ],
    }


def _drop_program_series() -> dict[str, Any]:
    """Drop the EPP's per-program series (label `program_id`, one pair per agent session) at
    scrape: tens of thousands of short-lived series for no panel or alert; the fleet-wide Jain's
    index (`llm_d_epp_program_aware_jains_fairness_index`) stays."""
    return {"action": "drop", "sourceLabels": ["__name__"], "regex": "|".join(PROGRAM_SERIES)}


def _gmp_target_labels(config: StackConfig) -> dict[str, Any]:
    return {
        "fromPod": [{"from": label, "to": target} for target, label in _target_labels(config).items()],
        "metadata": ["pod", "container"],
    }


def pod_monitoring_specs(config: StackConfig, obs: ObservabilityPlan) -> dict[str, dict[str, Any]]:
    """Managed Service for Prometheus: name suffix -> PodMonitoring spec."""
    interval = _interval(config)
    specs: dict[str, dict[str, Any]] = {}
    for role in ("prefill", "decode"):
        targets = obs.role(role)
        specs[role] = {
            "selector": {"matchLabels": role_selector(config, role)},
            "endpoints": [
                {"port": name, "path": METRICS_PATH, "interval": interval}
                for name in rank_port_names(role, len(targets.ports))
            ],
            "targetLabels": _gmp_target_labels(config),
        }
    specs["epp"] = {
        "selector": {"matchLabels": epp_selector(config)},
        "endpoints": [
            {
                "port": METRICS_PORT,
                "path": METRICS_PATH,
                "interval": interval,
                "authorization": {
                    "type": "Bearer",
                    "credentials": {"secret": {"name": reader_names(config)["secret"], "key": TOKEN_KEY}},
                },
                "metricRelabeling": [_drop_program_series()],
            }
        ],
        "targetLabels": _gmp_target_labels(config),
    }
    specs["tokenizer"] = {
        "selector": {"matchLabels": tokenizer_selector(config)},
        "endpoints": [{"port": TOKENIZER_PORT, "path": METRICS_PATH, "interval": interval}],
        "targetLabels": _gmp_target_labels(config),
    }
    return specs


def kube_prometheus_stack_values(config: StackConfig) -> dict[str, Any]:
    """Values of the installed kube-prometheus-stack: its Prometheus selects every PodMonitor,
    ServiceMonitor and PrometheusRule in the cluster (the chart's default selects its own release
    label only), and its Grafana's sidecar loads the dashboards from every namespace."""
    return {
        "prometheus": {
            "prometheusSpec": {
                "scrapeInterval": _interval(config),
                "podMonitorSelectorNilUsesHelmValues": False,
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
            }
        },
        "grafana": {
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": next(iter(DASHBOARD_LABEL)),
                    "labelValue": DASHBOARD_LABEL[next(iter(DASHBOARD_LABEL))],
                    "searchNamespace": "ALL",
                }
            }
        },
    }


def metrics_reader_rules() -> list[dict[str, Any]]:
    """The ClusterRole rule a scraper needs to read an authenticated `/metrics` endpoint: `get` on
    that non-resource URL, nothing else."""
    return [{"nonResourceURLs": [METRICS_PATH], "verbs": ["get"]}]


def epp_metrics_auth_rules() -> list[dict[str, Any]]:
    """What the endpoint picker's metrics filter calls for every scrape (controller-runtime's
    WithAuthenticationAndAuthorization): TokenReviews and SubjectAccessReviews."""
    return [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]


def dashboard_config_maps(obs: ObservabilityPlan) -> dict[str, dict[str, str]]:
    """ConfigMap name -> data, one per dashboard."""
    pool = obs.pool
    return {
        f"{pool}-dashboard-{board.key}": {f"{pool}-{board.key}.json": dashboard_json(pool, board)}
        for board in fleet_dashboards(obs)
    }


class ObservabilityArgs(TypedDict):
    """Arguments of `Observability`. Every key is required."""

    config: StackConfig
    """The validated stack config; `observability` picks the scraper (`prometheus`), the dashboards
    and the monitors' labels, `serving` names the namespace and pool."""
    plan: FleetPlan
    """The fleet plan; `plan_observability` derives the scrape targets and alert thresholds from it."""


class Observability(pulumi.ComponentResource):
    """Monitors, alert rules, the endpoint picker's metrics auth and the dashboards; with
    `prometheus: install`, kube-prometheus-stack too."""

    plan: ObservabilityPlan

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:observability:Observability", name, {}, opts)
        config = args["config"]
        self.plan = obs = plan_observability(config, args["plan"])
        mode = config.observability.prometheus
        ns, pool = config.serving.namespace, config.serving.name
        child = pulumi.ResourceOptions(parent=self)
        labels = monitor_labels(config)

        def meta(object_name: str, namespace: str | None = ns, **extra: str) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=namespace, labels={**labels, **extra} if extra else labels
            )

        if config.observability.dashboards:
            for cm_name, data in dashboard_config_maps(obs).items():
                k8s.core.v1.ConfigMap(
                    f"{name}-{cm_name.removeprefix(pool + '-')}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=cm_name,
                        namespace=ns,
                        labels={**common_labels("dashboard", pool), **DASHBOARD_LABEL},
                    ),
                    data=data,
                    opts=child,
                )
        if mode == "none":
            self.register_outputs({})
            return
        crds: list[pulumi.Resource] = []
        if mode == "install":
            monitoring_ns = config.observability.namespace
            namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=monitoring_ns,
                    # Pod Security `privileged`: the chart's node exporter runs on the host's
                    # network and PID namespaces with hostPath mounts of /proc and /sys.
                    labels={**common_labels("monitoring", pool), **pod_security_labels("privileged")},
                ),
                opts=child,
            )
            crds.append(
                pinned_release(
                    f"{name}-kube-prometheus-stack",
                    KUBE_PROMETHEUS_STACK,
                    versions().chart(KUBE_PROMETHEUS_STACK),
                    monitoring_ns,
                    kube_prometheus_stack_values(config),
                    pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
                )
            )
        after_crds = pulumi.ResourceOptions(parent=self, depends_on=crds)
        names = reader_names(config)
        epp_account = RouterNames(pool=pool, namespace=ns).epp
        # The endpoint picker's side of its metrics authentication.
        k8s.rbac.v1.ClusterRole(
            f"{name}-epp-metrics-auth",
            metadata=meta(names["epp_auth_role"], None),
            rules=epp_metrics_auth_rules(),
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-epp-metrics-auth-binding",
            metadata=meta(names["epp_auth_role"], None),
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": names["epp_auth_role"],
            },
            subjects=[{"kind": "ServiceAccount", "name": epp_account, "namespace": ns}],
            opts=child,
        )
        # The scraper's side: a token allowed to GET /metrics and nothing else.
        account = k8s.core.v1.ServiceAccount(
            f"{name}-metrics-reader",
            metadata=meta(names["account"]),
            automount_service_account_token=False,
            opts=child,
        )
        k8s.core.v1.Secret(
            f"{name}-metrics-reader-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names["secret"],
                namespace=ns,
                labels=labels,
                annotations={"kubernetes.io/service-account.name": names["account"]},
            ),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
        )
        k8s.rbac.v1.ClusterRole(
            f"{name}-metrics-reader-role",
            metadata=meta(names["reader_role"], None),
            rules=metrics_reader_rules(),
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-metrics-reader-binding",
            metadata=meta(names["reader_role"], None),
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": names["reader_role"],
            },
            subjects=[{"kind": "ServiceAccount", "name": names["account"], "namespace": ns}],
            opts=child,
        )
        groups = rule_groups(obs)
        if mode == "gmp":
            # GKE's managed collector reads the reader token to scrape the endpoint picker.
            k8s.rbac.v1.Role(
                f"{name}-metrics-reader-secret-read",
                metadata=meta(names["secret_reader"]),
                rules=[
                    {
                        "apiGroups": [""],
                        "resources": ["secrets"],
                        "resourceNames": [names["secret"]],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
                opts=child,
            )
            k8s.rbac.v1.RoleBinding(
                f"{name}-metrics-reader-secret-read-binding",
                metadata=meta(names["secret_reader"]),
                role_ref={
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": names["secret_reader"],
                },
                subjects=[{"kind": "ServiceAccount", "name": "collector", "namespace": GMP_NAMESPACE}],
                opts=child,
            )
            for suffix, spec in pod_monitoring_specs(config, obs).items():
                k8s.apiextensions.CustomResource(
                    f"{name}-podmonitoring-{suffix}",
                    api_version=GMP_API,
                    kind="PodMonitoring",
                    metadata=meta(f"{pool}-{suffix}"),
                    spec=spec,
                    opts=child,
                )
            k8s.apiextensions.CustomResource(
                f"{name}-rules",
                api_version=GMP_API,
                kind="Rules",
                metadata=meta(f"{pool}-alerts"),
                spec={"groups": groups},
                opts=child,
            )
        else:
            for role in ("prefill", "decode"):
                k8s.apiextensions.CustomResource(
                    f"{name}-podmonitor-{role}",
                    api_version=PROMETHEUS_OPERATOR_API,
                    kind="PodMonitor",
                    metadata=meta(f"{pool}-{role}"),
                    spec=pod_monitor_spec(config, obs, role),
                    opts=after_crds,
                )
            k8s.apiextensions.CustomResource(
                f"{name}-podmonitor-tokenizer",
                api_version=PROMETHEUS_OPERATOR_API,
                kind="PodMonitor",
                metadata=meta(f"{pool}-tokenizer"),
                spec=tokenizer_monitor_spec(config),
                opts=after_crds,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-servicemonitor-epp",
                api_version=PROMETHEUS_OPERATOR_API,
                kind="ServiceMonitor",
                metadata=meta(f"{pool}-epp"),
                spec=service_monitor_spec(config),
                opts=after_crds,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-prometheusrule",
                api_version=PROMETHEUS_OPERATOR_API,
                kind="PrometheusRule",
                metadata=meta(f"{pool}-alerts"),
                spec={"groups": groups},
                opts=after_crds,
            )
        self.register_outputs({})


def declare(ctx: Assembly) -> Observability:
    """The layer's builder (its registry record's `Declaration`): the scrape objects, alert rules
    and dashboards of the model's workloads, after its serving and router."""
    name = "observability" if ctx.model is None else f"observability-{ctx.model}"
    return Observability(name, {"config": ctx.config, "plan": ctx.plan}, opts=ctx.options())
