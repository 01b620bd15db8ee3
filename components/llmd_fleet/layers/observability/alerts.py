"""The fleet's alerts (pure builders): each with a severity, a runbook line, the metrics it reads
and where its threshold comes from, plus the promtool unit tests that prove it fires on a
synthetic series and stays silent on a healthy one.

The rule groups render into a PrometheusRule (prometheus-operator) or a Rules object (Managed
Service for Prometheus): both take the same `groups` (llmd_fleet/layers/observability/component.py).
Every series
carries the labels the monitors attach: `namespace`, `role` (prefill/decode, from the pod's
`llm-d.ai/role`) and `component` (from `app.kubernetes.io/component`).

Thresholds from the plan (llmd_fleet/plan/observability.py): scrape targets per role, the
KV-transfer time bound, the flow-control byte bounds, the leader Lease. The others are constants
below, each with its reason.
"""

from dataclasses import dataclass, field
from typing import Any

from llmd_fleet.plan.fleet import GIB
from llmd_fleet.plan.observability import KV_TRANSFER_SLACK, QUEUE_BYTES_WARN_FRACTION, ObservabilityPlan

RULE_GROUP = "llmd-fleet"
# Rate windows: four scrapes at the longest interval the config allows would be 20 min; the
# defaults (15 s scrapes) leave every window at least 20 samples.
SHORT_WINDOW = "5m"
LONG_WINDOW = "15m"
# Below this share of queried prompt tokens found in a cache, prefix-aware routing has lost its
# affinity: agentic turns repeat >= 90% of the previous input (the published run hit 73% locally).
PREFIX_HIT_FLOOR = 0.3
# Below this share of MTP draft tokens accepted, speculative decoding costs more than it saves
# (mean acceptance length 1 + rate x mtpTokens).
MTP_ACCEPTANCE_FLOOR = 0.25
# The endpoint picker's errored requests as a share of all requests.
EPP_ERROR_RATIO = 0.05
# Decode's HBM KV cache this full for long preempts or queues every new turn.
KV_USAGE_SATURATED = 0.95


@dataclass(frozen=True)
class Series:
    """One input series of a promtool unit test (promtool's expanding notation)."""

    series: str
    values: str


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str
    expr: str
    for_: str
    summary: str
    runbook: str
    """One line: what to look at first."""
    metrics: tuple[str, ...]
    """Every metric the expression reads."""
    threshold: str
    """The threshold, in words."""
    source: str
    """Where the threshold comes from (the plan, or a constant and its reason)."""
    firing: tuple[Series, ...]
    """Input series on which the alert fires at `eval_time`."""
    healthy: tuple[Series, ...]
    """Input series of a healthy fleet: the alert stays silent."""
    eval_time: str
    labels: dict[str, str] = field(default_factory=dict)
    """Labels of the rule besides severity (also expected on the firing alert)."""
    result_labels: dict[str, str] = field(default_factory=dict)
    """Labels the expression's result carries on the firing series."""

    def annotations(self) -> dict[str, str]:
        # Static text only, so the unit tests can expect the annotations exactly.
        return {
            "summary": self.summary,
            "runbook": self.runbook,
            "metric": ", ".join(self.metrics),
            "threshold": f"{self.threshold} ({self.source})",
        }

    def rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.for_ != "0m":
            rule["for"] = self.for_
        rule["labels"] = {"severity": self.severity, **self.labels}
        rule["annotations"] = self.annotations()
        return rule


def _sel(namespace: str, **labels: str) -> str:
    """A label matcher set: the serving namespace plus the given labels (a leading `~` in a value
    makes a regex match)."""
    parts = [f'namespace="{namespace}"']
    for key, value in labels.items():
        parts.append(f'{key}=~"{value[1:]}"' if value.startswith("~") else f'{key}="{value}"')
    return "{" + ", ".join(parts) + "}"


def _ser(metric: str, labels: dict[str, str], values: str) -> Series:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return Series(f"{metric}{{{inner}}}", values)


def _fmt(value: float) -> str:
    return f"{value:g}"


