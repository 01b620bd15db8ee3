"""The `model` section: the served model and the architecture facts sizing needs. Pure."""

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    GitRevision,
    HfRepoId,
    ServedModelName,
    one_of,
)
from llmd_fleet.config.vllm_registry import REASONING_PARSERS, TOOL_CALL_PARSERS
from llmd_fleet.labels import label_value


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class WeightDtype(StrEnum):
    """Checkpoint weight formats and their bytes per parameter."""

    FP8 = "fp8"
    BF16 = "bf16"

    @property
    def bytes_per_param(self) -> int:
        return {"fp8": 1, "bf16": 2}[self.value]


# vLLM 0.33's accepted LoRA ranks (vllm/config/lora.py MaxLoRARanks): --max-lora-rank takes one of
# these, and an adapter's rank must not exceed it.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
MAX_LORA_ADAPTERS = 16


class LoraAdapterConfig(_Model):
    """A LoRA adapter the model's engines load at start (vLLM --lora-modules), served under its
    own name beside the base model."""

    name: ServedModelName
    """Name clients send in a request's `model` field to get this adapter."""
    source: HfRepoId
    """Hugging Face repository id of the adapter (a PEFT `adapter_config.json` and weights)."""
    revision: GitRevision
    """Branch, tag or 40-hex commit id of the adapter to load; pin a commit for production."""
    rank: Annotated[int, Field(ge=1, le=max(LORA_RANKS))]
    """The adapter's LoRA rank (`r` in its adapter_config.json), one of 1, 8, 16, 32, 64, 128, 256,
    320, 512 (vLLM 0.33's LoRA ranks); sizes the engine's LoRA slots
    (vLLM --max-lora-rank: the largest rank of the model's adapters) and their memory in the plan."""

    @field_validator("rank")
    @classmethod
    def _rank(cls, value: int) -> int:
        if value not in LORA_RANKS:
            raise ValueError(f"must be one of {', '.join(map(str, LORA_RANKS))} (vLLM 0.33's LoRA ranks)")
        return value


class ModelConfig(_Model):
    """The served model: where to get it and the architecture facts that size the roles."""

    id: HfRepoId
    """Hugging Face repository id, e.g. `zai-org/GLM-5.2-FP8`."""
    revision: GitRevision
    """Branch, tag or 40-hex commit id to load; pin a commit for production."""
    served_name: ServedModelName | None = None
    """Model name clients send; the repository id when unset."""
    total_params_b: Annotated[float, Field(gt=0, le=100000)]
    """Total parameters, in billions."""
    active_params_b: Annotated[float, Field(gt=0, le=100000)]
    """Parameters active per token, in billions (informational; shown in the plan)."""
    routed_expert_params_b: Annotated[float, Field(ge=0, le=100000)]
    """Parameters in routed experts, in billions: sharded across EP ranks. The rest (attention,
    shared experts, dense MLPs, embeddings) is replicated on every data-parallel rank."""
    layers: Annotated[int, Field(ge=1, le=1024)]
    """Transformer layers."""
    experts: Annotated[int, Field(ge=1, le=4096)]
    """Routed experts per MoE layer; the expert-parallel size must divide it."""
    experts_per_token: Annotated[int, Field(ge=1, le=256)]
    """Routed experts each token activates."""
    weight_dtype: Annotated[WeightDtype, Field(strict=False)]
    """Weight format of the checkpoint."""
    kv_cache_dtype: Literal["fp8", "auto"] = "fp8"
    """vLLM --kv-cache-dtype; `kvBytesPerToken` must be given for this dtype."""
    kv_bytes_per_token: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """KV-cache bytes one token occupies on a rank, all layers included, in `kvCacheDtype`."""
    max_context_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """Longest context the model supports (config.json max_position_embeddings)."""
    tool_call_parser: Annotated[str, one_of(TOOL_CALL_PARSERS, "tool-call parser")] | None = None
    """vLLM --tool-call-parser (a name the pinned vLLM registers, llmd_fleet/config/vllm_registry.py);
    enables auto tool choice when set."""
    reasoning_parser: Annotated[str, one_of(REASONING_PARSERS, "reasoning parser")] | None = None
    """vLLM --reasoning-parser (a name the pinned vLLM registers)."""
    trust_remote_code: bool = False
    """Pass --trust-remote-code to vLLM."""
    lora_adapters: Annotated[list[LoraAdapterConfig], Field(max_length=MAX_LORA_ADAPTERS)] = Field(
        default_factory=list
    )
    """LoRA adapters every engine of the model loads at start (vLLM --enable-lora
    --lora-modules); none by default."""


def client_model_name(model: ModelConfig) -> str:
    """The name clients send in a request's `model` field: `servedName`, else the repository id."""
    return model.served_name or model.id


def served_model_names(model: ModelConfig) -> tuple[str, ...]:
    """vLLM's --served-model-name list. First the client name as a label value, which the pods'
    `llm-d.ai/model` label carries and vLLM reports as the `model_name` of its metrics (its first
    served name), so llm-d's cost recipe can join the two; then the client name itself when it
    differs (a repository id's `/` is not allowed in a label value), so clients' `model` field
    keeps working."""
    client = client_model_name(model)
    label = label_value(client)
    return (label,) if label == client else (label, client)
