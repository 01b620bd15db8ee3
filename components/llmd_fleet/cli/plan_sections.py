"""Sections of `llmd-fleet plan` that explain the sizing (docs/fleet-scale.md): each a Markdown
table of its own, printed after the role table, each figure beside what confirms it live."""

from dataclasses import replace

from llmd_fleet.models import card_home
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.plan.memory import KV_INDEXER_CONSERVATIVE
from llmd_fleet.stack.model import StackConfig


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"


def _role_column(config: StackConfig, name: str, expert_parallel: int) -> str:
    """`decode (EP 64)`, with EPLB's redundant experts when the role sets them."""
    role = getattr(config.serving.roles, name, None)
    redundant = getattr(role, "redundant_experts", None)
    spares = f", {redundant} redundant experts" if redundant else ""
    return f"{name} (EP {expert_parallel}{spares})"


def _any_dbo(config: StackConfig) -> bool:
    roles = config.serving.roles
    return roles.prefill.dual_batch_overlap or roles.decode.dual_batch_overlap


def memory_section(config: StackConfig, plan: FleetPlan) -> str:
    """Weights, reserves and KV bytes per token from the model description (plan/memory.py); empty
    when the stack's model has no committed description or nothing is sized from HBM."""
    sizing = plan.model
    roles = [r for r in plan.roles if r.memory.weights is not None and r.memory.reserves is not None]
    if sizing is None or sizing.description is None or sizing.kv is None or not roles:
        return ""
    d, kv = sizing.description, sizing.kv
    if d.sparse_attention and config.model.kv_cache_dtype == "fp8":
        mla_label = "sparse-MLA cache (fp8_ds_mla)"
    else:
        dtype = "fp8" if config.model.kv_cache_dtype == "fp8" else "bf16"
        mla_label = f"MLA cache ({dtype} latent + RoPE key)"
    lines = [
        f"## Memory per rank from the model ({d.name}, {card_home(config.model.id)}) and vLLM 0.33 "
        "(plan/memory.py)",
        "",
        _row(
            ("GiB per GPU", *(_role_column(config, r.name, r.expert_parallel) for r in roles), "confirm live")
        ),
        "|" + "---|" * (len(roles) + 2),
    ]
    description = plan.model.description if plan.model else None
    dsa = description is not None and description.sparse_attention
    mtp = any(r.memory.weights is not None and r.memory.weights.mtp > 0 for r in roles)
    weight_rows = (
        ("routed experts / EP", "routed_experts"),
        (f"attention, {'indexers, ' if dsa else ''}shared experts, dense MLPs, gates", "non_expert"),
        ("embeddings (bf16)", "embeddings"),
        (f"LM head (bf16{', shared with MTP' if mtp else ''})", "lm_head"),
        ("MTP layer", "mtp"),
        ("absorbed-MLA W_UK_T + W_UV (bf16)", "absorbed_mla"),
    )
    # A part no role holds (no MTP layer, no DSA workspace) gets no row of zeros.
    for label, attr in weight_rows:
        if all(getattr(r.memory.weights, attr) == 0 for r in roles):
            continue
        lines.append(_row((label, *(f"{getattr(r.memory.weights, attr):.2f}" for r in roles), "")))
    lines.append(
        _row(
            (
                "weights total",
                *(f"{r.memory.weights.total:.1f}" for r in roles if r.memory.weights),
                "engine log `Model loading took N GiB`",
            )
        )
    )
    reserve_rows = (
        ("runtimeReserveGiB (activation peak, CUDA graphs)", "runtime"),
        ("nvshmemHeapGiB (DeepEP)", "nvshmem"),
        (
            "sparse-MLA prefill workspace (maxModelLen"
            + (", one per micro-batch with dualBatchOverlap)" if _any_dbo(config) else ")"),
            "sparse_workspace",
        ),
        ("top-k index buffers", "topk_indices"),
    )
    for label, attr in reserve_rows:
        if all(getattr(r.memory.reserves, attr) == 0 for r in roles):
            continue
        lines.append(_row((label, *(f"{getattr(r.memory.reserves, attr):.2f}" for r in roles), "")))
    lines += [
        _row(
            (
                "KV cache (usable - weights - reserves)",
                *(f"{r.memory.kv_cache_gib:.1f}" for r in roles),
                "engine log `Available KV cache memory`",
            )
        ),
        _row(
            (
                "KV tokens per rank",
                *(f"{r.memory.kv_tokens:,}" for r in roles),
                "engine log `KV cache size: N tokens`; `vllm:cache_config_info` num_gpu_blocks x blockSize",
            )
        ),
        "",
        "| KV bytes per token | value | confirm live |",
        "|---|---|---|",
        _row(
            (
                mla_label,
                f"{kv.mla_per_layer} B x {kv.mla_layers} layers ({d.num_hidden_layers} + "
                f"{kv.mla_layers - d.num_hidden_layers} MTP) = {kv.mla_per_layer * kv.mla_layers:,} B",
                "engine log KV cache spec",
            )
        ),
    ]
    if d.sparse_attention:
        lines.append(
            _row(
                (
                    "indexer key cache",
                    f"{kv.indexer_per_layer} B x {kv.indexer_layers} layers = "
                    f"{kv.indexer_per_layer * kv.indexer_layers:,} B",
                    "engine log KV cache spec (count of indexer k_cache layers)",
                )
            )
        )
    lines.append(_row(("sized with", f"{kv.total:,} B", "")))
    if KV_INDEXER_CONSERVATIVE and kv.total != kv.expected:
        lines.append(
            _row(
                (
                    "conservative",
                    f"indexer cache counted on every layer; the config's {d.indexer_layers} indexer "
                    f"layers + MTP would give {kv.expected:,} B ({kv.total / kv.expected - 1:.1%} less)",
                    "count `indexer.k_cache` layers in the engine's KV cache config",
                )
            )
        )
    served = ", ".join(f"{r.name} {getattr(config.serving.roles, r.name).max_model_len:,}" for r in roles)
    lines += [
        "",
        "| context window | tokens | source |",
        "|---|---|---|",
        _row(
            (
                "model (max_position_embeddings)",
                f"{sizing.context_window:,}",
                f"{card_home(config.model.id)} SOURCES",
            )
        ),
        _row(("served (maxModelLen)", served, "engine log `max_model_len`; `vllm:cache_config_info`")),
    ]
    return "\n".join(lines)


