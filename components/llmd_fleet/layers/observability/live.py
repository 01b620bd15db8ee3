"""`llmd-fleet plan`'s last table: each capacity figure of the plan next to the metric, dashboard
panel and query that show it live, so an operator knows what to expect before the fleet runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.layers.observability.dashboards import Dashboard, fleet_dashboards
from llmd_fleet.plan.fleet import FleetPlan, context_tokens
from llmd_fleet.plan.observability import gib, plan_observability

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


@dataclass(frozen=True)
class LiveFigure:
    figure: str
    planned: str
    metric: str
    dashboard: str
    """Dashboard key: fleet, prefill, decode, router."""
    panel: str
    """Panel title on that dashboard; its first query is printed."""


def live_figures(config: StackConfig, plan: FleetPlan) -> list[LiveFigure]:
    obs = plan_observability(config, plan)
    context = context_tokens(config)  # the stack's declared turn: p50 input + output
    rows = []
    for role in obs.roles:
        rows.append(
            LiveFigure(
                f"{role.name} rank targets",
                f"{role.ranks} ({role.pods} pods x {role.ranks // role.pods} ranks)",
                "up",
                role.name,
                "Rank targets up",
            )
        )
        rows.append(
            LiveFigure(
                f"{role.name} KV cache per rank",
                f"{role.kv_tokens_per_rank:,} tokens ({role.kv_tokens_per_rank / context:.2f} "
                f"contexts of {context:,})",
                "vllm:kv_cache_usage_perc",
                role.name,
                "KV cache usage per rank",
            )
        )
        if role.cpu_tier_gib_per_rank:
            rows.append(
                LiveFigure(
                    f"{role.name} CPU tier per rank",
                    f"{role.cpu_tier_gib_per_rank} GiB",
                    "vllm:kv_offload_cpu_cache_usage_perc",
                    role.name,
                    "CPU tier usage per rank",
                )
            )
    bound = obs.kv_transfer
    rows += [
        LiveFigure(
            "rank endpoints the router picks from",
            f"{obs.endpoints}",
            "llm_d_epp_ready_endpoints",
            "router",
            "Ready endpoints",
        ),
        LiveFigure(
            "GPU fabric share per GPU",
            f"{bound.gbps_per_gpu:g} Gb/s",
            "vllm:nixl_bytes_transferred, vllm:nixl_xfer_time_seconds",
            "fleet",
            "Throughput per transfer",
        ),
        LiveFigure(
            "KV transfer p90 bound (alert NixlTransferSlow)",
            f"{bound.bound_seconds:g} s ({bound.max_tokens:,} tokens = {gib(bound.max_bytes)} at line rate: "
            f"{bound.line_rate_seconds:.3f} s)",
            "vllm:nixl_xfer_time_seconds",
            "fleet",
            "Transfer time p90",
        ),
    ]
    if obs.band_max_bytes:
        bands = ", ".join(f"{priority}: {gib(limit)}" for priority, limit in obs.band_max_bytes)
        rows.append(
            LiveFigure(
                "flow-control maxBytes per band",
                bands,
                "llm_d_epp_flow_control_queue_bytes",
                "router",
                "Queued bytes by band",
            )
        )
    if obs.mtp_tokens:
        rows.append(
            LiveFigure(
                "MTP tokens per step",
                f"at most {1 + obs.mtp_tokens} (1 + {obs.mtp_tokens} drafts)",
                "vllm:spec_decode_num_accepted_tokens, vllm:spec_decode_num_drafts",
                "fleet",
                "MTP acceptance length",
            )
        )
    if obs.leader_lease:
        rows.append(
            LiveFigure(
                "EPP leader Lease", obs.leader_lease, "leader_election_master_status", "router", "Leader"
            )
        )
    return rows


def _panel_query(boards: dict[str, Dashboard], key: str, title: str) -> str:
    (panel,) = [p for p in boards[key].panels() if p.title == title]
    return panel.queries[0].expr


def live_table(config: StackConfig, plan: FleetPlan) -> str:
    """The figures as a Markdown table; without a Prometheus scraping the fleet
    (`observability.prometheus: none`) or without dashboards, no dashboard column."""
    obs = plan_observability(config, plan)
    if config.observability.prometheus == "none" or not config.observability.dashboards:
        lines = ["| figure | plan | metric |", "|---|---|---|"]
        lines += [f"| {r.figure} | {r.planned} | `{r.metric}` |" for r in live_figures(config, plan)]
        return "\n".join(lines)
    boards = {b.key: b for b in fleet_dashboards(obs)}
    lines = ["| figure | plan | metric | dashboard / panel | query |", "|---|---|---|---|---|"]
    for row in live_figures(config, plan):
        query = _panel_query(boards, row.dashboard, row.panel).replace("|", "\\|")
        lines.append(
            f"| {row.figure} | {row.planned} | `{row.metric}` | "
            f"{boards[row.dashboard].title} / {row.panel} | `{query}` |"
        )
    return "\n".join(lines)
