"""The registry (llmd_fleet/stack/registry.py) knows every layer and target folder, and the stack's
tables are the registry's: a layer or a target added without its record fails here."""

from collections import Counter
from importlib import import_module
from pathlib import Path

import pulumi
import pytest

from llmd_fleet.stack import registry
from llmd_fleet.stack.model import StackConfig
from tests.support import ENGINE_IMAGE, REPO, STACKS_DIR, record, stack_raw_config

PACKAGE = REPO / "components" / "llmd_fleet"
# StackConfig fields that are not sections: the several-models form (its own key), the model
# scope of a view and whether each secret is set.
NOT_SECTIONS = {"models", "model_scope", "has_hf_token", "has_registry_password", "has_responses_db_password"}


def unregistered(root: Path, registered: frozenset[str]) -> list[str]:
    """The package folders under `root` the registry does not know."""
    return sorted(
        path.name
        for path in root.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file() and path.name not in registered
    )


def test_every_layer_folder_is_registered():
    assert {"serving", "router", "gateway"} <= registry.REGISTERED_LAYERS
    assert unregistered(PACKAGE / "layers", registry.REGISTERED_LAYERS) == []


def test_every_target_folder_is_registered():
    assert {"onprem", "gke"} <= registry.REGISTERED_TARGETS
    assert unregistered(PACKAGE / "targets", registry.REGISTERED_TARGETS) == []


