"""The public API is documented, and each component argument once, where it is declared.

Every name `llmd_fleet` exports has a docstring. Every `<Component>Args` TypedDict of the library
(exported or not) documents each key in the docstring under the key, read the way Pulumi's
component schema analyzer reads it (`pulumi.provider.experimental.analyzer`, which takes field
descriptions from the class's source); an optional key's docstring states its default; and the
class docstring does not describe the keys a second time, so there is one text to keep true.
"""

import ast
import importlib
from typing import Any, NotRequired, TypedDict

from pulumi.provider.experimental.analyzer import Analyzer

from tests.support import REPO

PACKAGE = REPO / "components" / "llmd_fleet"


def args_types() -> dict[str, type]:
    """Every `*Args` TypedDict defined in the library, by name, found in the source so a new
    component's arguments are covered without being listed here."""
    found: dict[str, type] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in tree.body:
            bases = {b.id for b in getattr(node, "bases", []) if isinstance(b, ast.Name)}
            if isinstance(node, ast.ClassDef) and node.name.endswith("Args") and "TypedDict" in bases:
                found[node.name] = getattr(importlib.import_module(module), node.name)
    return found


def _optional(args_type: Any, key: str) -> bool:
    # With `from __future__ import annotations` Python 3.11 keeps the annotation as text and puts
    # a NotRequired key among the required ones, so the text is read too.
    annotation = args_type.__annotations__[key]
    return key in args_type.__optional_keys__ or (
        isinstance(annotation, str) and annotation.startswith("NotRequired[")
    )


def key_problems(args_type: Any) -> list[str]:
    """What is wrong with the documentation of an arguments type's keys (empty when nothing)."""
    analyzer = Analyzer("llmd-fleet")
    class_doc = args_type.__doc__ or ""
    problems = []
    for key in args_type.__annotations__:
        doc = (analyzer.get_docstring(args_type, key) or "").strip()
        if not doc:
            problems.append(f"{key}: no docstring under the key")
        elif _optional(args_type, key) and "default" not in doc.lower():
            problems.append(f"{key}: optional, and its docstring names no default")
        if f"- `{key}`" in class_doc:
            problems.append(f"{key}: described again in the class docstring")
    return problems


def test_every_public_name_has_a_docstring():
    import llmd_fleet

    undocumented = [
        name for name in llmd_fleet.__all__ if not (getattr(llmd_fleet, name).__doc__ or "").strip()
    ]
    assert undocumented == []


def test_every_args_type_is_found_the_exported_ones_among_them():
    import llmd_fleet

    found = args_types()
    exported = {name for name in llmd_fleet.__all__ if name.endswith("Args")}
    assert exported and exported <= set(found)
    for name in exported:
        assert found[name] is getattr(llmd_fleet, name)
    # Two that are not exported: the parts a layer declares inside another layer's component.
    assert {"FabricPreflightArgs", "ModelExpressServerArgs"} <= set(found) - exported


def test_every_args_key_is_documented_once_where_it_is_declared():
    problems = {name: p for name, args_type in args_types().items() if (p := key_problems(args_type))}
    assert problems == {}


# Planted: a key without a docstring, an optional key whose docstring names no default, and a
# key described in the class docstring as well as under itself.
class _PlantedArgs(TypedDict):
    """Arguments of nothing.

    - `listed`: described here too.
    """

    undocumented: str
    optional: NotRequired[int]
    """How many."""
    listed: str
    """Described under the key."""
    fine: NotRequired[bool]
    """Whether (default `True`)."""


def test_planted_faults_are_each_found():
    assert key_problems(_PlantedArgs) == [
        "undocumented: no docstring under the key",
        "optional: optional, and its docstring names no default",
        "listed: described again in the class docstring",
    ]
