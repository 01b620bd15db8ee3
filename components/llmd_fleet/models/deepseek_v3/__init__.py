"""The DeepSeek-V3 family (deepseek-ai): DeepSeek-V3 and DeepSeek-R1, one architecture."""

from dataclasses import fields
from pathlib import Path

from llmd_fleet.models.card import (
    Acceptance,
    ModelCard,
    ModelDescription,
    ModelFamily,
    WeightQuantization,
    no_indexer,
)

# DeepSeek-V3 (671B total, 37B active) and DeepSeek-R1 (the same architecture, post-trained):
# every figure is the checkpoints' config.json (architectures DeepseekV3ForCausalLM, model_type
# deepseek_v3), entered by hand from it; the DeepSeek-V3 technical report (arXiv 2412.19437,
# section 4.2 "Hyper-Parameters") gives the same shape in prose: 61 layers, hidden 7168, 128 heads
# of 128 + 64 RoPE dims, KV compression 512, query compression 1536, the first three layers dense,
# 1 shared + 256 routed experts of 2048 of which 8 active, one MTP module, 671B parameters
# (plus 14B of the MTP module). The quantization_config is fp8 e4m3 with 128 x 128 weight blocks
# (the report's section 3.3 "FP8 Training": 128 x 128 block-wise weight scales).
_V3 = "config.json of deepseek-ai/DeepSeek-V3 (DeepSeek-V3 report, arXiv 2412.19437, section 4.2)"
_V3_NO_DSA = "DeepSeek-V3 has no DSA indexer (DSA arrived with DeepSeek-V3.2; no index_* keys)"


def _deepseek_v3(name: str) -> ModelDescription:
    return ModelDescription(
        name=name,
        weight_dtype="fp8",
        hidden_size=7168,
        num_hidden_layers=61,
        first_k_dense_replace=3,
        num_attention_heads=128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        vocab_size=129280,
        tie_word_embeddings=False,
        index_n_heads=0,
        index_head_dim=0,
        index_topk=0,
        indexer_layers=0,
        num_nextn_predict_layers=1,
        max_position_embeddings=163840,
        quantization=WeightQuantization(method="fp8", weight_block_size=(128, 128), not_converted=None),
    )


DEEPSEEK_V3 = _deepseek_v3("DeepSeek-V3")
DEEPSEEK_R1 = _deepseek_v3("DeepSeek-R1")


def _v3_sources(config: str) -> dict[str, str]:
    return {
        **{f.name: config for f in fields(ModelDescription)},
        "weight_dtype": f"{config}: quantization_config quant_method fp8, 128 x 128 weight blocks",
        "quantization": (
            f"{config}: quant_method fp8, fmt e4m3, weight_block_size [128, 128]; its "
            "modules_to_not_convert was not read, so not_converted is None (plan/kernels.py then "
            "lets the MTP drafter's experts be either)"
        ),
        "q_lora_rank": f"{config}: q_lora_rank 1536",
        **no_indexer(_V3_NO_DSA),
        "num_nextn_predict_layers": f"{config}: one MTP module (the report's section 2.2)",
        "max_position_embeddings": f"{config}: 163840 (YaRN over 4096; the report extends to 128K)",
    }


DEEPSEEK_V3_SOURCES = _v3_sources(_V3)
DEEPSEEK_R1_SOURCES = _v3_sources(
    "config.json of deepseek-ai/DeepSeek-R1 (the DeepSeek-V3 architecture; DeepSeek-R1 report, "
    "arXiv 2501.12948: trained from DeepSeek-V3-Base)"
)

_R1_NOT_CHECKED = (
    "no copy of deepseek-ai/DeepSeek-R1's config.json with a repository, path and commit to cite "
    "was found (the checkpoint's repository is not reachable from the build machines); its card "
    "is DeepSeek-V3's architecture, whose vendored config.json is checked"
)

FAMILY = ModelFamily(
    folder="deepseek_v3",
    name="DeepSeek-V3",
    about=(
        "deepseek-ai's DeepSeek-V3 architecture (DeepSeek-V3 report, arXiv 2412.19437): MLA with "
        "query compression, 1 shared + 256 routed experts, one MTP module, block-FP8 weights; "
        "DeepSeek-R1 (arXiv 2501.12948) is post-trained from DeepSeek-V3-Base on the same "
        "architecture (vLLM 0.33 DeepseekV3ForCausalLM)"
    ),
    cards=(
        ModelCard(
            model_id="deepseek-ai/DeepSeek-V3",
            description=DEEPSEEK_V3,
            sources=DEEPSEEK_V3_SOURCES,
            config_folder="deepseek-v3",
        ),
        ModelCard(
            model_id="deepseek-ai/DeepSeek-R1",
            description=DEEPSEEK_R1,
            sources=DEEPSEEK_R1_SOURCES,
            not_checked=_R1_NOT_CHECKED,
        ),
    ),
    mtp_acceptance=Acceptance(
        0.85,
        "DeepSeek-V3 technical report (arXiv 2412.19437, section 5.4.3): the second token's "
        "acceptance rate 'between 85% and 90%'; the lower end. DeepSeek-R1 keeps DeepSeek-V3's "
        "architecture and MTP layer",
    ),
    directory=Path(__file__).resolve().parent,
)