def fleet_alerts(obs: ObservabilityPlan) -> tuple[Alert, ...]:
    """Every alert of the stack, in a fixed order."""
    ns = obs.namespace
    pool = obs.pool
    scope = dict(obs.scope)

    def sel(**labels: str) -> str:
        # The namespace, the model's own series with several models, then the given labels.
        return _sel(ns, **scope, **labels)

    decode = {"namespace": ns, **scope, "role": "decode", "pod": f"{pool}-decode-0", "engine": "3"}
    prefill = {"namespace": ns, **scope, "role": "prefill", "pod": f"{pool}-prefill-0", "engine": "1"}
    epp = {"namespace": ns, **scope, "component": "endpoint-picker", "pod": f"{pool}-epp-0"}
    alerts: list[Alert] = [
        Alert(
            name="VllmPreemptions",
            severity="critical",
            expr=f"sum by (role) (increase(vllm:num_preemptions_total{sel()}[{SHORT_WINDOW}])) > 0",
            for_="0m",
            summary="vLLM preempted running requests: the fleet's SLO is zero preemptions.",
            runbook="Check decode KV usage per rank and the CPU tier; a preempted 195k-token turn is "
            "recomputed. Lower maxNumSeqs or add decode instances.",
            metrics=("vllm:num_preemptions_total",),
            threshold="any preemption in 5 min",
            source="the fleet's SLO: zero preemptions at 3,000 agents",
            firing=(_ser("vllm:num_preemptions_total", decode, "0+0x10 1+1x10"),),
            healthy=(_ser("vllm:num_preemptions_total", decode, "7+0x20"),),
            eval_time="15m",
            result_labels={"role": "decode"},
        ),
        Alert(
            name="NixlTransferFailures",
            severity="critical",
            expr=f"sum by (role) (increase(vllm:nixl_num_failed_transfers_total{sel()}[{SHORT_WINDOW}])) > 0",
            for_="0m",
            summary="NIXL KV transfers failed: with kv_load_failure_policy fail, each one fails a request.",
            runbook="Look at the fabric (UCX/libfabric logs of the failing ranks, NIC errors) and at "
            "vllm:nixl_num_kv_expired_reqs_total on prefill.",
            metrics=("vllm:nixl_num_failed_transfers_total",),
            threshold="any failed transfer in 5 min",
            source="the published run had zero failures in 6.2M transfers",
            firing=(_ser("vllm:nixl_num_failed_transfers_total", decode, "0+0x10 2+2x10"),),
            healthy=(_ser("vllm:nixl_num_failed_transfers_total", decode, "3+0x20"),),
            eval_time="15m",
            result_labels={"role": "decode"},
        ),
    ]
    bound = obs.kv_transfer
    # Healthy: every transfer lands in the first bucket; firing: every one above the bound.
    buckets_fast = [("0.005", "0+10x30")] + [(le, "0+10x30") for le in ("1", "5", "+Inf")]
    buckets_slow = [("0.005", "0+0x30"), ("1", "0+0x30"), ("5", "0+10x30"), ("+Inf", "0+10x30")]
    alerts.append(
        Alert(
            name="NixlTransferSlow",
            severity="warning",
            expr="histogram_quantile(0.9, sum by (le) "
            f"(rate(vllm:nixl_xfer_time_seconds_bucket{sel()}[{LONG_WINDOW}]))) "
            f"> {_fmt(bound.bound_seconds)}",
            for_="15m",
            summary="KV transfer time p90 is above what the GPU fabric's line rate allows.",
            runbook="Compare NIXL throughput per rank with the NIC line rate; look for a degraded NIC "
            "or link, UCX falling back to TCP, or congestion on the fabric.",
            metrics=("vllm:nixl_xfer_time_seconds_bucket",),
            threshold=f"p90 > {_fmt(bound.bound_seconds)} s for 15 min",
            source=f"the plan: {KV_TRANSFER_SLACK:g}x the time {bound.max_tokens:,} tokens of KV "
            f"({bound.max_bytes / GIB:.1f} GiB) take at {_fmt(bound.gbps_per_gpu)} Gb/s per GPU "
            "(nicsPerNode x nicGbps / gpusPerNode)",
            firing=tuple(
                _ser("vllm:nixl_xfer_time_seconds_bucket", {**decode, "le": le}, v) for le, v in buckets_slow
            ),
            healthy=tuple(
                _ser("vllm:nixl_xfer_time_seconds_bucket", {**decode, "le": le}, v) for le, v in buckets_fast
            ),
            eval_time="30m",
        )
    )
    if obs.cpu_tier:
        alerts.append(
            Alert(
                name="CpuTierAllocationFailures",
                severity="warning",
                expr="sum by (role) "
                f"(increase(vllm:kv_offload_allocation_failure_total{sel()}[{SHORT_WINDOW}])) > 0",
                for_="10m",
                summary="The CPU KV tier keeps failing to allocate blocks for offloaded KV.",
                runbook="Check vllm:kv_offload_cpu_cache_usage_perc per rank; the tier is full of blocks "
                "in use. Raise hostMemoryFraction or lower the per-rank reserves.",
                metrics=("vllm:kv_offload_allocation_failure_total",),
                threshold="allocation failures in every 5 min window for 10 min",
                source="any sustained failure: evicted prefixes are recomputed instead of restored",
                firing=(_ser("vllm:kv_offload_allocation_failure_total", decode, "0+5x30"),),
                healthy=(_ser("vllm:kv_offload_allocation_failure_total", decode, "4+0x30"),),
                eval_time="25m",
                result_labels={"role": "decode"},
            )
        )
    hits, queries = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
    alerts.append(
        Alert(
            name="PrefixCacheHitRateCollapse",
            severity="warning",
            expr=f"sum(rate({hits}{sel()}[{LONG_WINDOW}])) / sum(rate({queries}{sel()}[{LONG_WINDOW}]))"
            f" < {_fmt(PREFIX_HIT_FLOOR)}",
            for_="30m",
            summary="The fleet's prefix-cache hit rate collapsed: prefix-aware routing lost its affinity.",
            runbook="Check the router's KV index (lookups and hits, KV-event subscribers) and session "
            "affinity; a tokenizer or block-size mismatch makes every lookup miss.",
            metrics=(hits, queries),
            threshold=f"hits / queries < {_fmt(PREFIX_HIT_FLOOR)} for 30 min",
            source="constant: agentic turns repeat >= 90% of the previous input; the published run hit 73%",
            firing=(_ser(queries, decode, "0+1000x60"), _ser(hits, decode, "0+100x60")),
            healthy=(_ser(queries, decode, "0+1000x60"), _ser(hits, decode, "0+730x60")),
            eval_time="50m",
        )
    )
    if obs.mtp_tokens:
        accepted, drafted = (
            "vllm:spec_decode_num_accepted_tokens_total",
            "vllm:spec_decode_num_draft_tokens_total",
        )
        alerts.append(
            Alert(
                name="MtpAcceptanceCollapse",
                severity="warning",
                expr=f"sum(rate({accepted}{sel()}[{LONG_WINDOW}])) / "
                f"sum(rate({drafted}{sel()}[{LONG_WINDOW}]))"
                f" < {_fmt(MTP_ACCEPTANCE_FLOOR)}",
                for_="30m",
                summary="MTP draft tokens are mostly rejected: speculative decoding costs more than it "
                "saves.",
                runbook="Check the served model revision (MTP head) and the acceptance per draft position "
                "(vllm:spec_decode_num_accepted_tokens_per_pos_total).",
                metrics=(accepted, drafted),
                threshold=f"accepted / drafted < {_fmt(MTP_ACCEPTANCE_FLOOR)} for 30 min "
                f"(mean acceptance length < {_fmt(1 + MTP_ACCEPTANCE_FLOOR * obs.mtp_tokens)})",
                source=f"constant, with the plan's mtpTokens {obs.mtp_tokens}",
                firing=(_ser(drafted, decode, "0+300x60"), _ser(accepted, decode, "0+30x60")),
                healthy=(_ser(drafted, decode, "0+300x60"), _ser(accepted, decode, "0+210x60")),
                eval_time="50m",
            )
        )
    ready = "llm_d_epp_ready_endpoints"
    alerts += [
        Alert(
            name="EppNoReadyEndpoints",
            severity="critical",
            expr=f"(max({ready}{sel(name=pool)}) or vector(0)) < 1",
            for_="2m",
            summary="The endpoint picker reports no ready endpoint: every request fails or fails open.",
            runbook="Check the serving pods' readiness and the EPP's logs (metrics scrape of the ranks, "
            "pool selector); the gateway fails open to a random endpoint meanwhile.",
            metrics=(ready,),
            threshold=f"no ready endpoint for 2 min (the plan expects {obs.endpoints} rank endpoints)",
            source="the plan's rank endpoints",
            firing=(_ser(ready, {**epp, "name": pool}, f"{obs.endpoints}+0x5 0+0x10"),),
            healthy=(_ser(ready, {**epp, "name": pool}, f"{obs.endpoints}+0x15"),),
            eval_time="12m",
        ),
        Alert(
            name="EppErrorRatioHigh",
            severity="warning",
            expr=f"sum(rate(llm_d_epp_request_error_total{sel()}[{SHORT_WINDOW}])) / "
            f"sum(rate(llm_d_epp_request_total{sel()}[{SHORT_WINDOW}])) > {_fmt(EPP_ERROR_RATIO)}",
            for_="10m",
            summary="More than 5% of the requests the endpoint picker handles end in an error.",
            runbook="Break llm_d_epp_request_error_total down by error_code; check the engines' health "
            "and the flow-control outcomes.",
            metrics=("llm_d_epp_request_error_total", "llm_d_epp_request_total"),
            threshold=f"errors / requests > {_fmt(EPP_ERROR_RATIO)} for 10 min",
            source="constant: one request in twenty failing is more than clients' retries absorb",
            firing=(
                _ser("llm_d_epp_request_total", epp, "0+100x30"),
                _ser("llm_d_epp_request_error_total", {**epp, "error_code": "Internal"}, "0+20x30"),
            ),
            healthy=(
                _ser("llm_d_epp_request_total", epp, "0+100x30"),
                _ser("llm_d_epp_request_error_total", {**epp, "error_code": "Internal"}, "0+1x30"),
            ),
            eval_time="25m",
        ),
    ]
    if obs.band_max_bytes:
        outcome = "llm_d_epp_flow_control_requests_total"
        alerts.append(
            Alert(
                name="EppFlowControlRejections",
                severity="warning",
                expr=f"sum by (outcome) (rate({outcome}{sel(outcome='~Rejected.*')}[{SHORT_WINDOW}])) > 0",
                for_="5m",
                summary="The endpoint picker's flow control is rejecting requests.",
                runbook="RejectedCapacity: a band's maxRequests or maxBytes is reached (queue panel); "
                "RejectedNoEndpoints: the pool has no endpoint (ready endpoints panel).",
                metrics=(outcome,),
                threshold="any rejection, sustained for 5 min",
                source="constant: the fleet is sized to queue, not to reject",
                firing=(
                    _ser(outcome, {**epp, "outcome": "RejectedCapacity", "priority": "100"}, "0+3x30"),
                    _ser(outcome, {**epp, "outcome": "Dispatched", "priority": "100"}, "0+100x30"),
                ),
                healthy=(
                    _ser(outcome, {**epp, "outcome": "RejectedCapacity", "priority": "100"}, "2+0x30"),
                    _ser(outcome, {**epp, "outcome": "Dispatched", "priority": "100"}, "0+100x30"),
                ),
                eval_time="20m",
                result_labels={"outcome": "RejectedCapacity"},
            )
        )
        queue = "llm_d_epp_flow_control_queue_bytes"
        terms = [
            f"sum by (priority) ({queue}{sel(priority=str(priority))}) "
            f"> {int(limit * QUEUE_BYTES_WARN_FRACTION)}"
            for priority, limit in obs.band_max_bytes
        ]
        first_priority, first_limit = obs.band_max_bytes[0]
        alerts.append(
            Alert(
                name="EppFlowControlQueueBytesNearLimit",
                severity="warning",
                expr=" or ".join(terms),
                for_="5m",
                summary="A flow-control band's queued request bytes are close to its maxBytes bound.",
                runbook="The band will start rejecting: check dispatch (pool saturation, ready endpoints) "
                "and the band's arrival rate.",
                metrics=(queue,),
                threshold=f"> {QUEUE_BYTES_WARN_FRACTION:.0%} of the band's maxBytes for 5 min",
                source="the plan: each band's maxRequests x the typical request body "
                "(router.expectedPromptTokens x 4 bytes)",
                firing=(
                    _ser(
                        queue,
                        {**epp, "priority": str(first_priority), "fairness_id": "a"},
                        f"{int(first_limit * 0.95)}+0x20",
                    ),
                ),
                healthy=(
                    _ser(
                        queue,
                        {**epp, "priority": str(first_priority), "fairness_id": "a"},
                        f"{int(first_limit * 0.5)}+0x20",
                    ),
                ),
                eval_time="15m",
                result_labels={"priority": str(first_priority)},
            )
        )
    if obs.leader_lease:
        leader = "leader_election_master_status"
        alerts.append(
            Alert(
                name="EppLeaderMissing",
                severity="critical",
                expr=f"(max({leader}{sel(name=obs.leader_lease)}) or vector(0)) < 1",
                for_="2m",
                summary="No endpoint picker replica holds the leader Lease: nothing routes by prefix.",
                runbook=f"Check the EPP pods and the Lease {obs.leader_lease} (RBAC, API server reach); "
                "the gateway fails open meanwhile.",
                metrics=(leader,),
                threshold="no replica reports leadership for 2 min",
                source="the plan: active-passive with more than one replica",
                firing=(_ser(leader, {**epp, "name": obs.leader_lease}, "1+0x5 0+0x10"),),
                healthy=(
                    _ser(leader, {**epp, "name": obs.leader_lease}, "1+0x15"),
                    _ser(leader, {**epp, "pod": f"{pool}-epp-1", "name": obs.leader_lease}, "0+0x15"),
                ),
                eval_time="12m",
            )
        )
    usage = "vllm:kv_cache_usage_perc"
    alerts.append(
        Alert(
            name="DecodeKvCacheSaturated",
            severity="warning",
            expr=f"max({usage}{sel(role='decode')}) > {_fmt(KV_USAGE_SATURATED)}",
            for_="10m",
            summary="A decode rank's HBM KV cache is nearly full: the next turns queue or preempt.",
            runbook="Check the per-rank KV usage panel for skew (session affinity piling agents on one "
            "rank) and the CPU tier; add decode instances if every rank is full.",
            metrics=(usage,),
            threshold=f"> {_fmt(KV_USAGE_SATURATED)} for 10 min",
            source="constant: above it a rank has no blocks left for the next turn and preempts",
            firing=(_ser(usage, decode, "0.99+0x20"),),
            healthy=(_ser(usage, decode, "0.8+0x20"), _ser(usage, prefill | {"role": "prefill"}, "1+0x20")),
            eval_time="15m",
        )
    )
    for role in obs.roles:
        # The healthy and firing series (every rank up; one short) are generated from the plan's
        # target count by `promtool_tests`.
        alerts.append(
            Alert(
                name=f"{role.name.capitalize()}RanksNotReady",
                severity="warning",
                expr=f"(count(up{sel(role=role.name)} == 1) or vector(0)) < {role.ranks}",
                for_=f"{role.short_for_minutes}m",
                summary=f"Fewer {role.name} ranks answer their metrics scrape than the plan deploys.",
                runbook=f"List the {role.name} pods that are not Ready (the DisaggregatedSet's groups); a "
                "crashed rank restarts its whole group.",
                metrics=("up",),
                threshold=f"fewer than {role.ranks} rank targets up for {role.short_for_minutes} min",
                source=f"the plan: {role.pods} pods x {role.ranks // role.pods} ranks; the time allows one "
                "rollout step (modelLoadMinutes + drainSeconds) plus 15 min",
                firing=(),
                healthy=(),
                eval_time=f"{role.short_for_minutes + 5}m",
                labels={"role": role.name},
            )
        )
    return tuple(alerts)


