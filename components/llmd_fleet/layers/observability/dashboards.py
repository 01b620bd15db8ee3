"""The fleet's Grafana dashboards, built in code with the Grafana Foundation SDK and rendered as
ConfigMaps for Grafana's dashboard sidecar (pure builders; docs/observability.md lists the
panels).

Four dashboards: a fleet overview with the figures the published run was measured by, one per
role with a per-rank breakdown (the `engine` label is the rank's global DP rank, `pod` its pod),
and one for the router. Every query reads the labels the monitors attach (`namespace`, `role`,
`component`) and names only metrics of the committed catalogue (infra/metrics_catalogue); the
tests check both. Panel ids and grid positions are fixed by the order below, so rendering twice
gives the same JSON.
"""

import json
from dataclasses import dataclass
from typing import Any, Literal

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus as gprom
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, Threshold, ThresholdsMode

from llmd_fleet.plan.observability import ObservabilityPlan

DASHBOARD_LABEL = {"grafana_dashboard": "1"}
"""What Grafana's dashboard sidecar selects (kube-prometheus-stack's default `sidecar.dashboards`
label and value)."""
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "5m"

PanelKind = Literal["timeseries", "stat"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    queries: tuple[Query, ...]
    unit: str
    description: str
    kind: PanelKind = "timeseries"
    threshold: float | None = None
    """A red threshold line (a plan figure or an alert bound)."""
    width: int = 12


@dataclass(frozen=True)
class Section:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Dashboard:
    key: str
    """Short name: fleet, prefill, decode, router."""
    title: str
    sections: tuple[Section, ...]

    def panels(self) -> list[Panel]:
        return [p for s in self.sections for p in s.panels]


def _q(expr: str, legend: str = "") -> tuple[Query, ...]:
    return (Query(expr, legend),)


class _Sel:
    """Label matchers of the stack's series."""

    def __init__(self, obs: ObservabilityPlan):
        self.ns = obs.namespace
        self.pool = obs.pool
        self.scope = obs.scope

    def __call__(self, **labels: str) -> str:
        # With several models in the namespace, also the model's own label (plan/observability.py).
        parts = [f'namespace="{self.ns}"', *(f'{k}="{v}"' for k, v in self.scope)] + [
            f'{k}=~"{v[1:]}"' if v.startswith("~") else f'{k}="{v}"' for k, v in labels.items()
        ]
        return "{" + ", ".join(parts) + "}"


def _ratio(num: str, den: str) -> str:
    return f"sum(rate({num}[{RATE}])) / sum(rate({den}[{RATE}]))"


def fleet_dashboard(obs: ObservabilityPlan) -> Dashboard:
    s = _Sel(obs)
    any_ns = s()
    pre = s(role="prefill")
    sections = [
        Section(
            "Throughput",
            (
                Panel(
                    "Output tokens / min",
                    _q(f"sum(rate(vllm:generation_tokens_total{s(role='decode')}[{RATE}])) * 60"),
                    "short",
                    "Tokens generated per minute by the decode ranks (published: 6.6M/min at 3,000 agents).",
                ),
                Panel(
                    "Requests / min",
                    _q(f"sum(rate(llm_d_epp_request_total{any_ns}[{RATE}])) * 60"),
                    "short",
                    "Requests the endpoint picker handled per minute.",
                ),
                Panel(
                    "Preemptions in range",
                    _q(f"sum(increase(vllm:num_preemptions_total{any_ns}[$__range]))"),
                    "short",
                    "Preempted requests over the dashboard's time range; the SLO is zero.",
                    kind="stat",
                    threshold=1,
                    width=6,
                ),
                Panel(
                    "Preemptions / min by role",
                    _q(f"sum by (role) (rate(vllm:num_preemptions_total{any_ns}[{RATE}])) * 60", "{{role}}"),
                    "short",
                    "Preemption rate per role.",
                    width=18,
                ),
            ),
        ),
        Section(
            "Prefix cache",
            (
                Panel(
                    "Prefix hit rate: local and external",
                    (
                        Query(
                            _ratio(
                                f"vllm:prefix_cache_hits_total{any_ns}",
                                f"vllm:prefix_cache_queries_total{any_ns}",
                            ),
                            "local (HBM)",
                        ),
                        Query(
                            _ratio(
                                f"vllm:external_prefix_cache_hits_total{any_ns}",
                                f"vllm:external_prefix_cache_queries_total{any_ns}",
                            ),
                            "external (connector: CPU tier, p2p)",
                        ),
                    ),
                    "percentunit",
                    "Queried prompt tokens found in a cache (published: 73% local with precise routing).",
                ),
                Panel(
                    "Uncached prefill share",
                    _q(
                        _ratio(
                            f"vllm:prompt_tokens_by_source_total{s(role='prefill', source='local_compute')}",
                            f"vllm:prompt_tokens_by_source_total{pre}",
                        ),
                        "computed by prefill",
                    ),
                    "percentunit",
                    "Share of prefill's prompt tokens computed rather than found in a cache "
                    "(published: 14.8%).",
                ),
                Panel(
                    "Prompt tokens by source",
                    _q(
                        f"sum by (role, source) (rate(vllm:prompt_tokens_by_source_total{any_ns}[{RATE}]))",
                        "{{role}} {{source}}",
                    ),
                    "short",
                    "Prompt tokens per second: computed, local cache hit, or KV transfer.",
                    width=24,
                ),
            ),
        ),
        Section(
            "Latency",
            (
                Panel(
                    "TTFT p90 by priority band",
                    _q(
                        "histogram_quantile(0.9, sum by (le, priority) "
                        f"(rate(llm_d_epp_request_ttft_seconds_bucket{any_ns}[{RATE}])))",
                        "priority {{priority}}",
                    ),
                    "s",
                    "Time to first token as the endpoint picker measures it, per InferenceObjective "
                    "priority.",
                ),
                Panel(
                    "Queue time p90 by priority band",
                    _q(
                        "histogram_quantile(0.9, sum by (le, priority) "
                        f"(rate(llm_d_epp_flow_control_request_queue_duration_seconds_bucket{any_ns}[{RATE}])))",
                        "priority {{priority}}",
                    ),
                    "s",
                    "Time a request waits in the router's flow control, per priority band.",
                ),
                Panel(
                    "Engine queue time p90 by role",
                    _q(
                        "histogram_quantile(0.9, sum by (le, role) "
                        f"(rate(vllm:request_queue_time_seconds_bucket{any_ns}[{RATE}])))",
                        "{{role}}",
                    ),
                    "s",
                    "Time requests wait in the engines' own queues.",
                ),
                Panel(
                    "Inter-token latency p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(vllm:inter_token_latency_seconds_bucket{s(role='decode')}[{RATE}])))",
                        "decode",
                    ),
                    "s",
                    "Time between output tokens on decode (MTP emits several per step).",
                ),
            ),
        ),
        Section(
            "NIXL KV transfer",
            (
                Panel(
                    "Transfers / s",
                    _q(f"sum(rate(vllm:nixl_xfer_time_seconds_count{any_ns}[{RATE}]))"),
                    "short",
                    "Completed NIXL transfers (published: 6.2M over the run).",
                    width=8,
                ),
                Panel(
                    "Bytes per transfer (mean)",
                    _q(
                        _ratio(
                            f"vllm:nixl_bytes_transferred_sum{any_ns}",
                            f"vllm:nixl_bytes_transferred_count{any_ns}",
                        )
                    ),
                    "bytes",
                    "Mean KV bytes one transfer moves (published: 2.71 GiB).",
                    width=8,
                ),
                Panel(
                    "Transfer failures",
                    _q(f"sum(increase(vllm:nixl_num_failed_transfers_total{any_ns}[$__range]))"),
                    "short",
                    "Failed transfers over the range (published: zero).",
                    kind="stat",
                    threshold=1,
                    width=8,
                ),
                Panel(
                    "Throughput per transfer",
                    _q(
                        f"sum(rate(vllm:nixl_bytes_transferred_sum{any_ns}[{RATE}])) * 8 / "
                        f"sum(rate(vllm:nixl_xfer_time_seconds_sum{any_ns}[{RATE}]))",
                        "mean",
                    ),
                    "bps",
                    "Bytes moved per second of transfer time, in bits (published: ~580 Gb/s p90). The red "
                    f"line is one GPU's share of its node's NICs, {obs.kv_transfer.gbps_per_gpu:g} Gb/s.",
                    threshold=obs.kv_transfer.gbps_per_gpu * 1e9,
                ),
                Panel(
                    "Transfer time p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(vllm:nixl_xfer_time_seconds_bucket{any_ns}[{RATE}])))",
                        "p90",
                    ),
                    "s",
                    f"The red line is the alert bound from the plan, {obs.kv_transfer.bound_seconds:g} s.",
                    threshold=obs.kv_transfer.bound_seconds,
                ),
                Panel(
                    "KV bytes moved / s",
                    _q(f"sum(rate(vllm:nixl_bytes_transferred_sum{any_ns}[{RATE}]))"),
                    "Bps",
                    "All NIXL transfers together.",
                    width=24,
                ),
            ),
        ),
        Section(
            "CPU KV tier",
            (
                Panel(
                    "Store and restore volume / s",
                    (
                        Query(
                            f"sum(rate(vllm:kv_offload_store_bytes_total{any_ns}[{RATE}]))",
                            "stored (GPU to CPU)",
                        ),
                        Query(
                            f"sum(rate(vllm:kv_offload_load_bytes_total{any_ns}[{RATE}]))",
                            "restored (CPU to GPU)",
                        ),
                    ),
                    "Bps",
                    "Bytes offloaded and restored (published: 2.53 PiB stored, 2.16 PiB restored).",
                ),
                Panel(
                    "Restore latency (mean)",
                    _q(
                        _ratio(
                            f"vllm:kv_offload_load_time_total{any_ns}",
                            f"vllm:kv_offload_load_size_count{any_ns}",
                        ),
                        "per restore",
                    ),
                    "s",
                    "Load time per restore operation (published: 79.6 ms).",
                ),
            ),
        ),
        Section(
            "Speculative decoding (MTP)",
            (
                Panel(
                    "MTP acceptance length",
                    _q(
                        "1 + "
                        + _ratio(
                            f"vllm:spec_decode_num_accepted_tokens_total{any_ns}",
                            f"vllm:spec_decode_num_drafts_total{any_ns}",
                        ),
                        "tokens per step",
                    ),
                    "short",
                    f"Tokens emitted per decode step: 1 plus accepted drafts (at most {1 + obs.mtp_tokens}).",
                    width=24,
                ),
            ),
        ),
    ]
    return Dashboard("fleet", f"llm-d fleet {obs.pool}: overview", tuple(sections))


