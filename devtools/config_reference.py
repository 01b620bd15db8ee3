"""The configuration reference (docs/configuration.md), generated from the config models.

    python -m devtools.config_reference            write docs/configuration.md
    python -m devtools.config_reference --check    exit 1 when the committed file is stale

Every field's key path, type, default, bounds and description come from the pydantic models of
the sections' owners (`components/llmd_fleet/stack/model.py` names them), where they are declared
once; `tests/config/test_config_reference.py` fails when the committed page no longer matches them.
"""

import argparse
import copy
import enum
import sys
import types
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.stack import model as stack
from llmd_fleet.stack import registry
from llmd_fleet.targets.base import TargetBase

ROOT = CHECKOUT
OUTPUT = ROOT / "docs" / "configuration.md"
_BOUNDS = (
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "<="),
    (annotated_types.Lt, "lt", "<"),
)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + (
            " or null" if type(None) in args else ""
        )
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}" if args else "map"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _constraints(field: FieldInfo) -> str:
    found: list[str] = []

    def collect(metadata: Any) -> None:
        for item in metadata:
            for kind, attribute, symbol in _BOUNDS:
                if isinstance(item, kind):
                    found.append(f"{symbol} {getattr(item, attribute)}")
            if isinstance(item, annotated_types.MinLen):
                found.append(f"at least {item.min_length} items")
            if isinstance(item, annotated_types.MaxLen):
                found.append(f"at most {item.max_length}")
            pattern = getattr(item, "pattern", None)
            if isinstance(pattern, str):
                found.append("pattern `" + pattern.replace("|", "\\|") + "`")
            nested = getattr(item, "metadata", None)
            if isinstance(nested, list):
                collect(nested)
            function = getattr(item, "func", None)
            if function is not None and function.__qualname__.startswith("_validator.<locals>"):
                found.append("grammar (llmd_fleet/config/grammar.py)")

    collect(field.metadata)
    for arg in typing.get_args(field.annotation):
        collect(getattr(arg, "__metadata__", ()))
    return ", ".join(dict.fromkeys(found))


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "(defaults below)"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} entries (see description)"
    return f"`{value!r}`" if value is not None else "null"


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _nested_models(arg)
    return found


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    from llmd_fleet.config.model import CARD_FIELDS, ModelConfig

    rows = [row for name, field in model.model_fields.items() for row in _field_rows(name, field, prefix)]
    if model is ModelConfig:  # the architecture keys: a model with a card takes them from it
        keys = {f"| `{prefix}.{ModelConfig.model_fields[name].alias}` |" for name in CARD_FIELDS}
        rows = [
            row.replace(" | required | ", " | the model card's (required without one) | ", 1)
            if row.startswith(tuple(keys))
            else row
            for row in rows
        ]
    return rows


def _union_rows(base: type[BaseModel], members: list[type[BaseModel]], prefix: str) -> list[str]:
    """The rows of the keys every member of a union discriminated by `kind` has (the target's:
    `TargetBase`), `kind` typed by the members' own values in the union's order (the registry's:
    the base declares it a string)."""
    tags = tuple(
        value for member in members for value in typing.get_args(member.model_fields["kind"].annotation)
    )
    rows: list[str] = []
    for name, field in base.model_fields.items():
        if name == "kind":
            field = copy.copy(field)
            field.annotation = typing.Literal[tags]  # type: ignore[assignment]
        rows += _field_rows(name, field, prefix)
    return rows


def _field_rows(name: str, field: FieldInfo, prefix: str) -> list[str]:
    """The row of one field, then the rows of the models under it."""
    key = f"{prefix}.{field.alias or name}"
    description = " ".join((field.description or "").split()).replace("|", "\\|")
    cells = (f"`{key}`", _type_name(field.annotation), _default(field), _constraints(field), description)
    rows = ["| " + " | ".join(cells) + " |"]
    for nested in _nested_models(field.annotation):
        is_map = typing.get_origin(field.annotation) is dict or any(
            typing.get_origin(a) is dict for a in typing.get_args(field.annotation)
        )
        is_list = "list of" in _type_name(field.annotation)
        rows += _rows(nested, f"{key}.<name>" if is_map else f"{key}[]" if is_list else key)
    return rows


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config models (`make docs`; a test fails when this page is stale).",
        " Keys are set in `stacks/Pulumi.<stack>.yaml` under the `llmd-fleet:` namespace;",
        "every value is checked before anything is rendered or deployed (docs/bad-input.md).",
        "",
    ]
    sections = [(key, True) for key in registry.OBJECT_KEYS] + [
        (key, False) for key in registry.OPTIONAL_OBJECT_KEYS
    ]
    for key, required in sections:
        models = _nested_models(stack.StackConfig.model_fields[key].annotation)
        # A section that is a union discriminated by kind (the target): the keys every kind has,
        # then each kind's own section.
        base = TargetBase if len(models) > 1 else models[0]
        rows = _rows(base, key) if len(models) == 1 else _union_rows(base, models, key)
        for member in models if len(models) > 1 else []:
            own = {n: f for n, f in member.model_fields.items() if n not in base.model_fields}
            for name, field in own.items():
                if f"`{key}.{field.alias or name}`" not in "".join(rows):
                    rows += _field_rows(name, field, key)
        lines += [
            f"## `llmd-fleet:{key}`{'' if required else ' (optional)'}",
            "",
            " ".join((base.__doc__ or "").split()),
            "",
            "| key | type | default | bounds | description |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    lines += _models_section()
    lines += [
        "## Secrets",
        "",
        "Set only with `pulumi config set --secret`; a plain value is refused.",
        "",
        *(f"- `llmd-fleet:{key}`" for key in stack.SECRET_KEYS),
        "",
    ]
    return "\n".join(lines)


def _models_section() -> list[str]:
    """`llmd-fleet:models`: the entry's own keys; its sections are those documented above (each
    row of `model`, `serving`, `router` and `workload` applies below `models[].<section>`)."""
    from llmd_fleet.stack.models import ModelEntryConfig

    fields = ModelEntryConfig.model_fields
    rows = _field_rows("name", fields["name"], "models[]")
    for name in ("model", "serving", "router", "workload"):
        field = fields[name]
        default = (
            "required"
            if field.is_required()
            else _default(field).replace("(defaults below)", "every key's default")
        )
        description = " ".join((field.description or "").split())
        rows.append(f"| `models[].{name}` | object | {default} |  | {description} |")
    return [
        "## `llmd-fleet:models` (optional)",
        "",
        " ".join((ModelEntryConfig.__doc__ or "").split())
        + " A list of 1 to 8 entries in place of `llmd-fleet:model`, `llmd-fleet:serving` and"
        " `llmd-fleet:router` (docs/multi-model.md); each section takes the keys of the same"
        " section above.",
        "",
        "| key | type | default | bounds | description |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.config_reference")
    parser.add_argument("--check", action="store_true", help="fail when docs/configuration.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
