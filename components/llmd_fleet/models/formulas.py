"""The KV and weight formulas of a DeepSeek-style MLA + MoE model card (every family under
components/llmd_fleet/models/ is one): parameter counts from the shapes vLLM 0.33 builds and the KV
bytes per token it allocates. Pure; read by the config (a card fills the stack's omitted
architecture keys), the plan (plan/memory.py sizes HBM per rank from them) and the tests.

Every term names the vLLM 0.33 function whose allocation it mirrors (paths relative to the `vllm`
package in the `make check-vllm` environment); docs/fleet-scale.md derives each formula.
"""

from dataclasses import dataclass

from llmd_fleet.models.card import ModelDescription

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


def routed_expert_params(m: ModelDescription) -> int:
    """Parameters of the routed experts of every MoE layer (the MTP layer not counted, as the
    stack's `routedExpertParamsB` does not count it)."""
    return m.moe_layers * param_counts(m).routed_experts_per_moe_layer


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


def active_params(m: ModelDescription) -> int:
    """Parameters one token passes through: all of `total_params` but the routed experts it does
    not activate (num_experts_per_tok of n_routed_experts per MoE layer), embeddings and LM head
    included. Published "active" figures differ on the embeddings (DeepSeek-V3's 37B lies between
    the 36.6B without and 37.6B with them), so the plan only shows it."""
    p = param_counts(m)
    idle = m.n_routed_experts - m.num_experts_per_tok
    return total_params(m) - m.moe_layers * idle * (p.routed_experts_per_moe_layer // m.n_routed_experts)