def rule_groups(obs: ObservabilityPlan) -> list[dict[str, Any]]:
    """The `groups` of a PrometheusRule or GMP Rules spec; with several models one group per
    model, named after it (group names are unique within a rule file)."""
    name = RULE_GROUP if not obs.scope else f"{RULE_GROUP}-{obs.pool}"
    return [{"name": name, "rules": [a.rule() for a in fleet_alerts(obs)]}]


def promtool_tests(obs: ObservabilityPlan, rule_file: str) -> dict[str, Any]:
    """A promtool unit-test file: per alert one test where it fires and one where it is silent.

    The <Role>RanksNotReady tests are generated from the plan's target count: every rank up is
    healthy, one rank short fires."""
    tests: list[dict[str, Any]] = []
    alerts = fleet_alerts(obs)
    for alert in alerts:
        expected = {"severity": alert.severity, **alert.labels, **alert.result_labels}
        firing_series = list(alert.firing)
        healthy_series = list(alert.healthy)
        if alert.name.endswith("RanksNotReady"):
            role = next(r for r in obs.roles if r.name == alert.labels["role"])
            ns = obs.namespace
            scope = "".join(f'{k}="{v}", ' for k, v in obs.scope)
            healthy_series = [
                Series(
                    f'up{{namespace="{ns}", {scope}role="{role.name}", pod="p{i // 8}", engine="{i}"}}',
                    "1+0x200",
                )
                for i in range(role.ranks)
            ]
            # One rank short of the plan.
            firing_series = healthy_series[1:]
        interval = "1m"
        tests.append(
            {
                "name": f"{alert.name} fires",
                "interval": interval,
                "input_series": [{"series": s.series, "values": s.values} for s in firing_series],
                "alert_rule_test": [
                    {
                        "eval_time": alert.eval_time,
                        "alertname": alert.name,
                        "exp_alerts": [{"exp_labels": expected, "exp_annotations": alert.annotations()}],
                    }
                ],
            }
        )
        tests.append(
            {
                "name": f"{alert.name} stays silent on a healthy fleet",
                "interval": interval,
                "input_series": [{"series": s.series, "values": s.values} for s in healthy_series],
                "alert_rule_test": [
                    {"eval_time": alert.eval_time, "alertname": alert.name, "exp_alerts": []}
                ],
            }
        )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}
