"""`llmd-fleet plan` output: the Markdown tables fitted to a terminal's 100 columns, and the plan
as JSON (`--json`, schema `llmd-fleet.plan/v1`, docs/plan-json.md).

A table that fits 100 columns prints as it is. A wider one prints as records, one per row: the
row's first cell, then each other column as `column: value` indented, long values wrapped at
spaces (a token longer than the line, such as a long PromQL query, is split where it must be).
"""

import textwrap
from typing import Any

from llmd_fleet.plan.canary import CanaryPlan
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.stack.model import StackConfig

WIDTH = 100
SCHEMA = "llmd-fleet.plan/v1"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _records(table: list[str], width: int) -> list[str]:
    header = _cells(table[0])
    out: list[str] = []
    for row in table[2:]:
        cells = _cells(row)
        title = cells[0] or header[0]
        out.append(textwrap.shorten(f"- {title}", width=width, placeholder="..."))
        label = max(len(h) for h in header[1:]) + 1
        for name, value in zip(header[1:], cells[1:], strict=False):
            prefix = f"    {name + ':':<{label}} "
            out += textwrap.wrap(
                value or "-",
                width=width,
                initial_indent=prefix,
                subsequent_indent=" " * len(prefix),
                break_on_hyphens=False,
            )
    return out


def fit_tables(text: str, width: int = WIDTH) -> str:
    """`text` with every Markdown table wider than `width` columns rewritten as records."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            table = lines[i:j]
            out += table if max(len(t) for t in table) <= width else _records(table, width)
            i = j
            continue
        out += (
            textwrap.wrap(lines[i], width=width, break_on_hyphens=False)
            if len(lines[i]) > width
            else [lines[i]]
        )
        i += 1
    return "\n".join(out)


def plan_json(stack: str, config: StackConfig, plan: FleetPlan) -> dict[str, Any]:
    """The plan as a JSON document (schema `llmd-fleet.plan/v1`, docs/plan-json.md). Fields are
    only added within a schema version; a removal or a change of meaning bumps it."""
    return {
        "schema": SCHEMA,
        "stack": stack,
        "model": config.model.id,
        "target": config.target.kind,
        "gpus": plan.gpus,
        "nodes": plan.nodes,
        "roles": [
            {
                "name": r.name,
                "nodeGroup": r.node_group,
                "instances": r.instances,
                "nodesPerInstance": r.nodes_per_instance,
                "gpusPerNode": r.gpus_per_node,
                "nodes": r.nodes,
                "gpus": r.gpus,
                "tensorParallel": r.tensor_parallel,
                "dataParallel": r.data_parallel,
                "expertParallel": r.expert_parallel,
                "ranksPerPod": r.dp_size_local,
                "clientPorts": list(r.client_ports),
                "autoscaled": r.autoscaled,
                "minInstances": r.min_instances if r.autoscaled else r.instances,
                "maxInstances": r.max_instances if r.autoscaled else r.instances,
                "memory": {
                    "hbmGiBPerGpu": round(r.memory.hbm_gib, 1),
                    "usableGiBPerGpu": round(r.memory.usable_gib, 1),
                    "kvCacheGiBPerRank": round(r.memory.kv_cache_gib, 1),
                    "kvTokensPerRank": r.memory.kv_tokens,
                    "cpuTierGiBPerRank": r.memory.cpu_tier_gib,
                    "cpuTierTokensPerRank": r.memory.cpu_tier_tokens,
                },
                "pod": {"memoryGiB": r.pod_memory_gib, "cpus": r.pod_cpus, "shmGiB": r.shm_gib},
                "startupSeconds": r.startup_seconds,
            }
            for r in plan.roles
        ],
        "nodeGroups": [{"name": g.name, "nodes": g.nodes, "used": g.used} for g in plan.node_groups],
        "router": {
            "endpoints": plan.router.endpoints,
            "memoryGiB": plan.router.memory_gib,
            "queueMaxBytes": plan.router.queue_max_bytes,
        },
        **({} if plan.canary is None else {"canary": canary_json(plan.canary)}),
    }


def canary_json(canary: CanaryPlan) -> dict[str, Any]:
    """The canary's weight and surge (`serving.canary`, docs/day-two.md)."""
    return {
        "weight": canary.weight,
        "nodes": canary.nodes,
        "gpus": canary.gpus,
        "roles": [
            {
                "name": r.name,
                "nodeGroup": r.node_group,
                "instances": r.instances,
                "nodes": r.nodes,
                "gpus": r.gpus,
            }
            for r in canary.roles
        ],
    }


