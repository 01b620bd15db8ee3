"""The `model` section: the served model and the architecture facts sizing needs. Pure."""

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from llmd_fleet.config.base import ConfigModel, camel_alias
from llmd_fleet.config.grammar import (
    GitRevision,
    HfRepoId,
    ServedModelName,
    one_of,
)
from llmd_fleet.config.vllm_registry import REASONING_PARSERS, TOOL_CALL_PARSERS
from llmd_fleet.labels import label_value
from llmd_fleet.models import description_for
from llmd_fleet.models.formulas import active_params, kv_bytes_per_token, routed_expert_params, total_params

# The architecture keys a model card supplies when the stack omits them (hand-entered, they must
# agree with the card: plan/memory.py model_sizing). A model without a card must give them all.
CARD_FIELDS = (
    "total_params_b",
    "active_params_b",
    "routed_expert_params_b",
    "layers",
    "experts",
    "experts_per_token",
    "weight_dtype",
    "kv_bytes_per_token",
    "max_context_tokens",
)


def card_values(model_id: str, kv_cache_dtype: str) -> dict[str, object] | None:
    """The architecture keys of a model with a card, as the stack would spell them (parameter
    counts in billions, to 0.1B), None for a model without one."""
    m = description_for(model_id)
    if m is None:
        return None
    return {
        "total_params_b": round(total_params(m) / 1e9, 1),
        "active_params_b": round(active_params(m) / 1e9, 1),
        "routed_expert_params_b": round(routed_expert_params(m) / 1e9, 1),
        "layers": m.num_hidden_layers,
        "experts": m.n_routed_experts,
        "experts_per_token": m.num_experts_per_tok,
        "weight_dtype": m.weight_dtype,
        "kv_bytes_per_token": kv_bytes_per_token(m, kv_cache_dtype).total,
        "max_context_tokens": m.max_position_embeddings,
    }


def _card_keys_optional(schema: dict[str, Any]) -> None:
    """The JSON schema (the component's inputs) lists the card keys as optional: a model with a
    card takes them from it."""
    optional = {camel_alias(name) for name in CARD_FIELDS}
    schema["required"] = [key for key in schema.get("required", []) if key not in optional]


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
    """Total parameters, in billions. From the model card when omitted (a model with a card:
    components/llmd_fleet/models/); given, within 1% of the card's count."""
    active_params_b: Annotated[float, Field(gt=0, le=100000)]
    """Parameters active per token, in billions (informational; shown in the plan). From the model
    card when omitted (embeddings included)."""
    routed_expert_params_b: Annotated[float, Field(ge=0, le=100000)]
    """Parameters in routed experts, in billions: sharded across EP ranks. The rest (attention,
    shared experts, dense MLPs, embeddings) is replicated on every data-parallel rank. From the
    model card when omitted; given, within 1% of the card's count."""
    layers: Annotated[int, Field(ge=1, le=1024)]
    """Transformer layers. From the model card when omitted; given, equal to the card's."""
    experts: Annotated[int, Field(ge=1, le=4096)]
    """Routed experts per MoE layer; the expert-parallel size must divide it. From the model card
    when omitted; given, equal to the card's."""
    experts_per_token: Annotated[int, Field(ge=1, le=256)]
    """Routed experts each token activates. From the model card when omitted; given, equal to the
    card's."""
    weight_dtype: Annotated[WeightDtype, Field(strict=False)]
    """Weight format of the checkpoint. From the model card when omitted; given, equal to the card's."""
    kv_cache_dtype: Literal["fp8", "auto"] = "fp8"
    """vLLM --kv-cache-dtype; `kvBytesPerToken` must be given for this dtype."""
    kv_bytes_per_token: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """KV-cache bytes one token occupies on a rank, all layers included, in `kvCacheDtype`. From
    the model card when omitted; given, at least what vLLM allocates for the card."""
    max_context_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """Longest context the model supports (config.json max_position_embeddings). From the model
    card when omitted; given, equal to the card's."""
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

    model_config = ConfigDict(json_schema_extra=_card_keys_optional)

    @model_validator(mode="before")
    @classmethod
    def _from_card(cls, data: Any) -> Any:
        """Fill the architecture keys the stack omits from the model card; a model without a card
        keeps them required (each missing key is refused by name)."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return data
        dtype = data.get("kvCacheDtype", data.get("kv_cache_dtype", "fp8"))
        card = card_values(data["id"], dtype if dtype in ("fp8", "auto") else "fp8")
        if card is None:
            return data
        given = {k for k in data} | {camel_alias(k) for k in data}
        return {**{camel_alias(k): v for k, v in card.items() if camel_alias(k) not in given}, **data}


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


# agentgateway's limit on a direct response's body (its AgentgatewayPolicy CRD at the pinned
# release: spec.traffic.directResponse.body maxLength).
DIRECT_RESPONSE_MAX_BYTES = 4096


def model_list(models: tuple[ModelConfig, ...]) -> dict[str, Any]:
    """What `GET /v1/models` through the gateway answers: every model's served names (vLLM's
    --served-model-name list) and every LoRA adapter, in stack order, in the OpenAI list shape
    vLLM's own /v1/models uses (`object`, `data[].id`, `owned_by`, `root`, `parent`: an
    adapter's parent is its model's client name, as vLLM reports it)."""
    data: list[dict[str, Any]] = []
    for model in models:
        for name in served_model_names(model):
            data.append({"id": name, "object": "model", "owned_by": "llmd-fleet", "root": model.id})
        parent = client_model_name(model)
        for adapter in model.lora_adapters:
            data.append(
                {"id": adapter.name, "object": "model", "owned_by": "llmd-fleet", "root": adapter.source,
                 "parent": parent}
            )  # fmt: skip
    return {"object": "list", "data": data}


def model_list_body(models: tuple[ModelConfig, ...]) -> str:
    """model_list as the bytes the gateway sends: compact JSON, the same for the same stack."""
    return json.dumps(model_list(models), separators=(",", ":"))
