"""The target kinds come from one registry (llmd_fleet/targets/specs.py `SPECS`): the `target`
union of stack/model.py is built from each spec's model, whose `kind` must be its own; the Pulumi
halves (`BUILDS`), the section kinds and the cloud SDK extras (pyproject.toml's optional
dependencies) are checked against it, and the tables derived from it hold no second list of
kinds."""

import dataclasses
import importlib
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import pytest
from packaging.requirements import Requirement
from pydantic import TypeAdapter

import llmd_fleet
from llmd_fleet.config.base import ConfigModel
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.responses.config import ResponsesDatabaseConfig, database_model
from llmd_fleet.stack.model import StackConfig, target_union
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.stack.registry import TARGET_EXPORTS
from llmd_fleet.targets.base import ResponsesStore, TargetBase, TargetSpec, store_settings
from llmd_fleet.targets.extras import IMAGE_BUILD_EXTRA, TARGET_EXTRAS
from llmd_fleet.targets.specs import BUILDS, SECTION_KINDS, SPECS
from tests.support import REPO


def model_kinds() -> dict[str, tuple[str, ...]]:
    """Each spec's kind -> the `kind` values its model accepts (its `Literal`)."""
    return {kind: get_args(spec.config.model_fields["kind"].annotation) for kind, spec in SPECS.items()}


def union_kinds() -> tuple[str, ...]:
    """The kinds of the `target` union's members, in its order."""
    members = get_args(StackConfig.model_fields["target"].annotation)
    assert members, "the target field is a union of one model per kind"
    return tuple(kind for member in members for kind in get_args(member.model_fields["kind"].annotation))


