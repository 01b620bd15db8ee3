"""HBM per rank from the model description and the pinned engine (vLLM 0.33). Pure.

Every term names the vLLM 0.33 function whose allocation it mirrors (paths relative to the
`vllm` package in the `make check-vllm` environment). docs/fleet-scale.md derives each formula.

Layout assumed: DP attention with expert parallelism (llm-d wide EP): every DP rank holds all
non-expert weights (split only by tensor parallelism) and 1/EP of the routed experts; each rank
holds the KV of its own sequences whole.
"""

from dataclasses import dataclass

from llmd_fleet.config.model import ModelConfig
from llmd_fleet.core.problems import PROJECT
from llmd_fleet.models import ModelDescription, card_home, description_for
from llmd_fleet.models.formulas import (  # the card's formulas, re-exported for the plan
    FP8_DS_MLA_BYTES,
    INDEXER_QUANT_BLOCK,
    KV_INDEXER_CONSERVATIVE,
    KvBytesPerToken,
    ParamCounts,
    active_params,
    kv_bytes_per_token,
    param_counts,
    routed_expert_params,
    total_params,
)

__all__ = [
    "FP8_DS_MLA_BYTES",
    "INDEXER_QUANT_BLOCK",
    "KV_INDEXER_CONSERVATIVE",
    "KvBytesPerToken",
    "ParamCounts",
    "active_params",
    "kv_bytes_per_token",
    "param_counts",
    "routed_expert_params",
    "total_params",
]

GIB = 1024**3

# fp8 checkpoints are block-quantized: one float32 scale per 128 x 128 weight block
# (Fp8LinearMethod / Fp8MoEMethod weight_scale_inv), 4 bytes per 16,384 parameters.
FP8_BYTES_PER_PARAM = 1 + 4 / (128 * 128)
BF16_BYTES = 2
# Activation dtype of the absorbed-MLA matrices (model dtype bfloat16).
ACT_BYTES = 2

# vllm/config/vllm.py VllmConfig.__post_init__: sparse_mla_prefill_workspace_factor defaults to 5
# when max_model_len <= 256K tokens, else 2. FlashMLA sparse gathers a prefill step's context KV
# into factor x max_model_len rows of 576 bf16 values (1,152 B); the indexer's prefill K buffer
# (vllm/v1/attention/backends/mla/indexer.py get_max_prefill_buffer_size) is sized to fit within
# the same bytes, so the workspace is counted once.
SPARSE_WORKSPACE_ROW_BYTES = 576 * 2
SPARSE_WORKSPACE_LONG_CONTEXT = 256 * 1024
# vllm/engine/arg_utils.py EngineArgs._set_default_args: the API server's max_num_batched_tokens
# on H100/H200-class GPUs (>= 70 GiB, not A100) when --max-num-batched-tokens is not given.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
TOPK_INDEX_BYTES = 4  # int32


@dataclass(frozen=True)
class WeightsPerRank:
    """Weight bytes resident on one rank, by part (GiB)."""

    routed_experts: float
    """Routed experts of the MoE layers / EP (FusedMoE with expert parallelism)."""
    non_expert: float
    """Attention, indexers, shared experts, dense MLPs, router gates, on every DP rank (/ TP)."""
    embeddings: float
    """bf16 input embeddings (VocabParallelEmbedding, / TP)."""
    lm_head: float
    """bf16 LM head (ParallelLMHead, / TP); the MTP layer shares it."""
    mtp: float
    """The MTP layer: one decoder layer (attention, indexer, shared expert, gate, routed experts /
    EP) plus eh_proj; embed_tokens and the head are shared with the target."""
    absorbed_mla: float
    """bf16 W_UK_T and W_UV kept next to kv_b_proj on every MLA layer, MTP included."""

    @property
    def total(self) -> float:
        return (
            self.routed_experts
            + self.non_expert
            + self.embeddings
            + self.lm_head
            + self.mtp
            + self.absorbed_mla
        )

    @property
    def replicated(self) -> float:
        """Everything but the routed experts (the MTP layer's experts are counted in `mtp`)."""
        return self.total - self.routed_experts