def workload_section(config: StackConfig, plan: FleetPlan) -> str:
    """The declared workload against the plan (plan/workload.py); empty for the simulator."""
    from llmd_fleet.plan.workload import DECODE_KV_HEADROOM, plan_workload, workload_problems

    wp = plan_workload(config, plan)
    if wp is None:
        return ""
    w = config.workload
    _, warnings = workload_problems(config, plan)
    percentiles = ", ".join(f"{name} {tokens:,}" for name, tokens in wp.input_percentiles)
    refused = (
        f"{wp.first_refused} and above: ~{wp.refused_share:.0%} of turns (declared)"
        if wp.first_refused
        else "none (the window covers p99)"
    )
    lines = [
        "## The workload the stack is sized for (llmd-fleet:workload, plan/workload.py)",
        "",
        "| workload | value | confirm live |",
        "|---|---|---|",
        _row(("agents", f"{w.agents:,}", "`llmd-fleet bench-summary` agents")),
        _row(
            (
                "input tokens per turn",
                percentiles,
                "`vllm:request_prompt_tokens` histogram; bench-summary median input",
            )
        ),
        _row(("output tokens per answer", f"{w.output_tokens:,}", "`vllm:request_generation_tokens`")),
        _row(
            (
                "growth per turn, prefix reuse",
                f"{w.growth_tokens_per_turn:,} tokens, {w.prefix_reuse:.1%}",
                "`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`",
            )
        ),
        _row(("tool gap", f"{w.tool_gap_seconds:g} s (assumed: the benchmark's mean tool latency)", "")),
        _row(
            (
                "served window (maxModelLen, model window)",
                f"{wp.served_window:,}; refused: {refused}",
                "HTTP 400 (prompt too long) at the gateway; bench-summary failed",
            )
        ),
        _row(
            (
                "decode time per answer",
                f"{wp.decode_seconds:.2f} s = {w.output_tokens} / MTP tokens per step x step time "
                "(plan/throughput.py)",
                "`vllm:request_decode_time_seconds` p50",
            )
        ),
        _row(
            (
                "decode contexts needed (Little's law)",
                f"{wp.decode_contexts_needed:,.0f} = {w.agents:,} x {wp.decode_seconds:.2f} / "
                f"({wp.decode_seconds:.2f} + {w.tool_gap_seconds:g})",
                "sum of `vllm:num_requests_running` + `vllm:num_requests_waiting` over decode pods",
            )
        ),
        _row(
            (
                "decode contexts at the measured request rate",
                f"{wp.decode_contexts_at_measured_rate:,.0f} = {wp.requests_per_second:.0f} req/s x "
                f"{wp.decode_seconds:.2f} s (turns measured at {60 / w.requests_per_agent_minute:.1f} s, "
                f"not the {wp.decode_seconds + w.tool_gap_seconds:.1f} s of decode + tool gap; not checked)",
                "",
            )
        ),
        _row(
            (
                f"decode contexts held ({wp.context_tokens:,} tokens each)",
                f"{wp.decode_contexts_held:,.0f} (whole per rank {wp.decode_contexts_whole:,}); "
                f"plan refuses above {DECODE_KV_HEADROOM:.0%} without a CPU tier",
                "`vllm:kv_cache_usage_perc` on decode; `vllm:num_preemptions_total` stays 0",
            )
        ),
        _row(
            (
                "CPU tier: agents' contexts / decode tier",
                f"{wp.cpu_tier_tokens_needed:,} / {wp.cpu_tier_tokens_held:,} tokens "
                f"({wp.cpu_tier_tokens_needed / max(wp.cpu_tier_tokens_held, 1):.0%})",
                "`vllm:kv_offload_cpu_cache_usage_perc` on decode",
            )
        ),
        _row(
            (
                "request rate",
                f"{wp.requests_per_second:.0f} req/s = {w.agents:,} x "
                f"{w.requests_per_agent_minute:g} req/min / 60",
                "bench-summary requests/min; rate of `vllm:request_success_total`",
            )
        ),
        _row(
            (
                "EPP working set at that rate (+ queue bound)",
                f"{wp.epp_working_set_gib:.1f} GiB (+ {plan.router.queue_max_bytes / 1024**3:.1f} = "
                f"{wp.epp_needed_gib:.1f}) of {wp.epp_memory_gib} GiB per replica",
                "`container_memory_working_set_bytes` of the epp container",
            )
        ),
    ]
    lines += [_row(("warning", text, "")) for text in warnings]
    return "\n".join(lines)


