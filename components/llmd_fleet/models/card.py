"""The types of a model card: the architecture facts (`ModelDescription`) the plan sizes memory
and step times from, the checkpoint's quantization, the family's published MTP acceptance, and
where its vendored `config.json` is. Pure: imports nothing of the package.

Each family folder (`glm5/`, `deepseek_v2/`, ...) builds a `ModelFamily` of these; the registry
in `llmd_fleet.models` collects them.
"""

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


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


INDEXER_FIELDS = ("index_n_heads", "index_head_dim", "index_topk", "indexer_layers")
"""The DSA (sparse-attention) indexer's fields of a ModelDescription: all 0 for a family without one."""


def no_indexer(source: str) -> dict[str, str]:
    """The source of every indexer field for a family without a DSA indexer (why they are 0)."""
    return dict.fromkeys(INDEXER_FIELDS, source)


@dataclass(frozen=True)
class Acceptance:
    """A family's MTP acceptance: the chance a speculative token is accepted, from one published
    figure (tokens per step at k speculative tokens, or the acceptance itself)."""

    a: float
    source: str


def acceptance_from_tokens_per_step(tokens: float, k: int) -> float:
    """The a with 1 + a + ... + a^k = tokens (bisection; the sum grows with a)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(k + 1)) < tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class VendoredConfig:
    """One model's vendored config.json and its provenance (`source.json` beside it)."""

    model_id: str
    directory: Path
    source: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.directory / "config.json").read_text(encoding="utf-8"))
        return data

    @property
    def rebuilt(self) -> tuple[str, ...]:
        """Keys whose value is not the checkpoint's own file (empty when the file was read)."""
        return tuple(sorted(self.source.get("rebuilt") or {}))


@dataclass(frozen=True)
class ModelCard:
    """One checkpoint: its id, its architecture, a source for every field, and either the folder
    of its vendored config.json (which `make check-vllm` hands to vLLM's own engine configuration)
    or why it has none."""

    model_id: str
    """The stack's `model.id` (a Hugging Face repository id)."""
    description: ModelDescription
    sources: dict[str, str]
    """A named source for every field of `description`."""
    config_folder: str | None = None
    """The folder, inside the family's folder, holding `config.json` and `source.json`."""
    not_checked: str | None = None
    """Why no config.json is vendored (then the engine-configuration check lists it as not checked)."""

    def __post_init__(self) -> None:
        if (self.config_folder is None) == (self.not_checked is None):
            raise ValueError(f"{self.model_id}: a card has a vendored config.json or says why not, not both")

    def unsourced_fields(self) -> list[str]:
        """Fields of the description without a named source (the tests require none)."""
        return [f.name for f in fields(self.description) if not self.sources.get(f.name)]


@dataclass(frozen=True)
class ModelFamily:
    """A family of checkpoints sharing one architecture: its folder under `models/`, what it is
    (with sources), its cards and its published MTP acceptance (None: no MTP gain in the plan)."""

    folder: str
    """The family's folder name under `components/llmd_fleet/models/`."""
    name: str
    about: str
    """What the family is and where its figures come from."""
    cards: tuple[ModelCard, ...]
    mtp_acceptance: Acceptance | None
    directory: Path
    """The family's folder on disk (its `__init__.py`'s parent)."""

    def vendored(self, card: ModelCard) -> VendoredConfig | None:
        """The card's vendored config.json, None when it has none."""
        if card.config_folder is None:
            return None
        folder = self.directory / card.config_folder
        source = json.loads((folder / "source.json").read_text(encoding="utf-8"))
        return VendoredConfig(card.model_id, folder, source)
