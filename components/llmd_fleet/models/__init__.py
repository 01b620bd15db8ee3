"""The model cards, one folder per model family, and their registry.

A family's folder (`glm5/`, `deepseek_v2/`, `deepseek_v3/`, `kimi_k2/`) holds its `ModelFamily`
(models/card.py): what the family is, with sources; one `ModelCard` per checkpoint (the
architecture facts the plan sizes memory and step times from, a source for every field); its
published MTP acceptance; and, per checkpoint, a folder with the `config.json` that
`make check-vllm` hands to vLLM's own engine configuration (devtools/vllm_check/engine_config.py)
and a `source.json` naming where it comes from, or the reason none is vendored.

This package imports only the standard library and its own modules (tests/models/test_registry.py),
so the config, the plan and the layers can all read it without an import cycle.
"""

from llmd_fleet.models import deepseek_v2, deepseek_v3, glm5, kimi_k2
from llmd_fleet.models.card import (
    Acceptance,
    ModelCard,
    ModelDescription,
    ModelFamily,
    VendoredConfig,
    WeightQuantization,
)

__all__ = [
    "CARDS",
    "FAMILIES",
    "FOLDERS",
    "NOT_VENDORED",
    "Acceptance",
    "ModelCard",
    "ModelDescription",
    "ModelFamily",
    "VendoredConfig",
    "WeightQuantization",
    "card_for",
    "card_home",
    "description_for",
    "family_of",
    "vendored_config",
]

FAMILIES: tuple[ModelFamily, ...] = (glm5.FAMILY, deepseek_v2.FAMILY, deepseek_v3.FAMILY, kimi_k2.FAMILY)
"""Every family, one per folder under `components/llmd_fleet/models/`."""

CARDS: dict[str, ModelCard] = {card.model_id: card for family in FAMILIES for card in family.cards}
"""Model id (the stack's `model.id`) -> its card."""

_FAMILY_OF: dict[str, ModelFamily] = {card.model_id: family for family in FAMILIES for card in family.cards}

FOLDERS: dict[str, str] = {
    card.model_id: f"{family.folder}/{card.config_folder}"
    for family in FAMILIES
    for card in family.cards
    if card.config_folder is not None
}
"""Model id -> its vendored config.json folder, relative to `components/llmd_fleet/models/`."""

NOT_VENDORED: dict[str, str] = {
    card.model_id: card.not_checked for card in CARDS.values() if card.not_checked is not None
}
"""Model id -> why no config.json is vendored: the engine-configuration check lists it as not
checked with this reason."""


def card_for(model_id: str) -> ModelCard | None:
    """The card of a model id, None when the project has none."""
    return CARDS.get(model_id)


def description_for(model_id: str) -> ModelDescription | None:
    """The architecture of a model id, None when the project has no card for it."""
    card = CARDS.get(model_id)
    return None if card is None else card.description


def family_of(model_id: str) -> ModelFamily | None:
    """The family of a model id with a card."""
    return _FAMILY_OF.get(model_id)


def vendored_config(model_id: str) -> VendoredConfig | None:
    """The vendored config of a model id, None when the project vendors none."""
    family, card = _FAMILY_OF.get(model_id), CARDS.get(model_id)
    if family is None or card is None:
        return None
    return family.vendored(card)


def card_home(model_id: str) -> str:
    """Where a model's card lives, for messages: `models/<family folder>` (relative to
    components/llmd_fleet/), or the models folder itself for a model without a card."""
    family = _FAMILY_OF.get(model_id)
    return "models/" if family is None else f"models/{family.folder}"
