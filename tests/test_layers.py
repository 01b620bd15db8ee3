"""Dependencies point one way: base <- config <- plan <- builders and components <- program <- tools.

The lower layers are pure (no Pulumi, no cloud SDK) and import nothing above them, so the config
and the plan can be used, tested and checked without the SDKs; a test per rule, read from the
source with `ast` (an import that points up fails here, not in review).
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

COMPONENTS = REPO / "components"
# The lower layers, by module; every other module of components/ is a builder or a component.
LAYERS: dict[str, int] = {
    **dict.fromkeys(("versions", "grammar", "config_base", "vllm_registry", "labels", "conventions"), 0),
    **dict.fromkeys(("config", "config_gke", "config_eks", "config_images", "config_responses"), 1),
    **dict.fromkeys(("plan", "fabric", "tcpxo_pod", "observability_plan"), 2),
}
LAYER_NAMES = ("base", "config", "plan")
UPPER = 3


def _imports(path: Path) -> list[str]:
    """Modules imported by a file (absolute names; `from components import x` counts as x)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            if node.module == "components":
                found += [f"components.{alias.name}" for alias in node.names]
    return found


def _layer(module: str) -> int:
    return LAYERS.get(module.removeprefix("components."), UPPER)


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_a_lower_layer_imports_nothing_above_it(module):
    path = COMPONENTS / f"{module}.py"
    assert path.is_file(), f"{module} is listed in LAYERS but does not exist"
    for imported in _imports(path):
        if imported.startswith("components."):
            assert _layer(imported) <= LAYERS[module], (
                f"components/{module}.py ({LAYER_NAMES[LAYERS[module]]}) imports {imported} "
                f"({LAYER_NAMES[_layer(imported)] if _layer(imported) < UPPER else 'builders/components'})"
            )
        assert not imported.startswith(("pulumi", "infra", "policies")), (
            f"components/{module}.py is a pure {LAYER_NAMES[LAYERS[module]]} module but imports {imported}"
        )


def test_the_library_never_imports_the_tools():
    for path in sorted(COMPONENTS.glob("*.py")):
        for imported in _imports(path):
            assert not imported.startswith(("infra", "tests")), f"{path.name} imports {imported}"


def test_the_check_sees_an_upward_import(tmp_path):
    """The rule is not vacuous: a config module importing a builder is caught."""
    bad = tmp_path / "config.py"
    bad.write_text("from components.dra import claim_template_spec\nfrom components import pod\n")
    upward = [m for m in _imports(bad) if m.startswith("components.") and _layer(m) > LAYERS["config"]]
    assert upward == ["components.dra", "components.pod"]