def pyproject_extras() -> dict[str, set[str]]:
    """extra -> the distributions it pulls (pyproject.toml)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {
        extra: {Requirement(line).name for line in lines}
        for extra, lines in project["optional-dependencies"].items()
    }


def disagreements(
    registry: Iterable[str],
    named: Mapping[str, Iterable[str]],
    sdk_extras: Mapping[str, tuple[str, str, str]],
    extras: Mapping[str, set[str]],
    other_extras: Iterable[str],
) -> list[str]:
    """What disagrees with the registry's kinds: a list of kinds (`named`) that is not the same
    set, a kind's SDK extra that pyproject.toml does not declare with its distribution, an extra
    of pyproject.toml no kind (nor `other_extras`) owns."""
    kinds = set(registry)
    found = [
        f"{where}: {sorted(set(names) ^ kinds)}" for where, names in named.items() if set(names) != kinds
    ]
    for kind, (extra, distribution, _module) in sdk_extras.items():
        if distribution not in extras.get(extra, set()):
            found.append(f"{kind}: pyproject.toml has no extra {extra} with {distribution}")
    owned = {extra for extra, _, _ in sdk_extras.values()} | set(other_extras)
    found += [f"pyproject.toml extra {extra} belongs to no kind" for extra in sorted(set(extras) - owned)]
    return found


def test_every_list_of_kinds_is_the_registry():
    assert {"onprem", "gke"} <= set(SPECS)
    assert (
        disagreements(
            SPECS,
            {"BUILDS": BUILDS, "target union": union_kinds()},
            TARGET_EXTRAS,
            pyproject_extras(),
            [IMAGE_BUILD_EXTRA[0]],
        )
        == []
    )


def test_the_check_sees_each_disagreement():
    """Not vacuous: a kind missing from a list, an extra pyproject.toml lacks, an orphan extra."""
    found = disagreements(
        ["onprem", "azure"],
        {"BUILDS": ["onprem"]},
        {"azure": ("azure", "pulumi-azure-native", "pulumi_azure_native")},
        {"gcp": {"pulumi-gcp"}},
        [],
    )
    assert found == [
        "BUILDS: ['azure']",
        "azure: pyproject.toml has no extra azure with pulumi-azure-native",
        "pyproject.toml extra gcp belongs to no kind",
    ]


def test_the_derived_tables_follow_the_specs():
    """The section kinds; the union lists the kinds in registry order (the config reference and an
    unknown kind's error name them in it), each spec's model accepting its own kind only."""
    assert set(SECTION_KINDS) == {spec.section for spec in SPECS.values() if spec.section}
    assert union_kinds() == tuple(SPECS)
    assert model_kinds() == {kind: (kind,) for kind in SPECS}


def test_an_unknown_kind_is_refused_with_the_registrys_kinds():
    """The union's tags are the registry's: the error names the key and every kind, in order."""
    with pytest.raises(ConfigError) as error:
        parse_config({"target": {"kind": "azure", "kubernetesVersion": "1.34.2"}})
    kinds = [f"'{kind}'" for kind in SPECS]
    allowed = ", ".join(kinds[:-1]) + f" or {kinds[-1]}"
    assert f"llmd-fleet:target.kind: must be one of {allowed} (got 'azure')" in str(error.value)


def model_disagreements(specs: Mapping[str, TargetSpec]) -> list[str]:
    """A spec whose model does not accept exactly its own kind (the union would route it to
    another kind's rules)."""
    return [
        f"{kind}: its model's kind is {list(get_args(spec.config.model_fields['kind'].annotation))}"
        for kind, spec in specs.items()
        if get_args(spec.config.model_fields["kind"].annotation) != (kind,)
    ]


class _StubTarget(TargetBase):
    """A planted fifth kind."""

    kind: Literal["azure_stub"]


class _StubDatabase(ConfigModel):
    """Its planted response store's section."""

    sku: str = "GP_Standard_D2ds_v5"
    """A planted key."""


def _planted(**changes: Any) -> dict[str, TargetSpec]:
    """The registry with a fifth kind added (a copy of onprem's spec with `changes`)."""
    stub = dataclasses.replace(SPECS["onprem"], kind="azure_stub", config=_StubTarget, **changes)
    return {**SPECS, "azure_stub": stub}


def test_each_kinds_model_accepts_its_own_kind():
    assert model_disagreements(SPECS) == []
    # Not vacuous: a spec registered with another kind's model is named.
    wrong = {**SPECS, "azure_stub": dataclasses.replace(SPECS["onprem"], kind="azure_stub")}
    assert model_disagreements(wrong) == ["azure_stub: its model's kind is ['onprem']"]


def test_a_planted_kind_reaches_the_union_and_the_database_sections():
    """The union and `responses.database` follow the registry: a kind added to it is accepted
    with its own model, and its store's section appears, without an edit elsewhere."""
    adapter = TypeAdapter(target_union(_planted()))
    target = adapter.validate_python({"kind": "azure_stub", "kubernetesVersion": "1.34.2"})
    assert isinstance(target, _StubTarget)
    assert get_args(get_args(target_union(_planted()))[0])[-1] is _StubTarget
    store = ResponsesStore(
        "azure", managed=True, settings=_StubDatabase, settings_doc="kind azure_stub: planted."
    )
    model = database_model(_planted(responses=store))
    assert list(model.model_fields)[-4:] == ["gke", "eks", "azure", "onprem"]
    assert model.model_fields["azure"].description == "kind azure_stub: planted."
    assert store_settings(model.model_validate({"azure": {"sku": "x"}}), "azure", _StubDatabase).sku == "x"
    assert list(database_model(SPECS).model_fields) == list(ResponsesDatabaseConfig.model_fields)


def test_the_kinds_components_are_exported_from_their_specs():
    """Each kind's `components` and their Args are public, from the module its spec names, and
    nothing else under `targets/<kind>/` is (a kind exports nothing by name elsewhere)."""
    named = {
        name: module
        for spec in SPECS.values()
        for module, _, component in (entry.partition(":") for entry in spec.components)
        for name in (component, f"{component}Args")
    }
    assert named == TARGET_EXPORTS
    assert {"OnPremCluster", "GkeResponsesArgs", "EksCluster"} <= set(TARGET_EXPORTS)
    assert set(TARGET_EXPORTS) <= set(llmd_fleet.__all__)
    assert not set(TARGET_EXPORTS) & set(llmd_fleet._EXPORTS)
    for name, module in TARGET_EXPORTS.items():
        assert module.startswith("llmd_fleet.targets."), name
        assert hasattr(importlib.import_module(module), name), (module, name)
