"""The version matrix (images/versions.toml): it loads, it has every name the code asks for, its
values are consistent, and no version it pins appears anywhere else in the source."""

import functools
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmd_fleet.images.spec import build_args
from llmd_fleet.versions import VersionMatrix, matrix_path, version_tuple, versions
from tests.helpers import MATRIX, VERSION_SHAPE, matrix_raw, matrix_versions, version_pattern
from tests.support import REPO

# Where a version must never be written down: everything that is code or config, except the matrix.
SCANNED_DIRS = ("components", "infra", "policies", "stacks", "tests", "examples")
SCANNED_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml", ".sh", ".cfg", ".ini"}
THIS_FILE = Path(__file__).resolve()

# Matrix keys whose values are not versions (names, URLs, architectures).
# What a pinned version looks like: 1.34, v0.33.0, 3.4.5-0, 0.7.2.post1, a git commit, a digest.
# Known hard-coded copies, each to be replaced by a read of the matrix; the test below fails once
# one is gone, so this list only shrinks.
KNOWN_COPIES = {
    ("tests/config/test_config.py", "1.34"): "expected error text of the minimum-version check",
}


def _scanned_files() -> Iterator[Path]:
    for directory in SCANNED_DIRS:
        for path in sorted((REPO / directory).rglob("*")):
            if (
                path.is_file()
                and path.suffix in SCANNED_SUFFIXES
                and "__pycache__" not in path.parts
                # Golden rendered output records what the matrix rendered; it pins nothing.
                and not path.is_relative_to(REPO / "tests" / "golden")
                and path.resolve() != THIS_FILE
            ):
                yield path


_COMMENT = re.compile(r"(^|\s)#.*$")


def _code_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of what a file pins, comments left out: a comment that says "GKE 1.34+
    pre-installs the CRDs" states a fact about a platform, it pins nothing. Python is tokenized
    (strings, names and numbers stay, docstrings included); other files lose `# ...` tails."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        for number, line in enumerate(text.splitlines(), 1):
            yield number, _COMMENT.sub("", line)
        return
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


@functools.cache
def hard_coded_versions() -> frozenset[tuple[str, str, int]]:
    """(file, version, line) for every matrix version written down outside the matrix (scanned once
    per test process: the scan reads every file of the repository)."""
    patterns = {version: version_pattern(version) for version in matrix_versions(matrix_raw())}
    hits = set()
    for path in _scanned_files():
        for number, line in _code_lines(path):
            for version, pattern in patterns.items():
                # The substring test first: a line without the digits cannot match the pattern.
                if version in line and pattern.search(line):
                    hits.add((str(path.relative_to(REPO)), version, number))
    return frozenset(hits)


def test_matrix_loads_from_the_checkout():
    assert matrix_path().resolve() == MATRIX.resolve()
    matrix = versions()
    assert isinstance(matrix, VersionMatrix)
    assert VersionMatrix.model_validate(matrix_raw()) == matrix


def test_every_name_the_code_asks_for_is_in_the_matrix():
    """Every versions().image/chart/manifest("<name>") in the source names an existing entry."""
    call = re.compile(r"\.(image|chart|manifest)\(\s*[\"']([A-Za-z0-9._-]+)[\"']\s*\)")
    tables = {"image": "images", "chart": "charts", "manifest": "manifests"}
    raw = matrix_raw()
    asked = set()
    for path in _scanned_files():
        if path.suffix == ".py":
            asked |= {
                (kind, name, str(path.relative_to(REPO))) for kind, name in call.findall(path.read_text())
            }
    assert any(kind == "image" and name == "vllm" for kind, name, _ in asked), "the scan found no calls"
    missing = sorted(
        f"{where}: {kind}({name!r})" for kind, name, where in asked if name not in raw.get(tables[kind], {})
    )
    assert not missing, f"not in {MATRIX.name}: {missing}"


def test_every_version_the_issue_names_is_pinned():
    """Kubernetes (minimum, GKE, EKS), vLLM, CUDA, NIXL, UCX, NVSHMEM, DeepEP, DeepGEMM, gdrcopy."""
    m = versions()
    pinned = {
        "kubernetes.minimum": m.kubernetes.minimum,
        "kubernetes.gke": m.kubernetes.gke,
        "kubernetes.eks": m.kubernetes.eks,
        "vllm": m.vllm.version,
        "cuda": m.build.cuda,
        "nixl": m.build.nixl,
        "ucx": m.build.bundled.ucx,
        "nvshmem": m.build.nvshmem,
        "deepep": m.build.deepep,
        "deepgemm": m.build.bundled.deepgemm,
        "gdrcopy": m.build.gdrcopy,
        "nccl": m.build.bundled.nccl,
        "torch": m.build.torch,
        "efa_installer": m.build.efa_installer,
    }
    assert all(VERSION_SHAPE.match(value) for value in pinned.values()), pinned
    assert m.images and m.charts


