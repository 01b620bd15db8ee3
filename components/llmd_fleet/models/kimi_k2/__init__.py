"""The Kimi K2 family (moonshotai): Kimi-K2-Instruct."""

from dataclasses import fields
from pathlib import Path

from llmd_fleet.models.card import ModelCard, ModelDescription, ModelFamily, WeightQuantization, no_indexer

# Kimi K2 (1.04T total, 32B active): DeepSeek-V3's architecture with 384 routed experts, 64 heads,
# one leading dense layer and no MTP layer (config.json of moonshotai/Kimi-K2-Instruct,
# architectures DeepseekV3ForCausalLM, model_type kimi_k2; the Kimi K2 report, arXiv 2507.20534,
# table "Architectural comparison with DeepSeek-V3": experts 384, heads 64, dense layers 1).
_K2 = "config.json of moonshotai/Kimi-K2-Instruct (Kimi K2 report, arXiv 2507.20534, architecture table)"

KIMI_K2_INSTRUCT = ModelDescription(
    name="Kimi-K2-Instruct",
    weight_dtype="fp8",
    hidden_size=7168,
    num_hidden_layers=61,
    first_k_dense_replace=1,
    num_attention_heads=64,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    n_routed_experts=384,
    n_shared_experts=1,
    num_experts_per_tok=8,
    vocab_size=163840,
    tie_word_embeddings=False,
    index_n_heads=0,
    index_head_dim=0,
    index_topk=0,
    indexer_layers=0,
    num_nextn_predict_layers=0,
    max_position_embeddings=131072,
    quantization=WeightQuantization(method="fp8", weight_block_size=(128, 128), not_converted=None),
)

KIMI_K2_SOURCES: dict[str, str] = {
    **{f.name: _K2 for f in fields(ModelDescription)},
    "weight_dtype": f"{_K2}: quantization_config fp8 with 128 x 128 weight blocks (block-FP8 release)",
    "quantization": f"{_K2}: quant_method fp8, weight_block_size [128, 128]; modules_to_not_convert not read",
    **no_indexer("Kimi K2 has no DSA indexer (no index_* keys)"),
    "num_nextn_predict_layers": f"{_K2}: num_nextn_predict_layers 0 (no MTP layer shipped)",
    "max_position_embeddings": f"{_K2}: 131072 (128K context)",
}

FAMILY = ModelFamily(
    folder="kimi_k2",
    name="Kimi K2",
    about=(
        "moonshotai's Kimi K2 (Kimi K2 report, arXiv 2507.20534): DeepSeek-V3's architecture with "
        "384 routed experts, 64 heads, one dense layer and no MTP layer (vLLM 0.33 serves it as "
        "DeepseekV3ForCausalLM, model_type kimi_k2)"
    ),
    cards=(
        ModelCard(
            model_id="moonshotai/Kimi-K2-Instruct",
            description=KIMI_K2_INSTRUCT,
            sources=KIMI_K2_SOURCES,
            not_checked=(
                "no copy of moonshotai/Kimi-K2-Instruct's config.json with a repository, path and "
                "commit to cite was found (the checkpoint's repository is not reachable from the "
                "build machines); its card is entered from the Kimi K2 report"
            ),
        ),
    ),
    mtp_acceptance=None,
    directory=Path(__file__).resolve().parent,
)