def role_dashboard(obs: ObservabilityPlan, role: Literal["prefill", "decode"]) -> Dashboard:
    s = _Sel(obs)
    sel = s(role=role)
    targets = obs.role(role)
    rank = "{{pod}} rank {{engine}}"
    sections = [
        Section(
            "Ranks",
            (
                Panel(
                    "Rank targets up",
                    _q(f"count(up{sel} == 1)", "up"),
                    "short",
                    f"vLLM API servers answering their scrape; the plan deploys {targets.ranks} "
                    f"({targets.pods} pods).",
                    kind="stat",
                    threshold=targets.ranks,
                    width=6,
                ),
                Panel(
                    "Running and waiting requests",
                    (
                        Query(f"sum(vllm:num_requests_running{sel})", "running"),
                        Query(f"sum(vllm:num_requests_waiting{sel})", "waiting"),
                    ),
                    "short",
                    "Requests in the engines' batches and queues, all ranks.",
                    width=18,
                ),
            ),
        ),
        Section(
            "Per rank",
            (
                Panel(
                    "KV cache usage per rank",
                    _q(f"max by (pod, engine) (vllm:kv_cache_usage_perc{sel})", rank),
                    "percentunit",
                    f"HBM KV cache in use; {targets.kv_tokens_per_rank:,} tokens per rank in the plan.",
                    threshold=1.0,
                ),
                Panel(
                    "Running requests per rank",
                    _q(f"sum by (pod, engine) (vllm:num_requests_running{sel})", rank),
                    "short",
                    "Requests in each rank's batch.",
                ),
                Panel(
                    "Prompt tokens / s per rank",
                    _q(f"sum by (pod, engine) (rate(vllm:prompt_tokens_total{sel}[{RATE}]))", rank),
                    "short",
                    "Prefill work per rank.",
                ),
                Panel(
                    "Generation tokens / s per rank",
                    _q(f"sum by (pod, engine) (rate(vllm:generation_tokens_total{sel}[{RATE}]))", rank),
                    "short",
                    "Decode work per rank.",
                ),
                Panel(
                    "Prefix hit rate per rank",
                    _q(
                        f"sum by (pod, engine) (rate(vllm:prefix_cache_hits_total{sel}[{RATE}])) / "
                        f"sum by (pod, engine) (rate(vllm:prefix_cache_queries_total{sel}[{RATE}]))",
                        rank,
                    ),
                    "percentunit",
                    "Share of each rank's queried prompt tokens found in its HBM cache.",
                ),
                Panel(
                    "Preemptions / min per rank",
                    _q(f"sum by (pod, engine) (rate(vllm:num_preemptions_total{sel}[{RATE}])) * 60", rank),
                    "short",
                    "Should stay at zero.",
                ),
                Panel(
                    "CPU tier usage per rank",
                    _q(f"max by (pod, engine) (vllm:kv_offload_cpu_cache_usage_perc{sel})", rank),
                    "percentunit",
                    f"The rank's CPU DRAM KV tier ({targets.cpu_tier_gib_per_rank} GiB per rank in the "
                    "plan).",
                ),
                Panel(
                    "NIXL transfer time p90 per rank",
                    _q(
                        "histogram_quantile(0.9, sum by (le, pod, engine) "
                        f"(rate(vllm:nixl_xfer_time_seconds_bucket{sel}[{RATE}])))",
                        rank,
                    ),
                    "s",
                    "KV transfers this rank read (decode pulls from prefill).",
                    threshold=obs.kv_transfer.bound_seconds,
                ),
            ),
        ),
        Section(
            "Latency",
            (
                Panel(
                    "Time to first token p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(vllm:time_to_first_token_seconds_bucket{sel}[{RATE}])))",
                        role,
                    ),
                    "s",
                    "As the engines measure it.",
                    width=8,
                ),
                Panel(
                    "Queue time p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(vllm:request_queue_time_seconds_bucket{sel}[{RATE}])))",
                        role,
                    ),
                    "s",
                    "Time in the engine's waiting queue.",
                    width=8,
                ),
                Panel(
                    "Inter-token latency p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(vllm:inter_token_latency_seconds_bucket{sel}[{RATE}])))",
                        role,
                    ),
                    "s",
                    "Time between output tokens.",
                    width=8,
                ),
            ),
        ),
    ]
    return Dashboard(role, f"llm-d fleet {obs.pool}: {role} ranks", tuple(sections))