def preflight_section(config: StackConfig, plan: FleetPlan) -> str:
    """The fabric preflight's gate and its basis (docs/preflight.md); empty when it is off."""
    if not config.serving.preflight.enabled:
        return ""
    from llmd_fleet.layers.preflight.component import threshold_summary

    return "\n".join(
        [
            "## Fabric preflight (serving.preflight, layers/preflight/component.py)",
            "",
            "| preflight | value |",
            "|---|---|",
            _row(("backend", plan.role("prefill").fabric.nixl_backends[0])),
            _row(("rate gate", threshold_summary(config, plan))),
        ]
    )


# What shows each ceiling being approached live (the binding one saturates first).
_CEILING_LIVE = {
    "decode": "ITL p50 rising with `vllm:kv_cache_usage_perc` near 1 on decode ranks",
    "prefill": 'rate of `vllm:prompt_tokens_by_source_total{source="local_compute"}` on prefill '
    "ranks; TTFT and `vllm:num_requests_waiting` rising",
}


def throughput_section(
    config: StackConfig, plan: FleetPlan, gpu_hour_usd: float | None = None, cache_hit: float | None = None
) -> str:
    """Tokens/min, the limiting resource, headroom and cost (plan/throughput.py); empty when the
    plan cannot model the stack (simulator, no model description, unknown GPU)."""
    from llmd_fleet.plan.throughput import mtp_acceptance, plan_throughput, why_not_modelled

    f = plan_throughput(config, plan, gpu_hour_usd, cache_hit)
    if f is None:
        why = why_not_modelled(config, plan)
        return f"throughput: not modelled: {why}" if why else ""
    t = f.throughput
    lines = [
        "## Throughput and cost (plan/throughput.py, calibrated on published runs)",
        "",
        "| figure | value | confirm live |",
        "|---|---|---|",
        _row(
            (
                "decode per rank",
                f"{t.decode_per_rank:,.0f} tok/s = {t.decode_seqs_per_rank:.2f} seqs x "
                f"{t.decode_tokens_per_step:.2f} tok/step / {t.decode_step_s * 1000:.1f} ms "
                f"(compute {t.decode.compute_s * 1000:.1f} + HBM {t.decode.hbm_s * 1000:.1f} + "
                f"all-to-all {t.decode.a2a_s * 1000:.1f} ms; mean context {f.turn.context_tokens:,})",
                "rate of `vllm:generation_tokens_total` per decode rank; ITL p50",
            )
        ),
        _row(
            (
                "prefill per rank",
                f"{t.prefill_per_rank:,.0f} input tok/s at {f.turn.cache_hit:.0%} cache hits "
                f"(per token: compute {t.prefill.compute_s * 1e6:.2f} + all-to-all "
                f"{t.prefill.a2a_s * 1e6:.2f} + KV transfer {t.prefill.kv_transfer_s * 1e6:.2f} us)",
                "rate of `vllm:prompt_tokens_total` per prefill rank",
            )
        ),
    ]
    if f.turn.local_share > 0:
        lines.append(
            _row(
                (
                    "prefill the P/D decider leaves on decode",
                    f"{f.turn.local_share:.1%} of turns (uncached suffix under "
                    f"{config.router.remote_prefill_threshold()} tokens), "
                    f"{f.turn.local_prefill_tokens:,.0f} tokens per turn on average: "
                    f"{t.local_prefill_s_per_output * 1000:.2f} ms per output token, charged to decode",
                    'rate of `vllm:prompt_tokens_by_source_total{source="local_compute"}` on decode ranks',
                )
            )
        )
    description = plan.model.description if plan.model else None
    if config.serving.roles.decode.mtp_tokens and description and mtp_acceptance(description) is None:
        lines.append(
            _row(
                (
                    "MTP gain",
                    f"none counted: no published MTP acceptance for {description.name} "
                    f"({card_home(config.model.id)}: its family's mtp_acceptance)",
                    "`vllm:spec_decode_num_accepted_tokens_total` / `vllm:spec_decode_num_drafts_total`",
                )
            )
        )
    for name, value in t.ceilings:
        lines.append(
            _row((f"ceiling: {name}", f"{value * 60 / 1e6:,.2f}M output tok/min", _CEILING_LIVE[name]))
        )
    lines += [
        _row(
            (
                "fleet output / input",
                f"{f.output_per_min / 1e6:,.2f}M / {f.input_per_min / 1e6:,.1f}M tok/min; limit: {t.limit}",
                "rate of `vllm:generation_tokens_total` / `vllm:prompt_tokens_total`, summed",
            )
        ),
        _row(
            (
                "headroom vs the declared workload",
                f"{f.headroom:.2f}x ({f.demand_output_per_min / 1e6:,.2f}M output tok/min declared)",
                "bench-summary output tokens/min",
            )
        ),
    ]
    if f.usd_per_m_output is not None and f.usd_per_agent_hour is not None and f.usd_per_m_input is not None:
        lines.append(
            _row(
                (
                    f"cost at ${gpu_hour_usd:g}/GPU-hour x {f.gpus} GPUs",
                    f"${f.usd_per_m_output:,.2f}/M output, ${f.usd_per_m_input:,.3f}/M input, "
                    f"${f.usd_per_agent_hour:,.2f}/agent-hour",
                    "",
                )
            )
        )
    else:
        lines.append(_row(("cost", "not shown: pass --gpu-hour-usd PRICE", "")))
    return "\n".join(lines)


