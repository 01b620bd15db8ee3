"""The type checker's imports of the component facade, generated from the export tables.

    python -m devtools.facade_imports            rewrite the marked block of components/llmd_fleet/__init__.py
    python -m devtools.facade_imports --check    exit 1 when the committed block is stale

A type checker (mypy, pyright) reads a module's names only from statements it can resolve without
running code, so the facade's public names, which load on first use from the package's own table
(`_EXPORTS`) and the registry's (`LAYER_EXPORTS`, `TARGET_EXPORTS` in
components/llmd_fleet/stack/registry.py), also need one `from <module> import <Name> as <Name>`
each under `if TYPE_CHECKING:`. This module writes those lines between the block's BEGIN and END
markers from the same tables (`make docs`, beside the configuration reference), so a new layer's
or target's record is the only hand edit; tests/facade/test_exports.py fails when the committed
block is stale. The lines are in the order and shape `ruff check` (isort) and `ruff format` keep.
"""

import argparse
import sys
from collections.abc import Mapping

import llmd_fleet
from llmd_fleet.cli.paths import CHECKOUT

FACADE = CHECKOUT / "components" / "llmd_fleet" / "__init__.py"
BEGIN = "    # BEGIN generated imports (`make docs`: python -m devtools.facade_imports); do not edit"
END = "    # END generated imports"
LINE_LENGTH = 110
"""pyproject.toml's `[tool.ruff] line-length`: a longer import is wrapped the way ruff wraps it."""
_INDENT = "    "


class StaleError(Exception):
    """The facade has no well-formed generated block to rewrite."""


def _member_key(name: str) -> tuple[int, str, str]:
    """isort's order of the names imported from one module (ruff's `order-by-type`): constants,
    then classes, then the rest, each case-insensitively."""
    if name.isupper() and len(name) > 1:
        rank = 0
    elif name[:1].isupper():
        rank = 1
    else:
        rank = 2
    return rank, name.lower(), name


def _statement(module: str, name: str) -> list[str]:
    """One explicit re-export (`X as X`, what `no_implicit_reexport` requires), wrapped when long."""
    line = f"{_INDENT}from {module} import {name} as {name}"
    if len(line) <= LINE_LENGTH:
        return [line]
    return [f"{_INDENT}from {module} import (", f"{_INDENT * 2}{name} as {name},", f"{_INDENT})"]


def block(exports: Mapping[str, str]) -> list[str]:
    """The import lines of every public name -> its module, in isort's order (by module, then by
    name within a module)."""
    ordered = sorted(exports.items(), key=lambda item: (item[1].lower(), item[1], _member_key(item[0])))
    return [line for name, module in ordered for line in _statement(module, name)]


def rewritten(source: str, exports: Mapping[str, str]) -> str:
    """The facade's source with the lines between its markers replaced by `block(exports)`."""
    lines = source.split("\n")
    begins = [number for number, line in enumerate(lines) if line == BEGIN]
    ends = [number for number, line in enumerate(lines) if line == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise StaleError(
            f"{FACADE.relative_to(CHECKOUT)}: expected one {BEGIN.strip()!r} line, then one "
            f"{END.strip()!r} line, under `if TYPE_CHECKING:`"
        )
    return "\n".join([*lines[: begins[0] + 1], *block(exports), *lines[ends[0] :]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.facade_imports", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed block is stale")
    args = parser.parse_args(argv)
    path = FACADE
    source = path.read_text(encoding="utf-8")
    try:
        fresh = rewritten(source, llmd_fleet._exports())
    except StaleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    relative = path.relative_to(CHECKOUT)
    if args.check:
        if fresh != source:
            print(f"{relative} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    if fresh != source:
        path.write_text(fresh, encoding="utf-8")
    print(f"wrote {relative}" if fresh != source else f"{relative} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
