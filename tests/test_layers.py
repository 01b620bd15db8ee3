"""Dependencies point one way: base <- config <- plan <- builders and components <- program <- tools.

The package's folders are its layers (README, "Module map"). The lower layers are pure (no Pulumi,
no cloud SDK) and import nothing above them, so the config and the plan can be used, tested and
checked without the SDKs. Every module of `llmd_fleet` is read with `ast`: an import that points up
fails here, not in review.
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "components" / "llmd_fleet"
LAYER_NAMES = ("base", "config", "plan", "builders/components", "program", "tools")
# Modules of the base layer (facts every layer shares); the config package's own base modules
# are base too, so the plan and the builders can take a grammar or a registry without the models.
BASE = {
    "llmd_fleet.versions",
    "llmd_fleet.conventions",
    "llmd_fleet.labels",
    "llmd_fleet.config.grammar",
    "llmd_fleet.config.base",
    "llmd_fleet.config.vllm_registry",
}
# Subpackage -> layer; the areas of the runtime library (one per type-token area) share layer 3.
AREAS = {
    "config": 1,
    "plan": 2,
    # The preflight probe: self-contained (it runs alone in the serving image), pure.
    "preflight": 2,
    **dict.fromkeys(
        ("cluster", "platform", "security", "observability", "serving", "router", "responses", "images"), 3
    ),
    "tools": 5,
    "policies": 5,
}
PURE = 2  # layers up to this one import no Pulumi and no cloud SDK


def layer(module: str) -> int:
    """The layer of a module of the package (`llmd_fleet.a.b`)."""
    if module in BASE:
        return 0
    parts = module.split(".")
    if parts[:2] == ["llmd_fleet", "program"]:
        return 4
    if len(parts) >= 2 and parts[1] in AREAS:
        return AREAS[parts[1]]
    if module == "llmd_fleet":
        return 3  # the API facade re-exports components
    raise AssertionError(f"{module} has no layer: add it to BASE or AREAS in tests/test_layers.py")


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[str]:
    """Modules a file imports at run time (absolute names; `from llmd_fleet.a import b` counts
    `llmd_fleet.a.b` when b is a module). Imports under `if TYPE_CHECKING:` are left out."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            for alias in node.names:
                candidate = PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")
                if candidate.with_suffix(".py").is_file() or candidate.is_dir():
                    found.append(f"{node.module}.{alias.name}")
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert len(MODULES) > 60
    for path in MODULES:
        layer(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_points_up(path):
    own = layer(module_name(path))
    for imported in imports(path):
        if imported.split(".")[0] == "llmd_fleet":
            assert layer(imported) <= own, (
                f"{module_name(path)} ({LAYER_NAMES[own]}) imports {imported} "
                f"({LAYER_NAMES[layer(imported)]})"
            )
        if own <= PURE:
            assert not imported.startswith(("pulumi", "grafana")), (
                f"{module_name(path)} is a pure {LAYER_NAMES[own]} module but imports {imported}"
            )
        assert imported.split(".")[0] not in ("components", "infra", "policies", "tests"), (
            f"{module_name(path)} imports {imported}: the package imports only itself"
        )


def test_the_facade_imports_nothing_at_import_time():
    """`import llmd_fleet` stays cheap: the public names load on first use."""
    assert [m for m in imports(PACKAGE / "__init__.py") if m.startswith("llmd_fleet")] == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The rule is not vacuous: a config module importing a builder is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from llmd_fleet.platform.dra import claim_template_spec\nfrom llmd_fleet.serving import pod\n"
    )
    upward = [m for m in imports(bad) if m.startswith("llmd_fleet") and layer(m) > AREAS["config"]]
    assert upward == ["llmd_fleet.platform.dra", "llmd_fleet.serving", "llmd_fleet.serving.pod"]


def test_pure_layers_import_without_the_sdks():
    """Importing the config and the plan loads no Pulumi module (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, llmd_fleet.config.fleet, llmd_fleet.plan.fleet, llmd_fleet.plan.observability;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_kubernetes'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
