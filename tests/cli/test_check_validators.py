"""`check`'s validators read once: built-in kinds get the verdict `kubernetes_validate.validate`
gives (its schema files, one validator per kind), CRD files are parsed once per process while
unchanged and read again once changed."""

import copy
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from llmd_fleet.cli.check import CrdSchemas, check_object, schema_version
from llmd_fleet.core.yaml_documents import yaml_document, yaml_documents
from tests.support import REFERENCE_STACK

VERSION = schema_version("1.34.2")


def _library_verdict(obj: dict[str, Any]) -> list[str]:
    """What kubernetes-validate itself says of one built-in object, in check's words."""
    try:
        kubernetes_validate.validate(obj, VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{obj['apiVersion']} {obj['kind']} is not a Kubernetes {VERSION} kind"]
    except kubernetes_validate.ValidationError as exc:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path).lstrip(".")
        return [f"{path or '<root>'}: {exc.message[:300]}"]
    return []


def _broken(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The object with an unknown top-level field, and with its first container's image a number
    (where it has containers), and under an apiVersion the schema set does not serve."""
    variants = [{**copy.deepcopy(obj), "spc": {}}, {**copy.deepcopy(obj), "apiVersion": "v9"}]
    spec = copy.deepcopy(obj).get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("containers"):
        bad = copy.deepcopy(obj)
        bad["spec"]["template"]["spec"]["containers"][0]["image"] = 7
        variants.append(bad)
    return variants


def test_built_in_kinds_get_kubernetes_validates_verdict(rendered) -> None:
    from llmd_fleet.cli.check import BUILTIN_GROUPS

    crds = CrdSchemas([])
    built_in = [
        d for d in rendered(REFERENCE_STACK) if str(d["apiVersion"]).rpartition("/")[0] in BUILTIN_GROUPS
    ]
    kinds = {(d["apiVersion"], d["kind"]) for d in built_in}
    # Groups with a domain (rbac.authorization.k8s.io), without one (apps) and the core group.
    assert {"rbac.authorization.k8s.io/v1", "apps/v1", "v1"} <= {a for a, _ in kinds}, kinds
    refused = 0
    for obj in built_in:
        assert check_object(obj, VERSION, crds) == _library_verdict(obj) == [], obj["kind"]
        for variant in _broken(obj):
            verdict = check_object(variant, VERSION, crds)
            assert verdict == _library_verdict(variant), (variant["kind"], verdict)
            refused += bool(verdict)
    assert refused >= 2 * len(built_in)  # every broken variant was refused, by both


def _crd(path: Path, maximum: int) -> None:
    path.write_text(
        f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {{kind: Widget, plural: widgets}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer, maximum: {maximum}}}
"""
    )


def test_a_crd_file_changed_between_two_reads_is_read_again(tmp_path: Path) -> None:
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 50},
    }
    crd = tmp_path / "widgets.yaml"
    _crd(crd, 100)
    assert check_object(widget, VERSION, CrdSchemas([tmp_path])) == []
    assert check_object(widget, VERSION, CrdSchemas([tmp_path])) == []  # the parsed file, again
    _crd(crd, 10)
    # Same size as before and, on a coarse clock, the same modification time: set it apart.
    stat = crd.stat()
    os.utime(crd, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    (problem,) = check_object(widget, VERSION, CrdSchemas([tmp_path]))
    assert problem.startswith("spec.size:") and "10" in problem


def test_a_crd_file_that_turns_bad_is_refused_not_served_from_the_cache(tmp_path: Path) -> None:
    crd = tmp_path / "widgets.yaml"
    _crd(crd, 100)
    CrdSchemas([tmp_path])
    crd.write_text("kind: CustomResourceDefinition\nspec: [\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        CrdSchemas([tmp_path])


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n---\n---\nb: [x, 'y', 2.5, null, true, 0o17, 2001-12-14]\n",
        "key: |\n  line one\n  line two\nanchor: &a {x: 1}\nalias: *a\n",
        "",
    ],
)
def test_the_fast_loader_reads_as_safe_load_does(text: str) -> None:
    import yaml

    assert list(yaml_documents(text)) == list(yaml.safe_load_all(text))
    assert list(yaml_documents(text.encode())) == list(yaml.safe_load_all(text))
    if "---" not in text:
        assert yaml_document(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("v1", "../../kubernetes-json-schema/master/_definitions"), ("v1", "Name space"), ("v1", "Pod\n"),
     ("v1..", "Pod"), ("apps/v1-x", "Deployment"), ("v1", "Pod.json")],
)  # fmt: skip
def test_a_kind_or_api_version_that_is_no_file_name_is_no_kind(api_version: str, kind: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    assert check_object(obj, VERSION, CrdSchemas([])) == [
        f"{api_version} {kind} is not a Kubernetes {VERSION} kind"
    ]
