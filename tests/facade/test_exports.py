"""The public names (components/llmd_fleet/__init__.py): the type checker's imports, the package's
own table and the layers' names from the registry (llmd_fleet/stack/registry.py `LAYER_EXPORTS`)
are one list, and `import llmd_fleet` stays light. The imports are generated from the tables
(devtools/facade_imports.py, run by `make docs`)."""

import ast
import subprocess
import sys

import pytest

import llmd_fleet
from devtools import facade_imports
from llmd_fleet.stack import registry
from tests.support import REPO

INIT = REPO / "components" / "llmd_fleet" / "__init__.py"


def typing_imports(source: str) -> dict[str, str]:
    """The names the `if TYPE_CHECKING:` block of a module's source imports -> their module."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, ast.dump(statement)
                for alias in statement.names:
                    # `X as X`: an explicit re-export, what the strict type checker requires.
                    assert alias.asname == alias.name, alias.name
                    found[alias.name] = statement.module
    return found


def mismatched(source: str, exports: dict[str, str]) -> list[str]:
    """The public names the type checker's imports leave out, add or take from another module."""
    imported = typing_imports(source)
    return sorted(
        name for name in imported.keys() | exports.keys() if imported.get(name) != exports.get(name)
    )


def wanted_lines(source: str, exports: dict[str, str]) -> list[str]:
    """The `TYPE_CHECKING` import lines the public names need and the source lacks (what `make
    docs` adds for a new layer's record: its component and its Args, from the record's module)."""
    imported = typing_imports(source)
    return [
        f"    from {exports[name]} import {name} as {name}"
        for name in sorted(exports)
        if imported.get(name) != exports[name]
    ]


def test_the_type_checkers_imports_are_the_public_names():
    exports = llmd_fleet._exports()
    assert {"ModelServing", "GatewayLayerArgs", "parse_config", "OnPremCluster"} <= set(exports)
    source = INIT.read_text(encoding="utf-8")
    assert mismatched(source, exports) == [], "\n".join(
        ["run `make docs`; it adds to __init__.py:", *wanted_lines(source, exports)]
    )


def test_the_committed_imports_are_what_the_generator_writes():
    source = INIT.read_text(encoding="utf-8")
    assert facade_imports.rewritten(source, llmd_fleet._exports()) == source, (
        "components/llmd_fleet/__init__.py is stale: run `make docs`"
    )
    assert facade_imports.main(["--check"]) == 0


def test_a_stale_block_is_rewritten_and_refused(tmp_path, monkeypatch, capsys):
    """Not vacuous: a block missing a layer's lines gets them back, in their place, and `--check`
    fails on it naming the command; a block without its markers is an error."""
    exports = llmd_fleet._exports()
    source = facade_imports.rewritten(INIT.read_text(encoding="utf-8"), exports)
    dropped = "\n".join(line for line in source.splitlines() if "import Router" not in line) + "\n"
    assert dropped != source
    assert facade_imports.rewritten(dropped, exports) == source
    stale = tmp_path / "__init__.py"
    stale.write_text(dropped, encoding="utf-8")
    monkeypatch.setattr(facade_imports, "FACADE", stale)
    monkeypatch.setattr(facade_imports, "CHECKOUT", tmp_path)
    assert facade_imports.main(["--check"]) == 1
    assert capsys.readouterr().err == "__init__.py is stale: run `make docs`\n"
    assert facade_imports.main([]) == 0
    assert stale.read_text(encoding="utf-8") == source
    with pytest.raises(facade_imports.StaleError, match="expected one '# BEGIN generated imports"):
        facade_imports.rewritten(source.replace(facade_imports.END, ""), exports)


def test_a_long_import_is_wrapped_as_ruff_wraps_it():
    name = "A" * 40 + "Args"
    module = "llmd_fleet.layers." + "x" * 40 + ".component"
    assert facade_imports.block({name: module, "declare": module}) == [
        f"    from {module} import (",
        f"        {name} as {name},",
        "    )",
        f"    from {module} import declare as declare",
    ]


def test_a_layer_missing_from_the_type_checkers_imports_is_found():
    """Not vacuous: a public name the type checker does not import is named, as is one imported
    from another module than the tables say."""
    source = INIT.read_text(encoding="utf-8")
    exports = typing_imports(source)
    assert exports["Router"] == "llmd_fleet.layers.router.component"
    dropped = "\n".join(line for line in source.splitlines() if "import Router" not in line)
    assert mismatched(dropped, exports) == ["Router", "RouterArgs"]
    assert wanted_lines(dropped, exports) == [
        "    from llmd_fleet.layers.router.component import Router as Router",
        "    from llmd_fleet.layers.router.component import RouterArgs as RouterArgs",
    ]
    moved = source.replace(
        "llmd_fleet.program import ServingLayers ", "llmd_fleet.checks import ServingLayers "
    )
    assert mismatched(moved, exports) == ["ServingLayers"]


def test_the_layers_names_come_from_the_registry():
    assert set(registry.LAYER_EXPORTS) <= set(llmd_fleet.__all__)
    assert not set(registry.LAYER_EXPORTS) & set(llmd_fleet._EXPORTS)
    assert registry.LAYER_EXPORTS["Autoscaling"] == "llmd_fleet.layers.autoscaling.component"
    assert llmd_fleet.__all__ == sorted(llmd_fleet._exports())
    # A component another layer declares is not public (preflight and ModelExpress: serving's).
    assert "FabricPreflight" not in llmd_fleet.__all__ and "ModelExpressServer" not in llmd_fleet.__all__


def test_import_and_the_name_list_load_no_pulumi():
    code = "import sys, llmd_fleet; names = llmd_fleet.__all__; print(len(names), 'pulumi' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.split() == [str(len(llmd_fleet.__all__)), "False"]
