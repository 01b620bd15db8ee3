"""Sections of `llmd-fleet plan` that explain the sizing (docs/fleet-scale.md): each a Markdown
table of its own, printed after the role table, each figure beside what confirms it live."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.plan.memory import KV_INDEXER_CONSERVATIVE


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"


def memory_section(config: StackConfig, plan: FleetPlan) -> str:
    """Weights, reserves and KV bytes per token from the model description (plan/memory.py); empty
    when the stack's model has no committed description or nothing is sized from HBM."""
    sizing = plan.model
    roles = [r for r in plan.roles if r.memory.weights is not None and r.memory.reserves is not None]
    if sizing is None or sizing.description is None or sizing.kv is None or not roles:
        return ""
    d, kv = sizing.description, sizing.kv
    lines = [
        f"## Memory per rank from the model ({d.name}, plan/model_card.py) and vLLM 0.33 (plan/memory.py)",
        "",
        _row(("GiB per GPU", *(f"{r.name} (EP {r.expert_parallel})" for r in roles), "confirm live")),
        "|" + "---|" * (len(roles) + 2),
    ]
    weight_rows = (
        ("routed experts / EP", "routed_experts"),
        ("attention, indexers, shared experts, dense MLPs, gates", "non_expert"),
        ("embeddings (bf16)", "embeddings"),
        ("LM head (bf16, shared with MTP)", "lm_head"),
        ("MTP layer", "mtp"),
        ("absorbed-MLA W_UK_T + W_UV (bf16)", "absorbed_mla"),
    )
    for label, attr in weight_rows:
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
        ("sparse-MLA prefill workspace (maxModelLen)", "sparse_workspace"),
        ("top-k index buffers", "topk_indices"),
    )
    for label, attr in reserve_rows:
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
                "sparse-MLA cache (fp8_ds_mla)",
                f"{kv.mla_per_layer} B x {kv.mla_layers} layers ({d.num_hidden_layers} + "
                f"{d.num_nextn_predict_layers} MTP) = {kv.mla_per_layer * kv.mla_layers:,} B",
                "engine log KV cache spec",
            )
        ),
        _row(
            (
                "indexer key cache",
                f"{kv.indexer_per_layer} B x {kv.indexer_layers} layers = "
                f"{kv.indexer_per_layer * kv.indexer_layers:,} B",
                "engine log KV cache spec (count of indexer k_cache layers)",
            )
        ),
        _row(("sized with", f"{kv.total:,} B", "")),
    ]
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
        _row(("model (max_position_embeddings)", f"{sizing.context_window:,}", "plan/model_card.py SOURCES")),
        _row(("served (maxModelLen)", served, "engine log `max_model_len`; `vllm:cache_config_info`")),
    ]
    return "\n".join(lines)
