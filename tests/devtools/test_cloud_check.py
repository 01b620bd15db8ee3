"""make check-cloud: the leaf walk, the checks against a model, the tables' coverage of every
rendered GKE and EKS input, the generated docs/cloud-check.md and the stack discovery."""

from pathlib import Path

import pytest
import yaml

from devtools.cloud_check import cli
from devtools.cloud_check.check import Result, check_resource, leaves
from devtools.cloud_check.docs import DOCS_PATH, render_docs
from devtools.cloud_check.models import AwsModel, GoogleModel, Leaf, ModelError, python_pattern
from devtools.cloud_check.tables import TABLES, Api
from llmd_fleet.cli.paths import CHECKOUT

GOLDEN = CHECKOUT / "tests" / "golden"
STACKS = CHECKOUT / "stacks"


def _cloud_files() -> list[Path]:
    return sorted(
        path for stack in cli.cloud_stacks(STACKS) for path in (GOLDEN / stack / "cloud").glob("*.yaml")
    )


def test_the_cloud_stacks_are_found_from_their_target_kind():
    assert cli.cloud_stacks(STACKS) == ["eks-h100", "eks-h100-2node", "gke-h100", "gke-h100-2node"]


def test_a_new_gke_or_eks_stack_file_joins_by_itself(tmp_path: Path):
    for name, kind in [("b-gke", "gke"), ("a-eks", "eks"), ("c-onprem", "onprem")]:
        (tmp_path / f"Pulumi.{name}.yaml").write_text(f"config:\n  llmd-fleet:target:\n    kind: {kind}\n")
    assert cli.cloud_stacks(tmp_path) == ["a-eks", "b-gke"]


def test_a_stack_that_is_not_gke_or_eks_is_bad_input(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["onprem-h100"]) == 2
    err = capsys.readouterr().err
    assert "llmd-fleet:target.kind" in err and "onprem-h100 (onprem)" in err


def test_an_unknown_stack_is_bad_input(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["no-such-stack"]) == 2
    assert "no stack file" in capsys.readouterr().err