def split_section(config: StackConfig, plan: FleetPlan, cache_hit: float | None = None) -> str:
    """The P:D split as a computed recommendation (plan/split.py); empty when it is not computed."""
    from llmd_fleet.plan.split import by_hit_rate, plan_splits, stack_best_range

    sp = plan_splits(config, plan, cache_hit)
    if sp is None:
        return ""
    shown = list(sp.ranked[:3])
    if sp.stack.label not in {s.label for s in shown}:
        shown.append(sp.stack)
    hit = f"{sp.turn.cache_hit:.1%} prefix-cache hits ({'given' if cache_hit is not None else 'assumed'})"
    lines = [
        "## The P:D split (plan/split.py)",
        "",
        f"The {sp.nodes} `{sp.node_group}` nodes as whole instances ({_nodes(sp.prefill_nodes_per_instance)} "
        f"per prefill, {_nodes(sp.decode_nodes_per_instance)} per decode instance), at {hit}; agents "
        "served = the fewer of what the output capacity feeds and what decode HBM holds "
        "(Little's law, 90%).",
        "",
        "| split | output tok/min | agents by output | agents by decode HBM | agents | binds |",
        "|---|---|---|---|---|---|",
    ]
    for s in shown:
        mark = " (stack)" if s.label == sp.stack.label else (" (best)" if s is sp.best else "")
        lines.append(
            _row(
                (
                    s.label + mark,
                    f"{s.output_per_min / 1e6:,.2f}M",
                    f"{s.agents_by_throughput:,.0f}",
                    f"{s.agents_by_decode_kv:,.0f}",
                    f"{s.agents:,.0f}",
                    s.binds,
                )
            )
        )
    lines += [
        "",
        "| prefix-cache hits | best split | agents | stack's split | agents |",
        "|---|---|---|---|---|",
    ]
    for row in by_hit_rate(config, plan):
        lines.append(
            _row(
                (
                    f"{row.cache_hit:.1%}",
                    row.best.label,
                    f"{row.best.agents:,.0f} ({row.best.binds})",
                    row.stack.label,
                    f"{row.stack.agents:,.0f} ({row.stack.binds})",
                )
            )
        )
    best_range = stack_best_range(config, plan)
    reason = (
        f"{sp.stack.label} serves the most agents from {best_range[0]:.1%} to {best_range[1]:.1%} "
        "prefix-cache hits"
        if best_range
        else f"{sp.stack.label} is the best split at no prefix-cache hit rate up to the declared reuse"
    )
    lines += [
        "",
        f"{reason}. Confirm live: the hit rate is `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries` "
        "on the prefill ranks; `llmd-fleet plan --cache-hit RATE` recomputes the table at it.",
    ]
    return "\n".join(lines)