def weights_per_rank(
    m: ModelDescription,
    tensor_parallel: int,
    expert_parallel: int,
    mtp: bool = True,
    redundant_experts: int = 0,
) -> WeightsPerRank:
    """Weight bytes on one rank under DP attention + EP.

    - routed experts: FusedMoE shards the experts of every MoE layer over EP ranks
      (vllm/model_executor/layers/fused_moe/layer.py FusedMoE, determine_expert_map); fp8 + scales.
      With EPLB's `redundant_experts` N every MoE layer, the MTP layer's too, holds n_routed + N
      physical experts (DeepseekV2MoE n_physical_experts = n_logical + num_redundant_experts), so
      a rank holds (n_routed + N) / EP of them.
    - non-expert: every DP rank loads the attention, the indexers that exist, the shared experts,
      the dense MLPs and the router gates (GateLinear, bf16 weight); TP splits them.
    - embeddings and LM head stay bf16 in the FP8 checkpoint (unquantized in its
      quantization_config ignore list); DeepseekV32Model.__init__ make_input_embedding and the
      LM head of DeepseekV2ForCausalLM.
    - MTP: vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer builds one
      DeepseekV2DecoderLayer (mtp_block), eh_proj and SharedHead; _rewrite_spec_layer_name maps its
      embed_tokens to the target's and LlmBaseProposer._maybe_share_lm_head shares the head.
      eh_proj is counted in bf16 (its checkpoint dtype is not in our sources; bf16 is the larger).
    - absorbed MLA: MLAAttention.process_weights_after_loading (split_kv_b_proj) dequantizes
      kv_b_proj into W_UK_T and W_UV in the activation dtype and keeps kv_b_proj (only the AMX
      path frees it).
    """
    p = param_counts(m)
    # A bf16 checkpoint (DeepSeek-V2-Lite) loads every "fp8" part below at 2 bytes.
    fp8 = FP8_BYTES_PER_PARAM if m.weight_dtype == "fp8" else BF16_BYTES
    tp = tensor_parallel
    # Physical experts over the EP ranks: the routed experts' bytes scale by (n + N) / n.
    ep = expert_parallel * m.n_routed_experts / (m.n_routed_experts + redundant_experts)
    routed = m.moe_layers * p.routed_experts_per_moe_layer * fp8 / ep
    attention_fp8 = m.num_hidden_layers * p.attention_per_layer + m.indexer_layers * p.indexer_fp8_per_layer
    mlp_fp8 = m.moe_layers * p.shared_experts_per_moe_layer + m.first_k_dense_replace * p.dense_mlp_per_layer
    bf16 = m.indexer_layers * p.indexer_bf16_per_layer + m.moe_layers * p.gate_per_moe_layer
    non_expert = ((attention_fp8 + mlp_fp8) * fp8 + bf16 * BF16_BYTES) / tp
    # mtpTokens 0: vLLM builds no drafter, so the MTP layer is neither loaded nor cached.
    mtp_layers = m.num_nextn_predict_layers if mtp else 0
    mtp_bytes = mtp_layers * (
        (p.attention_per_layer + p.indexer_fp8_per_layer + p.shared_experts_per_moe_layer) * fp8 / tp
        + (p.indexer_bf16_per_layer + p.gate_per_moe_layer + p.mtp_eh_proj) * BF16_BYTES / tp
        + p.routed_experts_per_moe_layer * fp8 / ep
    )
    absorbed = (m.num_hidden_layers + mtp_layers) * p.kv_b_per_layer * ACT_BYTES / tp
    return WeightsPerRank(
        routed_experts=routed / GIB,
        non_expert=non_expert / GIB,
        embeddings=p.embeddings * BF16_BYTES / tp / GIB,
        lm_head=p.lm_head * BF16_BYTES / tp / GIB,
        mtp=mtp_bytes / GIB,
        absorbed_mla=absorbed / GIB,
    )


def sparse_prefill_workspace_gib(max_model_len: int) -> float:
    """FlashMLA-sparse prefill workspace (factor x max_model_len rows of 1,152 B), see the constants."""
    factor = 5 if max_model_len <= SPARSE_WORKSPACE_LONG_CONTEXT else 2
    return factor * max_model_len * SPARSE_WORKSPACE_ROW_BYTES / GIB


def topk_indices_gib(m: ModelDescription, max_num_batched_tokens: int | None) -> float:
    """The shared top-k buffer, max_num_batched_tokens x index_topk int32, one for the model
    (DeepseekV32Model.__init__) and one for the MTP layer (DeepSeekMultiTokenPredictorLayer)."""
    tokens = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    return (1 + m.num_nextn_predict_layers) * tokens * m.index_topk * TOPK_INDEX_BYTES / GIB


@dataclass(frozen=True)
class Reserves:
    """HBM per rank held before the KV cache (GiB)."""

    runtime: float
    """`runtimeReserveGiB`: the activation peak of the profile run and the CUDA graphs
    (Worker.determine_available_memory: transient_peak_headroom + profile_cudagraph_memory)."""
    nvshmem: float
    """`nvshmemHeapGiB`: DeepEP's NVSHMEM symmetric heap, allocated outside torch."""
    sparse_workspace: float
    """FlashMLA-sparse prefill workspace, grows with maxModelLen."""
    topk_indices: float

    @property
    def total(self) -> float:
        return self.runtime + self.nvshmem + self.sparse_workspace + self.topk_indices


