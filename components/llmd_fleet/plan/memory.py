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

GIB = 1024**3

# fp8 checkpoints are block-quantized: one float32 scale per 128 x 128 weight block
# (Fp8LinearMethod / Fp8MoEMethod weight_scale_inv), 4 bytes per 16,384 parameters.
FP8_BYTES_PER_PARAM = 1 + 4 / (128 * 128)
BF16_BYTES = 2
# Activation dtype of the absorbed-MLA matrices (model dtype bfloat16).
ACT_BYTES = 2

# KV cache layouts (vllm/model_executor/layers/attention/mla_attention.py):
# MLAAttention.get_kv_cache_spec: with a quantized --kv-cache-dtype the FLASHMLA_SPARSE backend
# stores `fp8_ds_mla` (_canonicalize_sparse_mla_kv_cache_dtype), a packed row of
# state_content_bytes = 656 per token per layer: 512 fp8 NoPE + 16 B of four float32 scales +
# 64 bf16 RoPE (layout comment in vllm/v1/attention/backends/mla/flashmla_sparse.py).
FP8_DS_MLA_BYTES = 656
# Indexer key cache (vllm/models/deepseek_v32/attention.py DeepseekV32Indexer.__init__): uint8
# rows of head_dim + head_dim // quant_block_size * 4 (128 fp8 + one float32 scale per 128), one
# vector per token (DeepseekV32IndexerCache.get_kv_cache_spec: MLAAttentionSpec, head_size_v 0).
INDEXER_QUANT_BLOCK = 128
# Size the indexer cache as if vLLM built an indexer on every layer (see models/glm5 SOURCES
# "indexer_layers"): DeepseekV32Attention.__init__ builds one only where `not skip_topk or
# is_mtp_layer`, with skip_topk from the config's index_topk_freq / index_skip_topk_offset /
# index_topk_pattern; a checkpoint whose config spells the schedule otherwise gets one on every
# layer. Conservative until a GPU start logs the KV cache spec.
KV_INDEXER_CONSERVATIVE = True

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
class ParamCounts:
    """Parameters of the model by where they live (counts, not bytes)."""

    attention_per_layer: int
    """MLA projections of one layer: q_a, q_b, kv_a (with MQA RoPE key), kv_b, o."""
    kv_b_per_layer: int
    """kv_b_proj alone (W_UK and W_UV concatenated), which vLLM also keeps absorbed in bf16."""
    indexer_fp8_per_layer: int
    """DSA indexer wq_b (quantized)."""
    indexer_bf16_per_layer: int
    """DSA indexer wk + weights_proj (built with quant_config=None: bf16)."""
    shared_experts_per_moe_layer: int
    gate_per_moe_layer: int
    routed_experts_per_moe_layer: int
    dense_mlp_per_layer: int
    embeddings: int
    lm_head: int
    mtp_eh_proj: int


def param_counts(m: ModelDescription) -> ParamCounts:
    """Parameter counts per component, from the shapes vLLM builds
    (vllm/model_executor/models/deepseek_v2.py DeepseekV2MLAAttention / DeepseekV2MoE /
    DeepseekV2MLP, vllm/models/deepseek_v32/attention.py DeepseekV32Indexer)."""
    h = m.hidden_size
    q_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    kv_b = m.kv_lora_rank * m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim)
    if m.q_lora_rank is None:
        query = h * m.num_attention_heads * q_head  # q_proj (DeepSeek-V2-Lite)
    else:
        query = h * m.q_lora_rank + m.q_lora_rank * m.num_attention_heads * q_head  # q_a, q_b
    attention = (
        query
        + h * (m.kv_lora_rank + m.qk_rope_head_dim)  # kv_a_proj_with_mqa
        + kv_b  # kv_b_proj
        + m.num_attention_heads * m.v_head_dim * h  # o_proj
    )
    return ParamCounts(
        attention_per_layer=attention,
        kv_b_per_layer=kv_b,
        indexer_fp8_per_layer=(m.q_lora_rank or 0) * m.index_n_heads * m.index_head_dim,
        indexer_bf16_per_layer=h * (m.index_head_dim + m.index_n_heads),
        shared_experts_per_moe_layer=m.n_shared_experts * 3 * h * m.moe_intermediate_size,
        gate_per_moe_layer=m.n_routed_experts * h,
        routed_experts_per_moe_layer=m.n_routed_experts * 3 * h * m.moe_intermediate_size,
        dense_mlp_per_layer=3 * h * m.intermediate_size,
        embeddings=m.vocab_size * h,
        lm_head=0 if m.tie_word_embeddings else m.vocab_size * h,
        mtp_eh_proj=2 * h * h,
    )