def canary_section(config: StackConfig, plan: FleetPlan) -> str:
    """The canary's revision, traffic share and surge (serving.canary, docs/day-two.md); empty
    without a canary."""
    canary, settings = plan.canary, config.serving.canary
    if canary is None or settings is None:
        return ""
    from llmd_fleet.layers.serving.canary import revision_summary
    from llmd_fleet.layers.serving.config import canary_name

    roles = " + ".join(f"{r.name} {r.instances}x{r.nodes_per_instance}" for r in canary.roles)
    lines = [
        "## Canary (serving.canary, docs/day-two.md)",
        "",
        "| canary | value |",
        "|---|---|",
        _row(("revision", revision_summary(config, settings))),
        _row(
            (
                "traffic",
                f"{canary.weight}% to {canary_name(config.serving)}, {100 - canary.weight}% to "
                f"{config.serving.name} (HTTPRoute backendRefs weights)",
            )
        ),
        _row(
            (
                "surge",
                f"{roles}: {_nodes(canary.nodes)}, {canary.gpus} GPUs above the stable "
                f"{_nodes(plan.nodes)}, {plan.gpus} GPUs",
            )
        ),
    ]
    from llmd_fleet.layers.router.component import TOKENIZER_REPLICAS
    from llmd_fleet.layers.router.epp_config import epp_cpus

    replicas = settings.router_replicas or config.router.replicas
    cpus = epp_cpus(replace(plan, roles=canary.roles), config.router.expected_requests_per_second)
    lines.append(
        _row(
            (
                "canary router",
                f"{replicas} x ({cpus} CPUs, {plan.router.memory_gib} GiB) endpoint picker and "
                f"{TOKENIZER_REPLICAS} tokenizer replicas, on the CPU nodes",
            )
        )
    )
    for use in plan.node_groups:
        needed = canary.nodes_in(use.name)
        if needed:
            lines.append(
                _row(
                    (
                        f"node group {use.name}",
                        f"{needed} of {canary.spare_nodes[use.name]} spare nodes (count {use.nodes})",
                    )
                )
            )
    return "\n".join(lines)