def reserves(
    m: ModelDescription,
    runtime_gib: float,
    nvshmem_gib: float,
    max_model_len: int,
    max_num_batched_tokens: int | None,
    dual_batch_overlap: bool = False,
) -> Reserves:
    """The reserves of one rank. With dual-batch overlap vLLM 0.33 keeps one workspace slot per
    micro-batch (v1/worker/gpu_worker.py `_init_workspace_and_model_runner`: num_ubatches 2 with
    enable_dbo; v1/worker/workspace.py caches a buffer per ubatch), and the sparse-MLA prefill
    workspace is drawn from it (flashmla_sparse.py `current_workspace_manager`), so it counts twice."""
    slots = 2 if dual_batch_overlap else 1
    return Reserves(
        runtime=runtime_gib,
        nvshmem=nvshmem_gib,
        sparse_workspace=slots * sparse_prefill_workspace_gib(max_model_len) if m.sparse_attention else 0.0,
        topk_indices=topk_indices_gib(m, max_num_batched_tokens),
    )


@dataclass(frozen=True)
class ModelSizing:
    """What the plan sizes the model with, and where each figure comes from."""

    description: ModelDescription | None
    """The committed description (models/), None for a model without one."""
    kv: KvBytesPerToken | None
    kv_bytes_per_token: int
    """Bytes per token the plan sizes KV with: the derived (conservative) figure with a
    description, else the stack's `model.kvBytesPerToken`."""
    context_window: int
    """The model's context window: max_position_embeddings of the description, else the stack's
    `model.maxContextTokens`."""
    source: str
    """'model card' or 'stack config'."""


def card_contradictions(model: ModelConfig, description: ModelDescription) -> list[tuple[str, str]]:
    """A problem for each hand-entered architecture figure of the stack that contradicts the
    committed description: integers and the weight format exactly, parameter counts within 1%.
    Each names the key and the card's value."""
    path = f"{PROJECT}:model"
    source = f"{description.name}'s model card ({card_home(model.id)})"
    exact: list[tuple[str, object, object, str]] = [
        ("weightDtype", model.weight_dtype.value, description.weight_dtype, "weight_dtype"),
        ("layers", model.layers, description.num_hidden_layers, "num_hidden_layers"),
        ("experts", model.experts, description.n_routed_experts, "n_routed_experts"),
        ("expertsPerToken", model.experts_per_token, description.num_experts_per_tok, "num_experts_per_tok"),
    ]
    problems = [
        (
            f"{path}.{key}",
            f"{given} contradicts {source}: {field} is {card}; set {key}: {card}",
        )
        for key, given, card, field in exact
        if given != card
    ]
    routed = routed_expert_params(description) / 1e9
    if abs(model.routed_expert_params_b - routed) > 0.01 * routed:
        problems.append(
            (
                f"{path}.routedExpertParamsB",
                f"{model.routed_expert_params_b:g} is more than 1% off the {routed:.1f}B routed-expert "
                f"parameters counted from {source} (plan/memory.py routed_expert_params)",
            )
        )
    return problems


def model_sizing(model: ModelConfig) -> tuple[ModelSizing, list[tuple[str, str]]]:
    """The model's sizing figures, and a problem for each hand-entered figure of the stack that
    disagrees with the committed description (kvBytesPerToken below what vLLM allocates, a
    different maxContextTokens, a totalParamsB more than 1% off the counted parameters)."""
    description = description_for(model.id)
    if description is None:
        return (
            ModelSizing(None, None, model.kv_bytes_per_token, model.max_context_tokens, "stack config"),
            [],
        )
    kv = kv_bytes_per_token(description, model.kv_cache_dtype)
    path = f"{PROJECT}:model"
    problems: list[tuple[str, str]] = []
    if model.kv_bytes_per_token < kv.total:
        problems.append(
            (
                f"{path}.kvBytesPerToken",
                f"{model.kv_bytes_per_token} is below what vLLM 0.33 allocates for {description.name}: "
                f"{kv.total} = {kv.mla_per_layer} B MLA x {kv.mla_layers} layers + "
                f"{kv.indexer_per_layer} B indexer x {kv.indexer_layers} layers "
                "(plan/memory.py kv_bytes_per_token); set it to at least that",
            )
        )
    if model.max_context_tokens != description.max_position_embeddings:
        problems.append(
            (
                f"{path}.maxContextTokens",
                f"{model.max_context_tokens} is not {description.name}'s context window "
                f"{description.max_position_embeddings} (max_position_embeddings, {card_home(model.id)})",
            )
        )
    counted = total_params(description) / 1e9
    if abs(model.total_params_b - counted) > 0.01 * counted:
        problems.append(
            (
                f"{path}.totalParamsB",
                f"{model.total_params_b:g} is more than 1% off the {counted:.1f}B parameters counted "
                f"from {description.name}'s description (plan/memory.py total_params)",
            )
        )
    problems += card_contradictions(model, description)
    sizing = ModelSizing(description, kv, kv.total, description.max_position_embeddings, "model card")
    return sizing, problems