def router_dashboard(obs: ObservabilityPlan) -> Dashboard:
    s = _Sel(obs)
    epp = s(component="endpoint-picker")
    pool = s(name=obs.pool)
    band_bytes = max((b for _, b in obs.band_max_bytes), default=0)
    sections = [
        Section(
            "Requests",
            (
                Panel(
                    "Requests / s and error ratio",
                    (
                        Query(f"sum(rate(llm_d_epp_request_total{epp}[{RATE}]))", "requests / s"),
                        Query(
                            _ratio(f"llm_d_epp_request_error_total{epp}", f"llm_d_epp_request_total{epp}"),
                            "error ratio",
                        ),
                    ),
                    "short",
                    "Requests the endpoint picker handled, and the share that ended in an error.",
                ),
                Panel(
                    "Ready endpoints",
                    _q(f"max(llm_d_epp_ready_endpoints{pool})", "ready"),
                    "short",
                    f"Rank endpoints with fresh metrics; the plan has {obs.endpoints}.",
                    threshold=obs.endpoints,
                ),
                Panel(
                    "Disaggregation decisions / s",
                    _q(
                        f"sum by (decision_type) (rate(llm_d_epp_disagg_decision_total{epp}[{RATE}]))",
                        "{{decision_type}}",
                    ),
                    "short",
                    "Requests prefilled remotely (prefill-decode) or on decode itself (decode-only).",
                    width=24,
                ),
            ),
        ),
        Section(
            "Flow control",
            (
                Panel(
                    "Queued requests by band",
                    _q(
                        f"sum by (priority) (llm_d_epp_flow_control_queue_size{epp})", "priority {{priority}}"
                    ),
                    "short",
                    "Requests held in each priority band.",
                ),
                Panel(
                    "Queued bytes by band",
                    _q(
                        f"sum by (priority) (llm_d_epp_flow_control_queue_bytes{epp})",
                        "priority {{priority}}",
                    ),
                    "bytes",
                    "Request bytes held per band; the red line is the largest band's maxBytes from the plan.",
                    threshold=band_bytes or None,
                ),
                Panel(
                    "Outcomes / s",
                    _q(
                        f"sum by (outcome) (rate(llm_d_epp_flow_control_requests_total{epp}[{RATE}]))",
                        "{{outcome}}",
                    ),
                    "short",
                    "Dispatched, rejected and evicted requests.",
                ),
                Panel(
                    "Pool saturation",
                    _q(f"max(llm_d_epp_flow_control_pool_saturation{epp})", "saturation"),
                    "short",
                    "1.0 is the dispatch gate; above it requests wait in the queue.",
                    threshold=1.0,
                ),
            ),
        ),
        Section(
            "Scheduler",
            (
                Panel(
                    "Scheduling latency p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le) "
                        f"(rate(llm_d_epp_scheduler_e2e_duration_seconds_bucket{epp}[{RATE}])))",
                        "p90",
                    ),
                    "s",
                    "End-to-end time the scheduler takes to pick an endpoint.",
                ),
                Panel(
                    "Plugin latency p90",
                    _q(
                        "histogram_quantile(0.9, sum by (le, plugin_name) "
                        f"(rate(llm_d_epp_plugin_duration_seconds_bucket{epp}[{RATE}])))",
                        "{{plugin_name}}",
                    ),
                    "s",
                    "Per-plugin time (scorers, producers, filters).",
                ),
            ),
        ),
        Section(
            "KV index and leader",
            (
                Panel(
                    "Index lookups and hits / s",
                    (
                        Query(
                            f"sum(rate(llm_d_router_epp_kv_cache_index_lookup_requests_total{epp}[{RATE}]))",
                            "lookups",
                        ),
                        Query(
                            f"sum(rate(llm_d_router_epp_kv_cache_index_lookup_hits_total{epp}[{RATE}]))",
                            "hits",
                        ),
                    ),
                    "short",
                    "The precise prefix index (enableMetrics is on in the rendered EndpointPickerConfig).",
                ),
                Panel(
                    "Index admissions and evictions / s",
                    (
                        Query(
                            f"sum(rate(llm_d_router_epp_kv_cache_index_admissions_total{epp}[{RATE}]))",
                            "admissions",
                        ),
                        Query(
                            f"sum(rate(llm_d_router_epp_kv_cache_index_evictions_total{epp}[{RATE}]))",
                            "evictions",
                        ),
                    ),
                    "short",
                    "Blocks entering and leaving the index.",
                ),
                Panel(
                    "Leader",
                    _q(f"max by (pod) (leader_election_master_status{epp})", "{{pod}}"),
                    "short",
                    "1 on the replica holding the leader Lease"
                    + (
                        f" ({obs.leader_lease})."
                        if obs.leader_lease
                        else "; no leader election in this stack."
                    ),
                    width=24,
                ),
            ),
        ),
    ]
    return Dashboard("router", f"llm-d fleet {obs.pool}: router", tuple(sections))


