"""The DeepSeek-V2 family (deepseek-ai): DeepSeek-V2-Lite-Chat, the quickstart's model."""

from dataclasses import fields
from pathlib import Path

from llmd_fleet.models.card import ModelCard, ModelDescription, ModelFamily, WeightQuantization, no_indexer

# The quickstart's model (stacks/Pulumi.quickstart-h100.yaml): DeepSeek-V2-Lite-Chat, 15.7B
# parameters (2.4B active) in bf16, the smallest public MLA + MoE checkpoint vLLM serves with the
# same wide-EP, P/D and KV-tier path as GLM-5.2. Every figure is the checkpoint's config.json
# (deepseek-ai/DeepSeek-V2-Lite-Chat, architectures DeepseekV2ForCausalLM); the DeepSeek-V2 paper
# (arXiv 2405.04434, appendix "DeepSeek-V2-Lite") gives the same shape in prose: 27 layers, hidden
# 2048, 16 heads, KV compression 512, no query compression, 2 shared + 64 routed experts of which
# 6 active, the first layer dense, 15.7B total parameters.
_V2_LITE = "config.json of deepseek-ai/DeepSeek-V2-Lite-Chat (DeepSeek-V2 paper, DeepSeek-V2-Lite appendix)"
_NO_DSA = "DeepSeek-V2 has no DSA indexer (DeepseekV2ForCausalLM; its config.json has no index_* keys)"

DEEPSEEK_V2_LITE_CHAT = ModelDescription(
    name="DeepSeek-V2-Lite-Chat",
    weight_dtype="bf16",
    hidden_size=2048,
    num_hidden_layers=27,
    first_k_dense_replace=1,
    num_attention_heads=16,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    intermediate_size=10944,
    moe_intermediate_size=1408,
    n_routed_experts=64,
    n_shared_experts=2,
    num_experts_per_tok=6,
    vocab_size=102400,
    tie_word_embeddings=False,
    index_n_heads=0,
    index_head_dim=0,
    index_topk=0,
    indexer_layers=0,
    num_nextn_predict_layers=0,
    max_position_embeddings=163840,
    quantization=WeightQuantization(method=None),
)

V2_LITE_SOURCES: dict[str, str] = {
    **{f.name: _V2_LITE for f in fields(ModelDescription)},
    "name": "the checkpoint deepseek-ai/DeepSeek-V2-Lite-Chat",
    "weight_dtype": "config.json torch_dtype bfloat16, no quantization_config (bf16 safetensors)",
    "quantization": "config.json has no quantization_config: every weight is bf16 (unquantized)",
    "q_lora_rank": f"{_V2_LITE}: q_lora_rank null (a full q_proj)",
    **no_indexer(_NO_DSA),
    "num_nextn_predict_layers": (
        "DeepSeek-V2 ships no MTP layer (MTP arrived with DeepSeek-V3); serve with mtpTokens 0"
    ),
    "max_position_embeddings": (
        f"{_V2_LITE}: 163840 with YaRN rope_scaling (factor 40 over 4096); the paper trains Lite to "
        "32K, which is why the quickstart serves maxModelLen 32768"
    ),
}

FAMILY = ModelFamily(
    folder="deepseek_v2",
    name="DeepSeek-V2",
    about=(
        "deepseek-ai's DeepSeek-V2 line: MLA + DeepSeekMoE without a DSA indexer or MTP layer "
        "(DeepSeek-V2 paper, arXiv 2405.04434; vLLM 0.33 DeepseekV2ForCausalLM)"
    ),
    cards=(
        ModelCard(
            model_id="deepseek-ai/DeepSeek-V2-Lite-Chat",
            description=DEEPSEEK_V2_LITE_CHAT,
            sources=V2_LITE_SOURCES,
            config_folder="deepseek-v2-lite-chat",
        ),
    ),
    mtp_acceptance=None,
    directory=Path(__file__).resolve().parent,
)
