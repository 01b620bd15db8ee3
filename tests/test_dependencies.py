"""Dependencies point one way: base <- config <- plan <- builders and components <- program <- tools,
and no two modules import each other, however indirectly.

The package's folders are its tiers (docs/contributing.md, "Module map"). The lower tiers are pure (no Pulumi,
no cloud SDK) and import nothing above them, so the config and the plan can be used, tested and
checked without the SDKs. Every module of `llmd_fleet` is read with `ast`, imports inside functions
included: an import that points up, or one that closes a cycle, fails here, not in review.
"""

import ast
import tomllib
from pathlib import Path

import pytest

from llmd_fleet.stack import registry
from tests.support import REPO

PACKAGE = REPO / "components" / "llmd_fleet"
TIER_NAMES = ("base", "config", "plan", "builders/components", "program", "cli")
# Modules of the base tier (facts every tier shares) besides `llmd_fleet.core`; the config package's
# own base modules are base too, so the plan and the builders can take a grammar or a registry
# without the models.
BASE = {
    "llmd_fleet.versions",
    "llmd_fleet.conventions",
    "llmd_fleet.labels",
    "llmd_fleet.config.grammar",
    "llmd_fleet.config.base",
    "llmd_fleet.config.vllm_registry",
    # vendored config.json of each served model (data files and their reader)
    "llmd_fleet.models",
}
# Subpackage -> tier, for the subpackages that are not sliced.
AREAS = {
    "core": 0,
    "config": 1,
    "plan": 2,
    # the model cards, one folder per family: the standard library and their own modules only
    "models": 0,
    **dict.fromkeys(("platform", "security", "images"), 3),
    "cli": 5,
    "policies": 5,
    # check_settings: the checks of `llmd-fleet check` for a program of one's own (it runs the CLI's
    # render and check, so it sits with the CLI).
    "checks": 5,
    # the one cluster client of `status` and `doctor` (kubeconfig, credentials, bounds)
    "cluster": 5,
    # the Fleet component of the component provider (provider/): an entry point over the program
    "facade": 5,
}
SLICED = ("layers", "targets")
"""One folder per in-cluster layer and per target kind; their files' tiers go by file name."""
SLICE_FILE_TIERS = {
    # the section models and the cross-field rules: the config tier
    "config": 1,
    "rules": 1,
    "fabric": 1,
    "tcpxo_plan": 1,
    # names, selectors, ports and NetworkPolicy flows read the plan; the probe is self-contained
    "specs": 2,
    "flows": 2,
    "probe": 2,
}
"""A slice file's tier by its name; any other file of a slice (component.py, cluster.py, build.py,
pod.py, ...) declares resources or builds them: tier 3."""
SLICE_ROOT_TIERS = {"base": 1, "rules": 1, "specs": 1, "images": 1, "extras": 1, "declared": 3}
"""Files at the root of `targets/`: `base` (TargetBase, TargetSpec), `specs` (SPECS) and what reads
only them (`images`: the images section's rule; `extras`: the SDK extras) are config."""
STACK_TIERS = {"model": 1, "models": 1}
"""Modules of `llmd_fleet.stack` by name: the stack's model is config; the registry and parsing
sit above the rules and flows they collect (tier 2)."""
PURE = 2  # tiers up to this one import no Pulumi and no cloud SDK