def fleet_dashboards(obs: ObservabilityPlan) -> tuple[Dashboard, ...]:
    return (
        fleet_dashboard(obs),
        role_dashboard(obs, "prefill"),
        role_dashboard(obs, "decode"),
        router_dashboard(obs),
    )


def _panel_builder(panel: Panel, panel_id: int) -> Any:
    builder: Any = gstat.Panel() if panel.kind == "stat" else gts.Panel()
    builder = builder.id(panel_id).title(panel.title).description(panel.description).unit(panel.unit)
    builder = builder.datasource(DATASOURCE).height(8).span(panel.width)
    for ref, query in zip("ABCDEFGH", panel.queries, strict=False):
        builder = builder.with_target(
            gprom.Dataquery().expr(query.expr).legend_format(query.legend or "__auto").ref_id(ref)
        )
    if panel.threshold is not None:
        steps = [Threshold(value=None, color="green"), Threshold(value=panel.threshold, color="red")]
        builder = builder.thresholds(gdash.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps))
    return builder


def dashboard_json(pool: str, board: Dashboard) -> str:
    """The dashboard model as Grafana stores it, with sorted keys."""
    uid = f"llmd-{pool}-{board.key}"
    builder = (
        gdash.Dashboard(board.title)
        .uid(uid)
        .tags(["llm-d", "llmd-fleet", pool])
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("utc")
        .with_variable(gdash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    )
    panel_id = 1
    for section in board.sections:
        builder = builder.with_row(gdash.Row(section.title).id(panel_id))
        panel_id += 1
        for panel in section.panels:
            builder = builder.with_panel(_panel_builder(panel, panel_id))
            panel_id += 1
    return json.dumps(builder.build(), cls=JSONEncoder, sort_keys=True, indent=2) + "\n"


def dashboard_queries(board: Dashboard) -> list[str]:
    return [q.expr for p in board.panels() for q in p.queries]
