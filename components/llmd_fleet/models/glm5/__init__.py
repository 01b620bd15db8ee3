"""The GLM-5 family (zai-org): GLM-5.2-FP8, the reference stacks' model.

Sources are named per field in `SOURCES`. "transformers GlmMoeDsaConfig" means the class defaults
of transformers 5.20.2 (`transformers/models/glm_moe_dsa/configuration_glm_moe_dsa.py`, the version
the pinned vLLM 0.33 environment of `make check-vllm` installs), which the class documents as the
`zai-org/GLM-5` checkpoint's values. GLM-5.2 keeps the GLM-5 architecture (vLLM 0.33 serves both
as `GlmMoeDsaForCausalLM` through `vllm/models/deepseek_v32`); the fields GLM-5.2 changed (the
context window, the shared indexer) have their own sources. Check the deployed checkpoint's
config.json against this table before trusting a figure (docs/fleet-scale.md).
"""

from pathlib import Path

from llmd_fleet.models.card import (
    Acceptance,
    ModelCard,
    ModelDescription,
    ModelFamily,
    WeightQuantization,
    acceptance_from_tokens_per_step,
)

_TRANSFORMERS = "transformers 5.20.2 GlmMoeDsaConfig default (the zai-org/GLM-5 values)"

GLM_5_2_FP8 = ModelDescription(
    name="GLM-5.2-FP8",
    weight_dtype="fp8",
    hidden_size=6144,
    num_hidden_layers=78,
    first_k_dense_replace=3,
    num_attention_heads=64,
    q_lora_rank=2048,
    kv_lora_rank=512,
    qk_nope_head_dim=192,
    qk_rope_head_dim=64,
    v_head_dim=256,
    intermediate_size=12288,
    moe_intermediate_size=2048,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    vocab_size=154880,
    tie_word_embeddings=False,
    index_n_heads=32,
    index_head_dim=128,
    index_topk=2048,
    indexer_layers=21,
    num_nextn_predict_layers=1,
    max_position_embeddings=1_048_576,
    quantization=WeightQuantization(method="fp8", weight_block_size=(128, 128), not_converted=None),
)

SOURCES: dict[str, str] = {
    "name": "the checkpoint zai-org/GLM-5.2-FP8 (fp8 block-quantized weights, bf16 embeddings and LM head)",
    "weight_dtype": "the checkpoint name and its quantization_config (fp8, 128 x 128 weight blocks)",
    "quantization": (
        "quant_method fp8 with 128 x 128 weight blocks: the checkpoint name and the wide-EP guide that "
        "serves it with DeepGEMM's block-FP8 grouped GEMM. Its modules_to_not_convert could not be read "
        "(no readable config.json of the checkpoint), so not_converted is None: any layer, the MTP "
        "drafter's experts included, may be unquantized, and plan/kernels.py chooses accordingly"
    ),
    "hidden_size": _TRANSFORMERS,
    "num_hidden_layers": _TRANSFORMERS,
    "first_k_dense_replace": _TRANSFORMERS,
    "num_attention_heads": _TRANSFORMERS,
    "q_lora_rank": _TRANSFORMERS,
    "kv_lora_rank": _TRANSFORMERS,
    "qk_nope_head_dim": _TRANSFORMERS,
    "qk_rope_head_dim": _TRANSFORMERS,
    "v_head_dim": _TRANSFORMERS,
    "intermediate_size": _TRANSFORMERS,
    "moe_intermediate_size": _TRANSFORMERS,
    "n_routed_experts": _TRANSFORMERS,
    "n_shared_experts": _TRANSFORMERS,
    "num_experts_per_tok": _TRANSFORMERS,
    "vocab_size": _TRANSFORMERS,
    "tie_word_embeddings": _TRANSFORMERS,
    "index_n_heads": _TRANSFORMERS,
    "index_head_dim": _TRANSFORMERS,
    "index_topk": _TRANSFORMERS,
    "indexer_layers": (
        "issue #31 ('cache on 21 of 78, per the model's config'); consistent with IndexShare 'a fresh "
        "indexer once every four sparse layers' (Lambda's GLM-5.2 model page), i.e. index_topk_freq 4 "
        "with vLLM's default index_skip_topk_offset 2, which DeepseekV32Attention.__init__ turns into "
        "indexers on layers 0, 1, 5, 9, ..., 77 = 21 layers. UNVERIFIED against the checkpoint's "
        "config.json: if it spells the schedule in a key vLLM 0.33 does not read (transformers' "
        "`indexer_types`), vLLM builds an indexer on every layer; the plan therefore sizes KV as if it "
        "did (plan/memory.py KV_INDEXER_CONSERVATIVE)"
    ),
    "num_nextn_predict_layers": (
        "one MTP layer (GLM-5 / DeepSeek-V3 layout; vLLM's DeepSeekMTP reads num_nextn_predict_layers "
        "and reuses the one layer for every speculative token); UNVERIFIED for GLM-5.2"
    ),
    "max_position_embeddings": (
        "1,048,576: the vLLM recipes page for zai-org/GLM-5.2 (H200 view: '1,048,576 ctx', 'a native "
        "1M-token window') and Phala's GLM-5.2 deployment note ('a 1,048,576-token window'). The recipes "
        "page's default view shows '1,024,000 ctx'; we take 1,048,576 = 2^20 because two independent "
        "sources give it and the 1,024,000 figure is a rounded display. The transformers default "
        "(202,752) is GLM-5/5.1's window, not GLM-5.2's"
    ),
}

FAMILY = ModelFamily(
    folder="glm5",
    name="GLM-5",
    about=(
        "zai-org's GLM-5 line: DeepSeek-V3.2's MLA + MoE layout with a DSA sparse-attention "
        "indexer and one MTP layer (vLLM 0.33 GlmMoeDsaForCausalLM)"
    ),
    cards=(
        ModelCard(
            model_id="zai-org/GLM-5.2-FP8",
            description=GLM_5_2_FP8,
            sources=SOURCES,
            config_folder="glm-5.2-fp8",
        ),
    ),
    mtp_acceptance=Acceptance(
        acceptance_from_tokens_per_step(2.95, 3),
        "llm-d's 64 x H200 GLM-5.2 study: ~2.95 tokens per step with 3 speculative tokens, so "
        "1 + a + a^2 + a^3 = 2.95",
    ),
    directory=Path(__file__).resolve().parent,
)
