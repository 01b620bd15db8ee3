"""The vendored CRD schemas in schemas/crds: every file is listed in its SOURCES.md with the sha256
of its bytes, and the directory alone holds every CRD the stacks' custom resources need."""

import functools
import hashlib
from pathlib import Path

import pytest

from llmd_fleet.cli.check import (
    BUILTIN_GROUPS,
    CrdSchemas,
    check_manifests,
    crd_directories,
    project_crd_dir,
)
from llmd_fleet.cli.render import render_files
from llmd_fleet.cli.synth import synthesize
from llmd_fleet.core.yaml_documents import yaml_documents
from tests.support import STACKS_DIR, all_stacks

CRD_DIR = project_crd_dir()
SOURCES = CRD_DIR / "SOURCES.md"


def _vendored_files() -> list[str]:
    """Every YAML file check reads from the project's directory, relative to it."""
    return sorted(p.relative_to(CRD_DIR).as_posix() for p in CRD_DIR.rglob("*.y*ml"))


def _sources_rows() -> dict[str, dict[str, str]]:
    """The SOURCES.md table: file path -> {column header: cell}."""
    lines = [line.strip() for line in SOURCES.read_text().splitlines() if line.strip().startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert {"file (here)", "kind", "sha256"} <= set(header), header
    assert set(lines[1]) <= set("|-: "), "the header must be followed by its separator row"
    rows: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        row = dict(zip(header, cells, strict=True))
        file = row["file (here)"].strip("`")
        assert file not in rows, f"{file} is listed twice"
        rows[file] = row
    return rows


def test_every_vendored_file_is_listed_with_its_sha256():
    rows = _sources_rows()
    files = _vendored_files()
    assert files, f"no CRD files under {CRD_DIR}"
    assert sorted(rows) == files, "SOURCES.md must list exactly the YAML files of schemas/crds"
    for file in files:
        digest = hashlib.sha256((CRD_DIR / file).read_bytes()).hexdigest()
        assert rows[file]["sha256"].strip("`") == digest, f"{file} changed: sha256 {digest}"


def test_every_vendored_file_is_one_crd_of_the_kind_its_row_names():
    for file, row in _sources_rows().items():
        documents = [d for d in yaml_documents((CRD_DIR / file).read_bytes()) if d is not None]
        assert len(documents) == 1, file
        (crd,) = documents
        assert crd["kind"] == "CustomResourceDefinition", file
        assert crd["spec"]["names"]["kind"] == row["kind"], file
        assert file.startswith(f"{crd['spec']['group']}/"), "files are kept under their API group"


@functools.cache
def _rendered(stack: str) -> tuple[str, dict[str, str]]:
    """(Kubernetes version, manifests/ path -> text) of a stack synthesized in-process."""
    synthesis = synthesize(STACKS_DIR, stack)
    files = {path: text for path, text in render_files(synthesis).items() if path.startswith("manifests/")}
    return synthesis.config.target.kubernetes_version, files


def _custom_resource_kinds(files: dict[str, str]) -> set[tuple[str, str, str]]:
    kinds = set()
    for text in files.values():
        for doc in yaml_documents(text):
            if doc is None:
                continue
            group, _, version = str(doc["apiVersion"]).rpartition("/")
            if group not in BUILTIN_GROUPS:
                kinds.add((group, version, str(doc["kind"])))
    return kinds


@pytest.mark.parametrize("stack", all_stacks())
def test_every_rendered_custom_resource_has_a_vendored_crd(stack):
    _, files = _rendered(stack)
    kinds = _custom_resource_kinds(files)
    assert kinds, f"{stack} renders no custom resources"
    crds = CrdSchemas([CRD_DIR])
    missing = []
    for group, version, kind in sorted(kinds):
        try:
            crds.validator(group, version, kind)
        except LookupError as exc:
            missing.append(str(exc))
    assert not missing, missing


@pytest.mark.parametrize("stack", all_stacks())
def test_every_stack_checks_with_the_vendored_crds_alone(stack, tmp_path: Path):
    kubernetes_version, files = _rendered(stack)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert crd_directories([]) == [CRD_DIR]
    count, findings = check_manifests(tmp_path / "manifests", kubernetes_version, [])
    assert count and not findings, [str(f) for f in findings]
