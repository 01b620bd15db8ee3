"""Committed model descriptions: the config.json facts the plan sizes memory from, each with its source.

A description is keyed by the stack's `model.id`. When the stack serves a model that has one, the
plan derives weights per rank, KV bytes per token and the context window from it (plan/memory.py)
instead of the stack's hand-entered `totalParamsB` / `kvBytesPerToken` / `maxContextTokens`, and
refuses a stack whose hand-entered figures disagree with it. A model without a description is
sized from those fields as before.

Sources are named per field in `SOURCES`. "transformers GlmMoeDsaConfig" means the class defaults
of transformers 5.20.2 (`transformers/models/glm_moe_dsa/configuration_glm_moe_dsa.py`, the version
the pinned vLLM 0.33 environment of `make check-vllm` installs), which the class documents as the
`zai-org/GLM-5` checkpoint's values. GLM-5.2 keeps the GLM-5 architecture (vLLM 0.33 serves both
as `GlmMoeDsaForCausalLM` through `vllm/models/deepseek_v32`); the fields GLM-5.2 changed (the
context window, the shared indexer) have their own sources. Check the deployed checkpoint's
config.json against this table before trusting a figure (docs/fleet-scale.md).
"""

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class WeightQuantization:
    """The checkpoint's `quantization_config` (config.json), as far as the MoE kernel choice needs it
    (plan/kernels.py): which method quantized the weights and which modules it left alone."""

    method: str | None
    """`quant_method` (`fp8`), None for an unquantized (bf16) checkpoint without a quantization_config."""
    weight_block_size: tuple[int, int] | None = None
    """`weight_block_size`: fp8 scales per block of weights; None for per-tensor or unquantized."""
    not_converted: tuple[str, ...] | None = ()
    """Module-name prefixes left unquantized (`modules_to_not_convert` / `ignored_layers`); None
    when the checkpoint's list could not be read, so any layer may be unquantized."""

    def quantized(self, module: str) -> bool | None:
        """Whether `module` (e.g. `model.layers.78.mlp.experts`) holds quantized weights; None when
        the card cannot tell (the checkpoint's list of unconverted modules was not readable)."""
        if self.method is None:
            return False
        if self.not_converted is None:
            return None
        return not any(module == p or module.startswith(p + ".") for p in self.not_converted)


@dataclass(frozen=True)
class ModelDescription:
    """The architecture facts of a DeepSeek-style MLA + MoE model: DeepSeek-V2 (no query LoRA, no
    indexer, no MTP) up to DeepSeek-V3.2 / GLM-5 (query LoRA, DSA indexer, MTP). A model without
    a DSA indexer has `index_*` and `indexer_layers` 0; without query LoRA, `q_lora_rank` None."""

    name: str
    weight_dtype: str
    """`fp8` (block-quantized, bf16 embeddings and LM head) or `bf16` checkpoint weights."""
    hidden_size: int
    num_hidden_layers: int
    first_k_dense_replace: int
    """Leading layers with a dense MLP; the rest are MoE."""
    num_attention_heads: int
    q_lora_rank: int | None
    """None: a full q_proj (DeepSeek-V2-Lite) instead of q_a_proj + q_b_proj."""
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    intermediate_size: int
    """Dense MLP width (the first `first_k_dense_replace` layers)."""
    moe_intermediate_size: int
    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    vocab_size: int
    tie_word_embeddings: bool
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    indexer_layers: int
    """Layers that run (and cache keys for) their own DSA indexer; the others reuse a neighbour's
    top-k (GLM-5.2 IndexShare)."""
    num_nextn_predict_layers: int
    """MTP layers shipped after the last decoder layer."""
    max_position_embeddings: int
    """The model's context window."""
    quantization: WeightQuantization
    """The checkpoint's quantization_config: decides the MoE kernels (plan/kernels.py)."""

    @property
    def moe_layers(self) -> int:
        return self.num_hidden_layers - self.first_k_dense_replace

    @property
    def sparse_attention(self) -> bool:
        """DSA (a top-k indexer): FlashMLA-sparse, its prefill workspace and top-k buffer."""
        return self.index_topk > 0


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
    "index_n_heads": _NO_DSA,
    "index_head_dim": _NO_DSA,
    "index_topk": _NO_DSA,
    "indexer_layers": _NO_DSA,
    "num_nextn_predict_layers": (
        "DeepSeek-V2 ships no MTP layer (MTP arrived with DeepSeek-V3); serve with mtpTokens 0"
    ),
    "max_position_embeddings": (
        f"{_V2_LITE}: 163840 with YaRN rope_scaling (factor 40 over 4096); the paper trains Lite to "
        "32K, which is why the quickstart serves maxModelLen 32768"
    ),
}

DESCRIPTIONS: dict[str, ModelDescription] = {
    "zai-org/GLM-5.2-FP8": GLM_5_2_FP8,
    "deepseek-ai/DeepSeek-V2-Lite-Chat": DEEPSEEK_V2_LITE_CHAT,
}

_SOURCES_OF: dict[str, dict[str, str]] = {
    GLM_5_2_FP8.name: SOURCES,
    DEEPSEEK_V2_LITE_CHAT.name: V2_LITE_SOURCES,
}


def description_for(model_id: str) -> ModelDescription | None:
    """The committed description of a model id, or None when the plan has none."""
    return DESCRIPTIONS.get(model_id)


def unsourced_fields(description: ModelDescription) -> list[str]:
    """Fields of a description without a named source (the tests require none)."""
    sources = _SOURCES_OF.get(description.name, {})
    return [f.name for f in fields(description) if not sources.get(f.name)]


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
        "index_n_heads": _V3_NO_DSA,
        "index_head_dim": _V3_NO_DSA,
        "index_topk": _V3_NO_DSA,
        "indexer_layers": _V3_NO_DSA,
        "num_nextn_predict_layers": f"{config}: one MTP module (the report's section 2.2)",
        "max_position_embeddings": f"{config}: 163840 (YaRN over 4096; the report extends to 128K)",
    }


DEEPSEEK_V3_SOURCES = _v3_sources(_V3)
DEEPSEEK_R1_SOURCES = _v3_sources(
    "config.json of deepseek-ai/DeepSeek-R1 (the DeepSeek-V3 architecture; DeepSeek-R1 report, "
    "arXiv 2501.12948: trained from DeepSeek-V3-Base)"
)

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
    "index_n_heads": "Kimi K2 has no DSA indexer (no index_* keys)",
    "index_head_dim": "Kimi K2 has no DSA indexer (no index_* keys)",
    "index_topk": "Kimi K2 has no DSA indexer (no index_* keys)",
    "indexer_layers": "Kimi K2 has no DSA indexer (no index_* keys)",
    "num_nextn_predict_layers": f"{_K2}: num_nextn_predict_layers 0 (no MTP layer shipped)",
    "max_position_embeddings": f"{_K2}: 131072 (128K context)",
}

DESCRIPTIONS.update(
    {
        "deepseek-ai/DeepSeek-V3": DEEPSEEK_V3,
        "deepseek-ai/DeepSeek-R1": DEEPSEEK_R1,
        "moonshotai/Kimi-K2-Instruct": KIMI_K2_INSTRUCT,
    }
)
_SOURCES_OF.update(
    {
        DEEPSEEK_V3.name: DEEPSEEK_V3_SOURCES,
        DEEPSEEK_R1.name: DEEPSEEK_R1_SOURCES,
        KIMI_K2_INSTRUCT.name: KIMI_K2_SOURCES,
    }
)
