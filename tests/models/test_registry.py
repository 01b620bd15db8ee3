"""The model-card registry: every folder under components/llmd_fleet/models/ is a registered family,
every registered card has its folder, every field a source, and the package imports only the
standard library and its own modules (so config, plan and layers can all read it)."""

import ast
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from llmd_fleet import models
from llmd_fleet.models import (
    CARDS,
    FAMILIES,
    FOLDERS,
    NOT_VENDORED,
    ModelCard,
    ModelDescription,
    card_for,
    card_home,
    description_for,
    vendored_config,
)
from llmd_fleet.models.deepseek_v3 import DEEPSEEK_V3
from tests.support import REPO

MODELS = REPO / "components" / "llmd_fleet" / "models"
FAMILY_DIRS = sorted(p.name for p in MODELS.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_every_folder_is_a_registered_family_and_every_family_has_its_folder():
    assert sorted(f.folder for f in FAMILIES) == FAMILY_DIRS
    for family in FAMILIES:
        assert family.directory == MODELS / family.folder
        assert (family.directory / "__init__.py").is_file()


def test_every_card_folder_holds_a_config_and_its_source_and_nothing_else_is_there():
    for family in FAMILIES:
        data = {p.name for p in family.directory.iterdir() if p.is_dir() and p.name != "__pycache__"}
        assert data == {c.config_folder for c in family.cards if c.config_folder is not None}, family.folder
        for card in family.cards:
            if card.config_folder is not None:
                folder = family.directory / card.config_folder
                assert (folder / "config.json").is_file() and (folder / "source.json").is_file()


def test_the_five_cards_are_registered_each_checked_or_saying_why_not():
    assert set(CARDS) == {
        "zai-org/GLM-5.2-FP8",
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-R1",
        "moonshotai/Kimi-K2-Instruct",
    }
    assert set(FOLDERS) | set(NOT_VENDORED) == set(CARDS)
    assert not set(FOLDERS) & set(NOT_VENDORED)
    for model_id in FOLDERS:
        vendored = vendored_config(model_id)
        assert vendored is not None and vendored.config["architectures"]
    assert all(vendored_config(m) is None and NOT_VENDORED[m] for m in NOT_VENDORED)


@pytest.mark.parametrize("model_id", sorted(CARDS))
def test_every_field_of_every_card_names_its_source(model_id):
    card = card_for(model_id)
    assert card is not None and card.unsourced_fields() == []
    assert description_for(model_id) is card.description
    assert card_home(model_id).startswith("models/") and card_home(model_id) != "models/"


def test_an_unknown_model_has_no_card():
    assert card_for("example-org/none") is None and description_for("example-org/none") is None
    assert vendored_config("example-org/none") is None and card_home("example-org/none") == "models/"


def test_a_card_with_both_or_neither_a_config_and_a_reason_is_refused():
    with pytest.raises(ValueError, match="not both"):
        ModelCard("x/y", DEEPSEEK_V3, {}, config_folder="a", not_checked="b")
    with pytest.raises(ValueError, match="not both"):
        ModelCard("x/y", DEEPSEEK_V3, {})


def test_a_missing_source_is_reported():
    card = card_for("deepseek-ai/DeepSeek-V3")
    assert card is not None
    partial = replace(card, sources={k: v for k, v in card.sources.items() if k != "vocab_size"})
    assert partial.unsourced_fields() == ["vocab_size"]
    assert {f.name for f in fields(ModelDescription)} == set(card.sources)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return found


@pytest.mark.parametrize("path", sorted(MODELS.rglob("*.py")), ids=lambda p: str(p.relative_to(MODELS)))
def test_the_models_package_imports_only_core_versions_and_itself(path):
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "llmd_fleet":
            assert name.startswith(("llmd_fleet.models", "llmd_fleet.core", "llmd_fleet.versions")), name
        else:
            assert top in sys.stdlib_module_names, name


def test_the_registry_is_the_packages_only_entry():
    assert set(models.__all__) <= set(dir(models))