def test_matrix_values_agree_with_each_other():
    m = versions()
    # The upstream image is the release the serving image installs.
    assert m.image("vllm").tag == f"v{m.vllm.version}"
    # Managed targets request a version the fleet supports.
    for target in (m.kubernetes.gke, m.kubernetes.eks):
        assert version_tuple(target)[:2] >= version_tuple(m.kubernetes.minimum)
    b = m.build
    assert re.fullmatch(r"\d+\.\d+\.\d+", b.cuda) and b.cuda_major == b.cuda.split(".")[0]
    assert re.fullmatch(r"\d+\.\d+\.\d+-\d+", b.nvshmem), "NVSHMEM release tags are <version>-<release>"
    assert re.fullmatch(r"[0-9a-f]{40}", b.deepep), "DeepEP is pinned by full commit"
    assert b.base_image == f"{b.base_repository}:{b.cuda}-devel-ubuntu{b.ubuntu}" + (
        f"@{b.base_digest}" if b.base_digest else ""
    )
    for name, image in m.images.items():
        assert image.tag and image.tag != "latest", name
        assert image.digest is None or re.fullmatch(r"sha256:[0-9a-f]{64}", image.digest), name
    # Every [build] value reaches the Dockerfile (the bundled ones come with their wheels).
    passed = set(build_args("efa").values())
    for field in (
        "cuda",
        "python",
        "torch",
        "nixl",
        "nvshmem",
        "deepep",
        "gdrcopy",
        "efa_installer",
        "cuda_arch",
    ):
        assert getattr(b, field) in passed, field


def test_the_version_scan_finds_what_it_should(tmp_path):
    """The token rule: whole versions only, so "1.34.2" is not the minimum "1.34"; comments are
    not pins, strings and docstrings are."""
    minimum = version_pattern("1.34")
    assert minimum.search('"1.34 or newer"') and minimum.search("k8s-1.34)") and minimum.search("v=1.34.")
    assert not minimum.search("1.34.2") and not minimum.search("11.34") and not minimum.search("v1.34")
    assert not minimum.search("1.345") and not minimum.search("python1.34")
    assert version_pattern("v0.33.0").search("vllm-openai:v0.33.0@sha")
    assert not version_pattern("0.33.0").search("vllm-openai:v0.33.0")
    source = tmp_path / "example.py"
    source.write_text('"""Doc 1.34."""\nx = "1.34"  # 1.34 in a comment\n# 1.34\ny = 2\n')
    assert [n for n, line in _code_lines(source) if minimum.search(line)] == [1, 2]
    config = tmp_path / "example.yaml"
    config.write_text("# 1.34\nversion: '1.34'  # 1.34\nurl: a#1.34\n")
    assert [n for n, line in _code_lines(config) if minimum.search(line)] == [2, 3]  # a#1.34 is no comment


def test_no_version_is_hard_coded_outside_the_matrix():
    hits = hard_coded_versions()
    unexpected = sorted(hit for hit in hits if (hit[0], hit[1]) not in KNOWN_COPIES)
    assert not unexpected, "versions pinned in images/versions.toml written down elsewhere (read them " + (
        f"through llmd_fleet.versions instead): {unexpected}"
    )


@pytest.mark.parametrize(("where", "version"), sorted(KNOWN_COPIES))
def test_known_copies_are_still_there(where, version):
    """A known copy that was replaced must leave KNOWN_COPIES too."""
    assert any(hit[0] == where and hit[1] == version for hit in hard_coded_versions()), (
        f"{where} no longer contains {version}: remove it from KNOWN_COPIES"
    )


def test_the_package_version_is_read_from_one_place():
    """pyproject.toml holds the version; the policy pack's PulumiPolicy.yaml must say the same."""
    import yaml

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    pack = yaml.safe_load((REPO / "policies" / "PulumiPolicy.yaml").read_text())["version"]
    assert str(pack) == project
