"""Per-role autoscaling with KEDA (pure builders first, the `Autoscaling` component last;
docs/autoscaling.md).

A role with `serving.autoscaling.<role>.enabled` is rendered with `scaling.mode: External` in the
DisaggregatedSet (llmd_fleet/layers/serving/pod.py), and the LWS controller then creates a
DisaggregatedSetRoleScaler `<set>-<role>` for it, the object that carries the role's scale
subresource. A KEDA ScaledObject per role points at that scaler:

- prefill scales on its backlog: the uncached prompt tokens the endpoint picker has in flight on
  prefill endpoints (`llm_d_epp_inflight_tokens`, from the `inflight-load-producer` plugin the
  EPP config adds for it), divided by `prefillTokensPerSecond`: seconds of prefill work, which
  KEDA averages over the instances (metricType AverageValue). Only the leader's series is read:
  the standby of an active-passive pair does not route, and at the pinned router tag its
  in-flight series can be stale (llm-d-router #2529, fixed by #2577 after that tag), so the query
  keeps the series of the pod whose `leader_election_master_status` is 1. Only live endpoints
  count: the tokens are intersected with `llm_d_epp_per_endpoint_queue_size`, since a removed
  endpoint's in-flight series is never pruned at that tag (prefill_backlog_query).
- decode scales on KV-cache usage: the average of `vllm:kv_cache_usage_perc` over decode's ranks
  against the target fraction (metricType Value: the HPA scales by current/target, as it does for
  CPU utilization).

Scale-down waits a cooldown longer than a model load (the HPA's stabilization window) and then
removes one instance per drain plus teardown, so an instance being drained finishes before the
next one goes. Scale-up adds as many instances as the burst needs at once.

Facts (read from source):
- LWS (kubernetes-sigs/lws, api/disaggregatedset/v1/disaggregatedsetrolescaler_types.go, PR #922,
  in every release since July 2026): `DisaggregatedSetRoleScaler` (disaggregatedset.x-k8s.io/v1) has the scale
  subresource (.spec.replicas, .status.replicas, .status.selector), one per role with
  `scaling.mode: External`, named `<set>-<role>`; an External role's `spec.replicas` is ignored,
  and the webhook refuses `spec.slices` > 1 with an External role
  (pkg/webhooks/disaggregatedset/disaggregatedset_webhook.go).
- KEDA at the pinned chart's appVersion (kedacore/keda apis/keda/v1alpha1,
  pkg/scalers/prometheus_scaler.go): ScaledObject keda.sh/v1alpha1 with pollingInterval
  (default 30), cooldownPeriod (default 300; it only times the last step to zero, so with
  minReplicaCount >= 1 it has no effect: KEDA's ScaledObject specification, cooldownPeriod),
  minReplicaCount,
  maxReplicaCount (default 100), advanced.horizontalPodAutoscalerConfig.behavior; the prometheus
  trigger's metadata serverAddress, query, threshold (ignoreNullValues defaults to true: an
  empty result is 0).
- The pinned keda chart (kedacore/charts keda/values.yaml): `rbac.scaledRefKinds` grants the
  operator `<kind>/scale` of the listed resources (default every group and resource); the pods are
  labelled `app: keda-operator`, `app: keda-operator-metrics-apiserver`,
  `app: keda-admission-webhooks`; the metrics adapter serves on 6443, the operator's gRPC on 9666,
  the webhooks on 9443.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.autoscaling.flows import keda_namespace_flows
from llmd_fleet.layers.autoscaling.rules import (
    HPA_MAX_POLICY_PERIOD_SECONDS,
    autoscaling_cooldown_seconds,
)
from llmd_fleet.layers.router.specs import INFLIGHT_PRODUCER
from llmd_fleet.layers.serving.config import TEARDOWN_SECONDS
from llmd_fleet.plan.fleet import FleetPlan, RoleName, RolePlan
from llmd_fleet.plan.observability import plan_observability, prometheus_address
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

KEDA_CHART = "keda"
KEDA_RELEASE = "keda"
KEDA_API = "keda.sh/v1alpha1"
ROLE_SCALER_API = "disaggregatedset.x-k8s.io/v1"
ROLE_SCALER_KIND = "DisaggregatedSetRoleScaler"
ROLE_SCALER_RESOURCE = "disaggregatedsetrolescalers"
INFLIGHT_TOKENS = "llm_d_epp_inflight_tokens"
ENDPOINT_QUEUE = "llm_d_epp_per_endpoint_queue_size"
LEADER_STATUS = "leader_election_master_status"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
SCALE_UP_PERIOD_SECONDS = 60
"""Scale-up: within a minute the HPA may add every instance the burst needs."""


def role_scaler_name(config: StackConfig, role: RoleName) -> str:
    """The DisaggregatedSetRoleScaler the LWS controller creates for an External role."""
    return f"{config.serving.name}-{role}"


def prefill_endpoint_pattern(config: StackConfig) -> str:
    """Regex of prefill's endpoint names: the pods of the role's LeaderWorkerSets, named
    `<set>-<slice>-<revision>-<role>-<group>[-<worker>]` (lws pkg/utils/disaggregatedset/utils.go
    GenerateName), with the EPP's per-rank suffix if any."""
    return f"{config.serving.name}-[0-9]+-[a-z0-9]+-prefill-.+"