def total_params(m: ModelDescription) -> int:
    """All parameters including the MTP layer (the model card's ~744B counts the main model)."""
    p = param_counts(m)
    layers = m.num_hidden_layers
    return (
        layers * p.attention_per_layer
        + m.indexer_layers * (p.indexer_fp8_per_layer + p.indexer_bf16_per_layer)
        + m.moe_layers
        * (p.shared_experts_per_moe_layer + p.gate_per_moe_layer + p.routed_experts_per_moe_layer)
        + m.first_k_dense_replace * p.dense_mlp_per_layer
        + p.embeddings
        + p.lm_head
    )


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


@dataclass(frozen=True)
class KvBytesPerToken:
    """KV-cache bytes one token occupies on a rank, by layer kind."""

    mla_per_layer: int
    mla_layers: int
    """Decoder layers plus MTP layers: every one has an MLA cache."""
    indexer_per_layer: int
    indexer_layers: int
    """Layers sized with an indexer cache (all of them when KV_INDEXER_CONSERVATIVE)."""
    indexer_layers_expected: int
    """Layers the model config says carry an indexer (plus MTP)."""

    @property
    def total(self) -> int:
        return self.mla_per_layer * self.mla_layers + self.indexer_per_layer * self.indexer_layers

    @property
    def expected(self) -> int:
        """Bytes per token if vLLM allocates the indexer cache only where the config puts one."""
        return self.mla_per_layer * self.mla_layers + self.indexer_per_layer * self.indexer_layers_expected


def kv_bytes_per_token(
    m: ModelDescription, kv_cache_dtype: str, conservative: bool = KV_INDEXER_CONSERVATIVE, mtp: bool = True
) -> KvBytesPerToken:
    """KV bytes per token, mirroring the specs vLLM 0.33 groups into one UniformTypeKVCacheSpecs
    (vllm/v1/core/kv_cache_planning.py get_kv_cache_groups; its page_size_bytes is the sum over
    layers): MLAAttention.get_kv_cache_spec on every MLA layer, DeepseekV32IndexerCache.get_kv_cache_spec
    on every indexer layer, the MTP layer included (its attention is built with an indexer)."""
    # kvCacheDtype auto: bf16 latent + RoPE key, (kv_lora_rank + qk_rope_head_dim) x 2 bytes.
    # kvCacheDtype fp8 without DSA (dense MLA): the same latent + RoPE key, one byte each.
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    fp8_row = FP8_DS_MLA_BYTES if m.sparse_attention else latent
    mla = fp8_row if kv_cache_dtype == "fp8" else latent * 2
    indexer = m.index_head_dim + m.index_head_dim // INDEXER_QUANT_BLOCK * 4
    mtp_layers = m.num_nextn_predict_layers if mtp else 0  # mtpTokens 0: no MTP layer, no cache
    expected = m.indexer_layers + mtp_layers
    return KvBytesPerToken(
        mla_per_layer=mla,
        mla_layers=m.num_hidden_layers + mtp_layers,
        indexer_per_layer=indexer,
        indexer_layers=(m.num_hidden_layers + mtp_layers if conservative else expected)
        if m.sparse_attention
        else 0,
        indexer_layers_expected=expected,
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


def routed_expert_params(m: ModelDescription) -> int:
    """Parameters of the routed experts of every MoE layer (the MTP layer not counted, as the
    stack's `routedExpertParamsB` does not count it)."""
    return m.moe_layers * param_counts(m).routed_experts_per_moe_layer


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
