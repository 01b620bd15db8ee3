"""The target kinds come from one registry (llmd_fleet/targets/specs.py `SPECS`): the `target`
union of stack/model.py is built from each spec's model, whose `kind` must be its own; the Pulumi
halves (`BUILDS`), the section kinds and the cloud SDK extras (pyproject.toml's optional
dependencies) are checked against it, and the tables derived from it hold no second list of
kinds."""

import tomllib
from collections.abc import Iterable, Mapping
from typing import get_args

import pytest
from packaging.requirements import Requirement

from llmd_fleet.core.problems import ConfigError
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.parse import parse_config
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
    assert allowed == "'onprem', 'gke', 'eks' or 'local'"