def prefill_backlog_query(config: StackConfig, plan: FleetPlan) -> str:
    """Seconds of prefill work in flight: the leader EPP's in-flight prompt tokens on live prefill
    endpoints over one instance's prefill rate.

    Live: at the pinned router the in-flight series of a removed endpoint are never pruned (the
    gauge keeps its last value; llm-d-router #2529, fixed by #2577 after that tag), so a plain
    sum() never falls after a scale-down or a rollout (the DisaggregatedSet's revision covers
    every role, so a rollout renames every pod). The tokens are intersected with
    `llm_d_epp_per_endpoint_queue_size`, which the EPP rebuilds from its live endpoints at every
    scrape (pkg/epp/metrics/collectors/inference_pool.go), joined on the same EPP pod and on the
    endpoint, whose name the two label `endpoint_name` and `model_server_endpoint`: llm-d's
    guides/workload-autoscaling/keda-epp-token-aware README, "Endpoint-removal note for older EPP
    images". `producer_name` keeps only this config's in-flight producer."""
    scaling = config.serving.autoscaling
    assert scaling is not None and scaling.prefill.prefill_tokens_per_second is not None
    ns = config.serving.namespace
    tokens = (
        f'{INFLIGHT_TOKENS}{{namespace="{ns}", producer_name="{INFLIGHT_PRODUCER}", '
        f'endpoint_name=~"{prefill_endpoint_pattern(config)}"}}'
    )
    live = f'{ENDPOINT_QUEUE}{{namespace="{ns}", name="{config.serving.name}"}}'
    tokens = (
        f'(label_replace({tokens}, "target_pod", "$1", "endpoint_name", "(.+)") '
        f"and on (pod, target_pod) "
        f'label_replace({live}, "target_pod", "$1", "model_server_endpoint", "(.+)"))'
    )
    lease = plan_observability(config, plan).leader_lease
    if lease is not None:
        leader = f'(max by (pod) ({LEADER_STATUS}{{namespace="{ns}", name="{lease}"}}) == 1)'
        tokens = f"{tokens} * on (pod) group_left () {leader}"
    return f"(sum({tokens}) or vector(0)) / {scaling.prefill.prefill_tokens_per_second}"


def decode_kv_query(config: StackConfig) -> str:
    """Average KV-cache usage (0..1) over decode's ranks."""
    return f'avg({KV_CACHE_USAGE}{{namespace="{config.serving.namespace}", role="decode"}})'


def _threshold(value: float) -> str:
    return f"{value:g}"


def hpa_behavior(config: StackConfig, role: RolePlan) -> dict[str, Any]:
    """Scale down after the cooldown, one instance per drain plus teardown; scale up at once."""
    scaling = config.serving.autoscaling
    assert scaling is not None
    auto = scaling.role(role.name)
    drain_period = min(config.serving.drain_seconds + TEARDOWN_SECONDS, HPA_MAX_POLICY_PERIOD_SECONDS)
    return {
        "scaleDown": {
            "stabilizationWindowSeconds": autoscaling_cooldown_seconds(config.serving, auto),
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": drain_period}],
        },
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [
                {
                    "type": "Pods",
                    "value": max(1, role.max_instances - role.min_instances),
                    "periodSeconds": SCALE_UP_PERIOD_SECONDS,
                }
            ],
        },
    }