def tier(module: str) -> int:
    """The tier of a module of the package (`llmd_fleet.a.b`)."""
    if module in BASE:
        return 0
    parts = module.split(".")
    if parts[:2] == ["llmd_fleet", "program"]:
        return 4
    if module == "llmd_fleet":
        return 3  # the API facade re-exports components
    if len(parts) >= 2 and parts[1] in SLICED:
        if len(parts) == 2 or (len(parts) == 3 and parts[2] not in SLICE_ROOT_TIERS):
            return 0  # the folder's own __init__ (a docstring) and the slice folders' __init__
        if len(parts) == 3:
            return SLICE_ROOT_TIERS[parts[2]]
        if len(parts) >= 4:
            return SLICE_FILE_TIERS.get(parts[-1], 3)
    if parts[1:2] == ["images"] and parts[-1] == "config":
        return 1
    if parts[1:2] == ["stack"]:
        # The whole stack's model over every section's (config), the registry over the rules and
        # flows it derives its tables from (plan tier: flows read the plan).
        return STACK_TIERS.get(parts[-1], 0 if len(parts) == 2 else 2)
    if len(parts) >= 2 and parts[1] in AREAS:
        return AREAS[parts[1]]
    raise AssertionError(f"{module} has no tier: add it to BASE or AREAS in tests/test_dependencies.py")


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Modules a file imports at run time (absolute names; `from llmd_fleet.a import b` counts
    `llmd_fleet.a.b` when b is a module under `root`). Imports under `if TYPE_CHECKING:` are left
    out; imports inside functions count."""
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
                candidate = root / f"{node.module}.{alias.name}".replace(".", "/")
                if candidate.with_suffix(".py").is_file() or candidate.is_dir():
                    found.append(f"{node.module}.{alias.name}")
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_tier():
    assert len(MODULES) > 60
    for path in MODULES:
        tier(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_points_up(path):
    own = tier(module_name(path))
    for imported in imports(path):
        if imported.split(".")[0] == "llmd_fleet":
            assert tier(imported) <= own, (
                f"{module_name(path)} ({TIER_NAMES[own]}) imports {imported} ({TIER_NAMES[tier(imported)]})"
            )
        if own <= PURE:
            assert not imported.startswith(("pulumi", "grafana")), (
                f"{module_name(path)} is a pure {TIER_NAMES[own]} module but imports {imported}"
            )
        assert imported.split(".")[0] not in ("components", "devtools", "infra", "policies", "tests"), (
            f"{module_name(path)} imports {imported}: the package imports only itself"
        )


def test_the_facade_imports_nothing_at_import_time():
    """`import llmd_fleet` stays cheap: the public names load on first use."""
    assert [m for m in imports(PACKAGE / "__init__.py") if m.startswith("llmd_fleet")] == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The rule is not vacuous: a config module importing a builder is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from llmd_fleet.platform.dra import claim_template_spec\nfrom llmd_fleet.layers.serving import pod\n"
    )
    upward = [m for m in imports(bad) if m.startswith("llmd_fleet") and tier(m) > AREAS["config"]]
    assert upward == ["llmd_fleet.platform.dra", "llmd_fleet.layers.serving.pod"]


def test_pure_tiers_import_without_the_sdks():
    """Importing the config and the plan loads no Pulumi module (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, llmd_fleet.core.netpol, llmd_fleet.stack.parse, llmd_fleet.plan.fleet,"
        " llmd_fleet.plan.observability;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_kubernetes'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def package_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (`llmd_fleet.a` for a package's __init__)."""
    names = {module_name(path): path for path in MODULES}
    return {name: {m for m in imports(path) if m in names and m != name} for name, path in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


ROLES = {
    "config": "model",
    "fabric": "model",
    "tcpxo_plan": "model",
    "rules": "rules",
    "specs": "specs",
    "flows": "flows",
}
"""A slice file's role by its name (others by tier): the models, the rules that read the whole
stack, the plan-tier builders, the components. The roles of one slice are distinct areas because
the config core sits between them: the slices' models -> config.stack -> the slices' rules ->
config.parse."""


def area(module: str) -> str:
    """A module's area: a slice's role (`llmd_fleet.layers.router:model`), a module of the config
    core or of the targets' root on its own, else its subpackage; a top-level module is an area
    of its own."""
    parts = module.split(".")
    if slice_of(module) is not None or parts[1:2] == ["images"]:
        owner = slice_of(module) or "llmd_fleet.images"
        return f"{owner}:{ROLES.get(parts[-1], TIER_NAMES[tier(module)])}"
    if parts[1:2] in (["config"], ["targets"], ["stack"]):
        return module
    return ".".join(parts[:2])


def slice_of(module: str) -> str | None:
    """The slice a module belongs to (`llmd_fleet.layers.router`, `llmd_fleet.targets.gke`), if any."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1:2] in (["layers"], ["targets"]) and len(parts) > 3 else None


def test_no_import_cycle_between_areas():
    """No two areas depend on each other: an area can be read, tested and changed with only what
    lies below it."""
    graph: dict[str, set[str]] = {}
    for module, imported in package_graph().items():
        graph.setdefault(area(module), set()).update(area(m) for m in imported if area(m) != area(module))
    assert cycles(graph) == []


COMPOSED = {
    # ModelServing declares the ModelExpress server and the fabric preflight as its children (the
    # parent chain is part of every URN, so the composition stays where the URNs were made).
    ("llmd_fleet.layers.serving.component", "llmd_fleet.layers.modelexpress.component"),
    ("llmd_fleet.layers.serving.component", "llmd_fleet.layers.preflight.component"),
    # The agentic API's routes attach to the gateway's Gateway (its policy API and drain settings).
    ("llmd_fleet.layers.responses.component", "llmd_fleet.layers.gateway.component"),
}
"""Component-to-component edges between slices, each for the reason given."""


def test_slices_meet_only_through_their_specs():
    """A slice (a layer or a target kind) refers to another only through that slice's `specs.py`
    (its names, selectors, ports and peers) or its `config.py` (its section's model), never its
    flows, rules or component. Traffic runs both ways between layers (the gateway reaches the
    engines, whose policy admits the gateway), so slices may know each other's specs; specs and
    configs import no flows and no component, which keeps the modules free of cycles."""
    for module, imported in package_graph().items():
        if slice_of(module) is None:
            continue  # the cores (config/parse.py, security/isolation.py, program.py) take every slice
        for target in imported:
            if slice_of(target) not in (None, slice_of(module)) and (module, target) not in COMPOSED:
                assert target.endswith((".specs", ".config", ".fabric", ".tcpxo_plan")), (
                    f"{module} imports {target}: import its slice's specs or config"
                )


LOADS_AN_SDK = frozenset(
    {
        "llmd_fleet.checks",
        "llmd_fleet.cli.bench.report",
        "llmd_fleet.cli.bench.workload",
        "llmd_fleet.cli.main",
        "llmd_fleet.cli.plan_sections",
        "llmd_fleet.cli.policy_check",
        "llmd_fleet.cli.render",
        "llmd_fleet.cli.synth",
        "llmd_fleet.facade.component",
        "llmd_fleet.images.build",
        "llmd_fleet.layers.gateway.bbr",
        "llmd_fleet.layers.observability.dashboards",
        "llmd_fleet.layers.observability.live",
        "llmd_fleet.layers.serving.pod",
        "llmd_fleet.platform.accelerators",
        "llmd_fleet.platform.helm",
        "llmd_fleet.platform.lws",
        "llmd_fleet.program",
        "llmd_fleet.security.isolation",
        "llmd_fleet.targets.declared",
        "llmd_fleet.targets.eks.build",
        "llmd_fleet.targets.eks.cluster",
        "llmd_fleet.targets.eks.database",
        "llmd_fleet.targets.gke.build",
        "llmd_fleet.targets.gke.cluster",
        "llmd_fleet.targets.gke.database",
        "llmd_fleet.targets.gke.tcpxo",
        "llmd_fleet.targets.onprem.build",
        "llmd_fleet.targets.onprem.cluster",
    }
)
"""The modules that load Pulumi, a cloud SDK or grafana-foundation-sdk, themselves or through
another module (the policy pack, `llmd_fleet.policies`, runs under the policy SDK and is all of
it). Every other module is pure, whatever its file is called: a new module is pure until it is
listed here, and a listed module that no longer loads an SDK fails until it is taken off (the
list only shrinks). A layer's component module, the one its registry record names (`build`,
`REGISTERED_COMPONENTS`), is its Pulumi half by definition and is not listed."""

REGISTERED_COMPONENTS = frozenset(spec.component[0] for spec in registry.LAYERS if spec.component is not None)
"""The modules of the layers' components (llmd_fleet/stack/registry.py), which load Pulumi."""


def sdk_modules() -> set[str]:
    """The package's modules that reach an SDK at run time (inside functions too)."""
    graph = package_graph()
    direct = {
        module
        for module in graph
        if any(m.startswith(("pulumi", "grafana")) for m in imports(PACKAGE.parent / module_path(module)))
    }
    found = set()
    for module in graph:
        reached = {module}
        todo = [module]
        while todo:
            for imported in graph[todo.pop()] - reached:
                reached.add(imported)
                todo.append(imported)
        if reached & direct:
            found.add(module)
    return found


def test_purity_is_by_module():
    """Only the listed modules load an SDK; the pure builders among them the file names missed
    (the vLLM command line, the endpoint picker's config) are pure."""
    loads = {m for m in sdk_modules() if not m.startswith("llmd_fleet.policies")}
    assert {"llmd_fleet.layers.serving.vllm", "llmd_fleet.layers.router.epp_config"}.isdisjoint(loads)
    assert sorted(loads - LOADS_AN_SDK - REGISTERED_COMPONENTS) == [], "pure until listed in LOADS_AN_SDK"
    assert sorted((LOADS_AN_SDK | REGISTERED_COMPONENTS) - loads) == [], "pure now: take it off LOADS_AN_SDK"
    assert not LOADS_AN_SDK & REGISTERED_COMPONENTS, "a registered component: take it off LOADS_AN_SDK"


def module_path(module: str) -> Path:
    path = Path(*module.split("."))
    return path / "__init__.py" if (PACKAGE.parent / path).is_dir() else path.with_suffix(".py")


def test_no_import_cycle_between_modules():
    """No module imports itself through others, at import time or inside a function (the import
    a function defers is still a dependency: it only hides the cycle from the interpreter)."""
    assert cycles(package_graph()) == []


def test_the_cycle_check_sees_a_cycle():
    """The check is not vacuous: a cycle through a third module is found, a diamond is not one."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) == []


def test_dev_tooling_lives_outside_the_package():
    """The wheel packs components/llmd_fleet whole, so repository tooling stays out of it by living
    in devtools/: no Go module, twin or upstream-tool check inside the package."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["components/llmd_fleet"]
    assert not list(PACKAGE.rglob("go.mod"))
    assert not [p for p in PACKAGE.rglob("*") if p.name in ("twin", "vllm_check", "promtool", "golden.py")]


def devtools_imports(source: str) -> list[str]:
    """The devtools modules a source file imports, statically or by name (`import_module`)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "devtools"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "devtools":
            found.append(node.module or "")
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.split(".")[0] == "devtools"
        ):
            found.append(node.args[0].value)
    return found


def test_the_package_never_imports_devtools():
    """The wheel ships without devtools/, so no module of the package reaches for it, not even from
    a checkout at run time."""
    offenders = {
        str(path.relative_to(REPO)): devtools_imports(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if devtools_imports(path.read_text())
    }
    assert offenders == {}


def test_the_devtools_import_check_sees_each_form():
    source = "import devtools.twin\nfrom devtools import x\nimport_module('devtools.twin.cli')\nimport os\n"
    assert devtools_imports(source) == ["devtools.twin", "devtools", "devtools.twin.cli"]


def devtools_graph() -> dict[str, set[str]]:
    """devtools module -> the devtools modules it imports, inside functions too."""
    paths = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((REPO / "devtools").rglob("*.py"))
    }
    return {
        name: {m for m in imports(path, REPO) if m in paths and m != name} for name, path in paths.items()
    }


def test_no_import_cycle_between_devtools_modules():
    """The twin's checks layer (manifests, then lws_checks, pods, engine, engine_e2e, e2e) and the
    data plane enters them without coming back: no circle, counting imports inside functions."""
    graph = devtools_graph()
    assert {"devtools.twin.e2e", "devtools.twin.pods", "devtools.twin.manifests"} <= set(graph)
    assert "devtools.twin.pods" in graph["devtools.twin.e2e"]
    assert cycles(graph) == []


AREA_ORDER = (
    "versions",
    "conventions",
    "labels",
    "models",
    "core",
    "config",
    "images",
    "targets",
    "plan",
    "platform",
    "layers",
    "stack",
    "security",
    "program",
    "cluster",
    "facade",
    "policies",
    "cli",
    "checks",
)
"""The library's top-level areas (its folders and top-level modules), bottom first: an area
imports only areas below it, but for `UPWARD`."""
UPWARD: dict[tuple[str, str], str] = {}
"""The area imports that still point up, each with why: the list only shrinks (a pair that no
longer imports up fails until it is taken off). Empty: every area imports only areas below it."""


def area_edges() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(area, area) -> the module imports between them (`llmd_fleet` itself left out)."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, imported in package_graph().items():
        for other in imported:
            pair = (module.split(".")[1], other.split(".")[1]) if module != "llmd_fleet" else None
            if pair is not None and pair[0] != pair[1]:
                edges.setdefault(pair, []).append((module, other))
    return edges


def upward(edges: dict[tuple[str, str], list[tuple[str, str]]]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in edges if AREA_ORDER.index(a) < AREA_ORDER.index(b)}


def test_areas_form_layers():
    """The top-level areas are ordered, every import points down but the listed ones, and with
    those the areas have no cycle but the ones they close."""
    edges = area_edges()
    assert {a for pair in edges for a in pair} <= set(AREA_ORDER)
    assert sorted(upward(edges) - set(UPWARD)) == [], "an area imports one above it"
    assert sorted(set(UPWARD) - upward(edges)) == [], "no longer upward: take it off UPWARD"
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if (a, b) not in UPWARD:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    assert cycles(graph) == []


def test_the_area_order_sees_an_upward_import():
    """The check is not vacuous: config importing a layer points up."""
    planted = {("config", "layers"): [("llmd_fleet.config.x", "llmd_fleet.layers.serving.config")]}
    assert upward(planted) == {("config", "layers")}