def hourly_cost(plan: FleetPlan, gpu_hour_usd: float) -> dict[str, float | int]:
    """What the stack's GPU nodes cost per hour at `gpu_hour_usd` per GPU-hour: at the planned
    instances and, for autoscaled roles, at their maxima (the most it can cost)."""
    peak_gpus = sum(r.max_instances * r.nodes_per_instance * r.gpus_per_node for r in plan.roles)
    return {
        "gpuHourUsd": gpu_hour_usd,
        "gpus": plan.gpus,
        "perHourUsd": round(plan.gpus * gpu_hour_usd, 2),
        "gpusAtMaxima": peak_gpus,
        "perHourUsdAtMaxima": round(peak_gpus * gpu_hour_usd, 2),
    }


def cost_line(cost: dict[str, float | int]) -> str:
    line = (
        f"cost: {cost['gpus']} GPUs x ${cost['gpuHourUsd']:.2f} per GPU-hour = "
        f"${cost['perHourUsd']:,.2f} per hour"
    )
    if cost["gpusAtMaxima"] != cost["gpus"]:
        line += (
            f" (${cost['perHourUsdAtMaxima']:,.2f} at the autoscaling maxima, {cost['gpusAtMaxima']} GPUs)"
        )
    return line


def throughput_json(
    config: StackConfig, plan: FleetPlan, gpu_hour_usd: float | None, cache_hit: float | None
) -> dict[str, Any] | None:
    """`throughput` of the plan document (docs/plan-json.md); None when the model cannot size the
    stack (simulator, no model description, GPU or NIC rate unknown)."""
    from llmd_fleet.plan.split import plan_splits
    from llmd_fleet.plan.throughput import plan_throughput, role_shapes

    f = plan_throughput(config, plan, gpu_hour_usd, cache_hit)
    sp = plan_splits(config, plan, cache_hit)
    shapes = role_shapes(config, plan)
    if f is None or shapes is None:
        return None
    t = f.throughput
    prefill, decode = shapes
    doc: dict[str, Any] = {
        "cacheHit": f.turn.cache_hit,
        "meanContextTokens": f.turn.context_tokens,
        "decodeTokensPerSecondPerRank": round(t.decode_per_rank, 1),
        "prefillInputTokensPerSecondPerRank": round(t.prefill_per_rank, 1),
        "ceilingsOutputTokensPerMinute": {name: round(value * 60) for name, value in t.ceilings},
        "limit": t.limit,
        "outputTokensPerMinute": round(f.output_per_min),
        "inputTokensPerMinute": round(f.input_per_min),
        "declaredOutputTokensPerMinute": round(f.demand_output_per_min),
        "headroom": round(f.headroom, 3),
        # Each stage's capacity per node: prefill input tokens (cache hits included, at cacheHit),
        # decode output tokens at the sequences it holds (pure decode).
        "roles": {
            "prefill": {
                "inputTokensPerSecondPerNode": round(
                    t.prefill.tokens_per_s * prefill.ranks / prefill.nodes, 1
                ),
                "binds": t.prefill.binds,
            },
            "decode": {
                "outputTokensPerSecondPerNode": round(t.decode.tokens_per_s * decode.ranks / decode.nodes, 1),
                "binds": t.decode.binds,
            },
        },
    }
    if f.usd_per_m_output is not None and f.usd_per_m_input is not None and f.usd_per_agent_hour is not None:
        doc["usdPerMillionOutput"] = round(f.usd_per_m_output, 4)
        doc["usdPerMillionInput"] = round(f.usd_per_m_input, 4)
        doc["usdPerAgentHour"] = round(f.usd_per_agent_hour, 4)
    if sp is not None:
        doc["splits"] = [
            {
                "prefill": s.prefill,
                "decode": s.decode,
                "nodes": s.nodes,
                "outputTokensPerMinute": round(s.output_per_min),
                "agents": round(s.agents),
                "binds": s.binds,
                "stack": s.label == sp.stack.label,
            }
            for s in sp.ranked
        ]
    return doc