@pytest.mark.parametrize("path", _cloud_files(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_rendered_input_has_a_row(path: Path):
    """A leaf input in no table would be "unmapped": it must be mapped or listed with a reason."""
    document = yaml.safe_load(path.read_text())
    table = TABLES.get(document["type"])
    assert table is not None, f"no table for {document['type']}"
    missing = [
        p
        for p, _, _ in leaves(document["inputs"], table.fields)
        if p not in table.fields and "*" not in table.fields
    ]
    assert missing == []


def test_the_goldens_of_both_clouds_are_covered():
    kinds = {yaml.safe_load(p.read_text())["type"].split(":")[0] for p in _cloud_files()}
    assert {"aws", "gcp"} <= kinds


def test_docs_cloud_check_md_is_the_generated_text():
    assert DOCS_PATH.read_text() == render_docs(), "run `uv run python -m devtools.cloud_check --docs`"


def test_leaves_name_lists_and_maps():
    fields = {"tags{key}": Api("x:y"), "tags{value}": Api("x:y")}
    found = list(leaves({"a": [{"b": 1}, {"b": 2}], "tags": {"k": "v"}}, fields))
    assert found == [
        ("a[].b", "a[0].b", 1),
        ("a[].b", "a[1].b", 2),
        ("tags{key}", "tags{k}", "k"),
        ("tags{value}", "tags{k}", "v"),
    ]


# A botocore-shaped model and a discovery document, small enough to read.
AWS = AwsModel(
    "svc",
    {
        "CreateThingRequest": {
            "type": "structure",
            "required": ["name", "kind"],
            "members": {
                "name": {"shape": "Name"},
                "kind": {"shape": "Kind"},
                "size": {"shape": "Size"},
                "flag": {"shape": "Boolean"},
                "items": {"shape": "ItemList"},
                "tags": {"shape": "TagMap"},
            },
        },
        "Name": {"type": "string", "min": 2, "max": 5, "pattern": "^[\\p{L}][a-z0-9-]*$"},
        "Kind": {"type": "string", "enum": ["A", "B"]},
        "Size": {"type": "integer", "min": 1, "max": 10},
        "Boolean": {"type": "boolean"},
        "ItemList": {"type": "list", "member": {"shape": "Item"}},
        "Item": {"type": "structure", "members": {"kind": {"shape": "Kind"}}},
        "TagMap": {"type": "map", "key": {"shape": "Name"}, "value": {"shape": "Kind"}},
    },
)


def _aws(path: str, value: object) -> list[str]:
    return AWS.problems(AWS.resolve("CreateThingRequest", path), value)


def test_a_botocore_model_refuses_what_its_shapes_refuse():
    assert _aws("kind", "A") == []
    assert _aws("kind", "C") == ["'C': refused: A | B"]
    assert _aws("items.kind", "C") == ["'C': refused: A | B"]
    assert _aws("tags{value}", "C") == ["'C': refused: A | B"]
    assert _aws("size", 11) == ["11 is above the maximum 10"]
    assert _aws("size", 0) == ["0 is below the minimum 1"]
    assert _aws("size", "3") == ["'3' is not an integer"]
    assert _aws("flag", "true") == [] and _aws("flag", "yes") == ["'yes' is not a boolean"]
    assert _aws("name", "é-1") == []  # \p{L}: any letter
    assert _aws("name", "1ab") == ["'1ab' does not match the pattern ^[\\p{L}][a-z0-9-]*$"]
    assert _aws("tags{key}", "abcdef") == ["'abcdef' is longer than 5 characters"]


def test_a_field_the_model_lacks_is_an_error():
    with pytest.raises(ModelError, match="no member colour"):
        AWS.resolve("CreateThingRequest", "colour")


def test_a_required_member_not_given_is_refused(monkeypatch: pytest.MonkeyPatch):
    from devtools.cloud_check import tables

    class _Models:
        def resolve(self, spec: str) -> tuple[AwsModel, Leaf]:
            return AWS, AWS.resolve("CreateThingRequest", spec.partition(".")[2])

        def get(self, name: str) -> AwsModel:
            return AWS

    table = tables.Table("test", {"name": Api("svc:CreateThingRequest.name")})
    monkeypatch.setitem(tables.TABLES, "t:x:X", table)
    result = Result()
    check_resource(_Models(), "t:x:X", "thing", {"name": "ab"}, result)  # type: ignore[arg-type]
    assert result.checked == 1
    assert result.refused == ["t:x:X thing: CreateThingRequest.kind is required and not given"]
    supplied = tables.Table("test", table.fields, {"svc:CreateThingRequest.kind": "given elsewhere"})
    monkeypatch.setitem(tables.TABLES, "t:x:X", supplied)
    result = Result()
    check_resource(_Models(), "t:x:X", "thing", {"name": "ab", "colour": "red"}, result)  # type: ignore[arg-type]
    assert result.refused == [] and result.unmapped == ["t:x:X thing colour"]


GOOGLE = GoogleModel(
    "api.v1",
    {
        "schemas": {
            "Pool": {
                "properties": {
                    "name": {"type": "string", "pattern": "[a-z](?:[-a-z0-9]{0,3}[a-z0-9])?"},
                    "count": {"type": "string", "format": "int64"},
                    "size": {"type": "integer", "format": "int32"},
                    "config": {"$ref": "Config"},
                }
            },
            "Config": {
                "properties": {
                    "mode": {"type": "string", "enum": ["ON", "OFF"]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                }
            },
        },
        "resources": {
            "pools": {
                "methods": {"insert": {"parameters": {"zone": {"type": "string", "pattern": "[a-z]+"}}}}
            }
        },
    },
)


def test_a_discovery_document_refuses_what_its_schemas_refuse():
    def problems(path: str, value: object) -> list[str]:
        return GOOGLE.problems(GOOGLE.resolve("Pool", path), value)

    assert problems("config.mode", "ON") == []
    assert problems("config.mode", "SPECIFIC") == ["'SPECIFIC': refused: ON | OFF"]
    assert problems("count", 8) == [] and problems("count", "8") == ["'8' is not an integer"]
    assert problems("size", 2**31) == [f"{2**31} is above the maximum {2**31 - 1}"]
    assert problems("name", "abc") == []
    assert problems("name", "abc-defg") == [
        "'abc-defg' does not match the pattern [a-z](?:[-a-z0-9]{0,3}[a-z0-9])?"
    ]
    assert problems("config.labels{value}", 1) == ["1 is not a string"]
    assert GOOGLE.problems(GOOGLE.resolve("api.pools", "insert(zone)"), "us1") == [
        "'us1' does not match the pattern [a-z]+"
    ]


def test_unicode_property_classes_become_ranges():
    assert python_pattern("^[\\p{L}\\p{N}]+$").search("Zürich9")
    assert not python_pattern("^[\\p{L}]+$").search("a b")
    assert python_pattern("\\p{Nd}").search("٣")  # outside a class too


def test_make_check_cloud_runs_in_ci_right_after_checkov():
    makefile = (CHECKOUT / "Makefile").read_text()
    assert "\ncheck-cloud:" in makefile and "python -m devtools.cloud_check $(STACK)" in makefile
    steps = [
        line.removeprefix("step ").strip()
        for line in (CHECKOUT / ".ci" / "run").read_text().splitlines()
        if line.startswith("step make")
    ]
    assert steps.index("make check-cloud") == steps.index("make checkov") + 1


def test_a_free_string_outside_its_documented_table_is_refused():
    from devtools.cloud_check.check import check_value
    from devtools.cloud_check.documented import DOCUMENTED

    class _Models:
        def resolve(self, spec: str) -> tuple[GoogleModel, Leaf]:
            return GOOGLE, Leaf({"type": "string"})

    entry = Api("api.v1:Pool.name", documented="gke-machine-types")
    known = DOCUMENTED["gke-machine-types"].values[0]
    assert check_value(_Models(), entry, known) == []  # type: ignore[arg-type]
    [problem] = check_value(_Models(), entry, "a3-megagpu-16g")  # type: ignore[arg-type]
    assert problem.startswith("'a3-megagpu-16g': not documented: ") and known in problem


def test_a_refusal_line_names_at_most_twenty_allowed_values() -> None:
    from devtools.cloud_check.check import allowed_values

    assert allowed_values(["A", "B"]) == "A | B"
    many = [f"v{i}" for i in range(1000)]
    assert allowed_values(many) == " | ".join(many[:20]) + " | ... (980 more)"