def test_a_planted_folder_is_found(tmp_path):
    """The check is not vacuous: a layer folder without its record is named."""
    for name in ("serving", "lora"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text('"""A layer."""\n')
    (tmp_path / "__pycache__").mkdir()
    assert unregistered(tmp_path, registry.REGISTERED_LAYERS) == ["lora"]


def without_tests(package: Path, tests: Path) -> list[str]:
    """The package folders under `package` whose tests folder of the same name under `tests` is
    missing, is not a package or holds no `test_*.py`."""
    return sorted(
        path.name
        for path in package.iterdir()
        if path.is_dir()
        and (path / "__init__.py").is_file()
        and not ((tests / path.name / "__init__.py").is_file() and any((tests / path.name).glob("test_*.py")))
    )


@pytest.mark.parametrize("area", ["layers", "targets"])
def test_every_layer_and_target_folder_has_its_tests_folder(area):
    """tests/layers/<layer>/ and tests/targets/<kind>/ follow the slices (docs/architecture.md)."""
    assert without_tests(PACKAGE / area, REPO / "tests" / area) == []


def test_a_folder_without_its_tests_is_found(tmp_path):
    """The check is not vacuous: a layer with no tests folder, one without `__init__.py` and one
    without a test module are each named."""
    package, tests = tmp_path / "layers", tmp_path / "tests"
    for name in ("serving", "router", "gateway", "lora"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text('"""A layer."""\n')
    (package / "__pycache__").mkdir()
    for name, files in {"serving": ("__init__.py", "test_vllm.py"), "router": ("test_router.py",)}.items():
        (tests / name).mkdir(parents=True)
        for file in files:
            (tests / name / file).write_text("")
    (tests / "gateway").mkdir()
    (tests / "gateway" / "__init__.py").write_text("")
    assert without_tests(package, tests) == ["gateway", "lora", "router"]


def test_every_registered_folder_exists():
    for name in registry.REGISTERED_LAYERS:
        assert (PACKAGE / "layers" / name / "__init__.py").is_file(), name
    for name in registry.REGISTERED_TARGETS:
        assert (PACKAGE / "targets" / name / "__init__.py").is_file(), name


def test_the_stack_model_has_exactly_the_registered_sections():
    """Each section key is owned by one record, and StackConfig declares a field for each."""
    keys = [key for spec in registry.LAYERS for key in spec.keys]
    assert len(keys) == len(set(keys))
    assert set(StackConfig.model_fields) - NOT_SECTIONS == set(keys)
    assert list(registry.OBJECT_KEYS) == ["target", "fleet", "model", "serving"]
    assert set(registry.OPTIONAL_OBJECT_KEYS) == set(keys) - set(registry.OBJECT_KEYS)


def test_the_tables_come_from_the_records():
    assert tuple(rule for spec in registry.LAYERS for rule in spec.rules) == registry.RULES
    flows = [spec.namespace_flows for spec in registry.LAYERS if spec.namespace_flows is not None]
    assert tuple(flows) == registry.NAMESPACE_FLOWS
    # An owner's policies before the rules a later layer appends to them (security/isolation.py).
    names = [spec.name for spec in registry.LAYERS if spec.namespace_flows is not None]
    assert names.index("serving") < names.index("modelexpress")
    assert names.index("gateway") < names.index("responses")


def test_every_build_is_a_component_of_its_layer():
    for spec in registry.LAYERS:
        if spec.build is None:
            continue
        module, _, name = spec.build.partition(":")
        assert module.startswith(f"llmd_fleet.layers.{spec.name}."), spec.build
        component = getattr(import_module(module), name)
        assert issubclass(component, pulumi.ComponentResource), spec.build


def test_every_layer_the_program_declares_is_exported_with_its_args():
    """A layer's component and its `<Component>Args` TypedDict are public names unless another
    layer's component declares it (`declared_by`)."""
    import llmd_fleet

    declared = [spec for spec in registry.LAYERS if spec.component is not None and spec.declared_by is None]
    assert {spec.name for spec in declared} >= {"serving", "router", "gateway", "responses"}
    for spec in declared:
        assert spec.component is not None
        module, name = spec.component
        assert getattr(llmd_fleet, name) is getattr(import_module(module), name), spec.name
        args = getattr(llmd_fleet, f"{name}Args")
        assert isinstance(args, type) and issubclass(args, dict) and args.__annotations__, spec.name
        assert {name, f"{name}Args"} <= set(llmd_fleet.__all__), spec.name
    for spec in registry.LAYERS:
        if spec.declared_by is not None:
            assert spec.declared_by in registry.REGISTERED_LAYERS and spec.exports == {}, spec.name


def declaration_problems(specs: tuple[registry.LayerSpec, ...]) -> list[str]:
    """How the records disagree with the program's loop (llmd_fleet/program.py
    `add_serving_layers`): a layer the program declares without a `Declaration`, a builder outside
    its layer's folder or that is not there, a dependency on a layer declared later or not at all,
    two layers at one position."""
    problems = []
    positions = Counter(spec.declaration.position for spec in specs if spec.declaration is not None)
    position = {spec.name: spec.declaration.position for spec in specs if spec.declaration is not None}
    for spec in specs:
        declaration = spec.declaration
        if declaration is None:
            if spec.component is not None and spec.declared_by is None:
                problems.append(f"{spec.name}: exported, but the program does not declare it")
            continue
        for reference in filter(None, (declaration.builder, declaration.input_problems)):
            module, _, name = reference.partition(":")
            if spec.folder and not module.startswith(f"llmd_fleet.layers.{spec.name}."):
                problems.append(f"{spec.name}: {reference} is outside its folder")
            elif not callable(getattr(import_module(module), name, None)):
                problems.append(f"{spec.name}: {reference} is not a function")
        for other in declaration.after:
            if position.get(other, declaration.position) >= declaration.position:
                problems.append(f"{spec.name}: depends on {other}, which is not declared before it")
        if positions[declaration.position] > 1:
            problems.append(f"{spec.name}: shares position {declaration.position}")
    return problems


def test_every_layer_the_program_declares_has_its_declaration():
    """The program's loop over the records (`DECLARED`) declares every exported layer from a
    builder in the layer's own folder, each after what it depends on."""
    assert declaration_problems(registry.LAYERS) == []
    names = [spec.name for spec in registry.DECLARED]
    # The program's order: serving first, the gateway before the routers, the policies and the
    # canary before the responses API, observability before the autoscalers that read it.
    order = ["serving", "gateway", "router", "network", "canary", "responses", "observability", "autoscaling"]
    assert [name for name in names if name in order] == order


def test_a_declaration_that_disagrees_is_found():
    """Not vacuous: a planted record for each way a declaration can disagree is named."""
    from dataclasses import replace

    records = {spec.name: spec for spec in registry.LAYERS}
    router = records["router"]
    assert router.declaration is not None
    planted = (
        records["serving"],
        records["gateway"],
        replace(router, declaration=replace(router.declaration, after=("observability",))),
        replace(records["observability"], declaration=None),
        replace(
            records["autoscaling"],
            declaration=registry.Declaration("llmd_fleet.layers.router.component:declare", position=20),
        ),
        replace(
            records["responses"],
            declaration=registry.Declaration("llmd_fleet.layers.responses.component:absent", position=60),
        ),
    )
    assert declaration_problems(planted) == [
        "gateway: shares position 20",
        "router: depends on observability, which is not declared before it",
        "observability: exported, but the program does not declare it",
        "autoscaling: llmd_fleet.layers.router.component:declare is outside its folder",
        "autoscaling: shares position 20",
        "responses: llmd_fleet.layers.responses.component:absent is not a function",
    ]


@pytest.mark.parametrize("stack", ["onprem-h100", "onprem-h100-multimodel"])
def test_serving_layers_hold_what_each_record_declared(stack):
    """`ServingLayers` is keyed by the records: each declared layer's components, of its record's
    component type, one per model for a layer declared per model; the typed accessors are the
    first model's."""
    import pulumi_kubernetes as k8s

    from llmd_fleet.layers.assembly import ServingLayersArgs
    from llmd_fleet.layers.router.component import Router
    from llmd_fleet.program import ServingLayers, add_serving_layers
    from llmd_fleet.stack.parse import parse_config
    from llmd_fleet.stack.plans import plan_models

    config = parse_config(stack_raw_config(stack))
    models = max(1, len(config.models))
    found: list[ServingLayers] = []

    def build() -> None:
        args: ServingLayersArgs = {
            "config": config,
            "plan": plan_models(config)[0],
            "engine_image": ENGINE_IMAGE,
        }
        if config.responses is not None:
            args["responses_password"] = "a-test-password-of-16"
        found.append(add_serving_layers(args, k8s.Provider("cluster")))

    record(build)
    (layers,) = found
    expected = {"serving", "gateway", "router", "network", "observability"}
    assert expected | ({"responses"} if models == 1 else set()) <= set(layers.components)
    assert set(layers.components) <= {spec.name for spec in registry.DECLARED}
    assert "responses" not in layers.components or models == 1  # single-model stacks only
    for spec in registry.DECLARED:
        components = layers.components.get(spec.name, ())
        if spec.component is not None and components:
            module, name = spec.component
            assert layers.all(spec.name, getattr(import_module(module), name)) == components, spec.name
        if components and spec.per_model:
            assert len(components) == models, spec.name
    assert layers.serving is layers.components["serving"][0]
    assert layers.router is layers.components["router"][0] and layers.gateway is not None
    assert layers.get("canary", object) is None
    with pytest.raises(TypeError, match="not a Router"):
        layers.get("serving", Router)


def test_per_model_is_what_the_program_does_with_several_models():
    """With `llmd-fleet:models`, a layer the program declares per model has one component per
    model; any other layer at most one."""
    from llmd_fleet.cli.synth import synthesize

    stack = "onprem-h100-multimodel"
    components = Counter(
        r.type.rsplit(":", 1)[-1] for r in synthesize(STACKS_DIR, stack).resources if not r.custom
    )
    models = len(stack_raw_config(stack)["models"])
    assert models > 1
    for spec in registry.LAYERS:
        if spec.component is None:
            continue
        count = components[spec.component[1]]
        if not spec.per_model:
            assert count <= 1, spec.name
        elif spec.declared_by is None:
            assert count == models, spec.name
        else:  # declared by its owner's component, where that model enables it
            assert count <= models, spec.name


def test_every_build_module_keeps_the_target_contract():
    """Each kind's Pulumi half has what the program calls (the type checker holds the signatures:
    the assignments below are checked against `TargetBuild`)."""
    from llmd_fleet.targets.declared import TargetBuild
    from llmd_fleet.targets.eks import build as eks_build
    from llmd_fleet.targets.gke import build as gke_build
    from llmd_fleet.targets.onprem import build as onprem_build
    from llmd_fleet.targets.specs import BUILDS

    builds: dict[str, TargetBuild] = {
        "llmd_fleet.targets.onprem.build": onprem_build,
        "llmd_fleet.targets.gke.build": gke_build,
        "llmd_fleet.targets.eks.build": eks_build,
    }
    assert set(BUILDS.values()) == set(builds)
    for module in builds:
        loaded = import_module(module)
        for name in ("declare", "image_registry", "responses_database"):
            assert callable(getattr(loaded, name)), f"{module}.{name}"