def scaled_object_spec(config: StackConfig, plan: FleetPlan, role: RolePlan) -> dict[str, Any]:
    """spec of the ScaledObject of an autoscaled role."""
    scaling = config.serving.autoscaling
    assert scaling is not None and role.autoscaled
    auto = scaling.role(role.name)
    if role.name == "prefill":
        trigger = {
            "type": "prometheus",
            "name": "prefill-backlog-seconds",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": prometheus_address(config),
                "query": prefill_backlog_query(config, plan),
                "threshold": _threshold(scaling.prefill.target_backlog_seconds),
            },
        }
    else:
        trigger = {
            "type": "prometheus",
            "name": "decode-kv-cache-usage",
            "metricType": "Value",
            "metadata": {
                "serverAddress": prometheus_address(config),
                "query": decode_kv_query(config),
                "threshold": _threshold(scaling.decode.target_kv_cache_utilization),
            },
        }
    return {
        "scaleTargetRef": {
            "apiVersion": ROLE_SCALER_API,
            "kind": ROLE_SCALER_KIND,
            "name": role_scaler_name(config, role.name),
        },
        "pollingInterval": auto.polling_interval_seconds,
        # No cooldownPeriod: KEDA applies it only when scaling to zero, and minReplicaCount is at
        # least 1. The HPA's scale-down stabilization window (hpa_behavior) is the cooldown.
        "minReplicaCount": role.min_instances,
        "maxReplicaCount": role.max_instances,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(config, role)}},
        "triggers": [trigger],
    }


def keda_values() -> dict[str, Any]:
    """Values of the installed keda chart: the operator may scale DisaggregatedSetRoleScalers and
    nothing else beyond Deployments and StatefulSets (the chart's default grants `*/scale` of
    every API group)."""
    return {
        "rbac": {"scaledRefKinds": [{"apiGroup": "disaggregatedset.x-k8s.io", "kind": ROLE_SCALER_RESOURCE}]}
    }


def autoscaled_roles(plan: FleetPlan) -> list[RolePlan]:
    """The roles `serving.autoscaling` scales, each of which gets a ScaledObject."""
    return [r for r in plan.roles if r.autoscaled]


class AutoscalingArgs(TypedDict):
    """Arguments of `Autoscaling`. Every key is required."""

    config: StackConfig
    """The validated stack config; `serving.autoscaling` must be set, and picks the roles, KEDA's
    install and the Prometheus address."""
    plan: FleetPlan
    """The fleet plan; each autoscaled role's min/max instances."""


class Autoscaling(pulumi.ComponentResource):
    """KEDA (unless preinstalled) with its namespace's NetworkPolicies, and one ScaledObject per
    autoscaled role."""

    scaled_objects: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:serving:Autoscaling", name, {}, opts)
        config, plan = args["config"], args["plan"]
        scaling = config.serving.autoscaling
        assert scaling is not None
        pool = config.serving.name
        crds: list[pulumi.Resource] = []
        # A preinstalled platform brings its own KEDA, whatever `keda` says.
        if scaling.keda == "install" and config.target.installs_platform:
            namespace = k8s.core.v1.Namespace(
                f"{name}-keda-namespace",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=scaling.keda_namespace,
                    labels={**common_labels("autoscaler", pool), **pod_security_labels("restricted")},
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            crds.append(
                pinned_release(
                    f"{name}-keda",
                    KEDA_RELEASE,
                    versions().chart(KEDA_CHART),
                    scaling.keda_namespace,
                    keda_values(),
                    pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
                )
            )
            for suffix, spec in keda_namespace_flows(config).items():
                k8s.networking.v1.NetworkPolicy(
                    f"{name}-keda-{suffix}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=f"keda-{suffix}",
                        namespace=scaling.keda_namespace,
                        labels=common_labels("network-policy", pool),
                    ),
                    spec=spec,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
                )
        self.scaled_objects = {
            role.name: k8s.apiextensions.CustomResource(
                f"{name}-{role.name}",
                api_version=KEDA_API,
                kind="ScaledObject",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=role_scaler_name(config, role.name),
                    namespace=config.serving.namespace,
                    labels=common_labels("autoscaler", pool),
                ),
                spec=scaled_object_spec(config, plan, role),
                opts=pulumi.ResourceOptions(parent=self, depends_on=crds),
            )
            for role in autoscaled_roles(plan)
        }
        self.register_outputs({})


def declare(ctx: Assembly) -> Autoscaling | None:
    """The layer's builder (its registry record's `Declaration`): with at least one role
    autoscaled, KEDA and the scalers, once the DisaggregatedSet exists; KEDA reads the router's
    and the engines' series from the Prometheus the observability layer feeds."""
    if not any(role.autoscaled for role in ctx.plan.roles):
        return None
    return Autoscaling("autoscaling", {"config": ctx.config, "plan": ctx.plan}, opts=ctx.options())
