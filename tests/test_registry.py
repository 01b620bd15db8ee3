"""The registry (llmd_fleet/stack/registry.py) knows every layer and target folder, and the stack's
tables are the registry's: a layer or a target added without its record fails here."""

from importlib import import_module
from pathlib import Path

import pulumi

from llmd_fleet.stack import registry
from llmd_fleet.stack.model import StackConfig
from tests.support import REPO

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
