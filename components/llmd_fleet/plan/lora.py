"""HBM the LoRA adapters of a model take on each engine rank: vLLM 0.33 allocates, at start,
`--max-loras` slots of `--max-lora-rank` for every layer it wraps, whether or not an adapter
fills them. Pure.

Per slot and per unit of rank, a wrapped linear layer of input width `in` and output width `out`
holds an A matrix (rank x in) and a B matrix (out x rank): `in + out` elements; a merged layer
(gate_up_proj) holds one A and one B per slice (vllm/lora/layers/column_parallel_linear.py
MergedColumnParallelLinearWithLoRA). A fused MoE layer holds, per local expert, the same for its
w1, w3 (hidden -> moe_intermediate) and w2 (moe_intermediate -> hidden) (vllm/lora/layers/
fused_moe.py FusedMoEWithLoRA.create_lora_weights); with expert parallelism only the rank's own
experts. Counted for a DeepSeek-style model (models/card.py ModelDescription), every
attention projection included (q or q_a/q_b, kv_a_proj_with_mqa, kv_b_proj, o_proj), the dense
and shared-expert MLPs and the routed experts: an upper bound where vLLM leaves a projection
unwrapped. The adapters' dtype is the model's activation dtype (`lora_dtype` auto,
vllm/config/lora.py): 2 bytes (bf16) for both bf16 and fp8 checkpoints. Tensor parallelism is
not divided out (an upper bound for TP > 1).
"""

from llmd_fleet.models import ModelDescription

LORA_BYTES = 2
"""bf16: vLLM's `lora_dtype` auto takes the model's dtype (activations are bf16 for fp8 weights)."""
GIB = 1024**3


def lora_elements_per_rank_unit(d: ModelDescription, expert_parallel: int) -> int:
    """Elements per slot per unit of LoRA rank on one engine rank."""
    h, heads = d.hidden_size, d.num_attention_heads
    qk_head = d.qk_nope_head_dim + d.qk_rope_head_dim
    if d.q_lora_rank is None:
        query = h + heads * qk_head
    else:
        query = (h + d.q_lora_rank) + (d.q_lora_rank + heads * qk_head)
    attention = (
        query
        + (h + d.kv_lora_rank + d.qk_rope_head_dim)  # kv_a_proj_with_mqa
        + (d.kv_lora_rank + heads * (d.qk_nope_head_dim + d.v_head_dim))  # kv_b_proj
        + (heads * d.v_head_dim + h)  # o_proj
    )

    def mlp(width: int) -> int:
        # gate_up_proj: two slices of (h -> width); down_proj: width -> h.
        return 2 * (h + width) + (width + h)

    dense = mlp(d.intermediate_size)
    shared = mlp(d.n_shared_experts * d.moe_intermediate_size) if d.n_shared_experts else 0
    local_experts = -(-d.n_routed_experts // max(1, expert_parallel))
    routed = local_experts * mlp(d.moe_intermediate_size)
    dense_layers = d.first_k_dense_replace
    moe_layers = d.num_hidden_layers - dense_layers
    return dense_layers * (attention + dense) + moe_layers * (attention + shared + routed)


def lora_gib_per_rank(d: ModelDescription, slots: int, max_rank: int, expert_parallel: int) -> float:
    """GiB of HBM `slots` LoRA slots of rank `max_rank` take on one engine rank."""
    return lora_elements_per_rank_unit(d, expert_parallel) * max_rank * slots * LORA_BYTES / GIB
