"""Every repository path the documents and docstrings name exists: a page or module that moves
takes its mentions with it. A path counts when it is backticked and starts with one of the
repository's own folders; an upstream repository's file is written with that repository's name
in front (`llm-d-router/docs/metrics.md`), so it is not read as ours. A path inside the package
(`llmd_fleet/plan/fleet.py`) counts backticked or not, since no other repository has that folder:
it exists under components/, or in the wheel, which maps a few repository files into the package
(pyproject.toml's force-include: `llmd_fleet/cli/stacks/` is stacks/). CHANGELOG.md is history:
it names files as they were when each entry was written, and is not read."""

import re
import tomllib
from pathlib import Path

import pytest

from tests.support import REPO

OWN_FOLDERS = ("components", "devtools", "docs", "stacks", "tests")
_NAMED = re.compile(r"`((?:" + "|".join(OWN_FOLDERS) + r")/[^`\s]*)`")
# A pattern, a placeholder or a variable stands for many paths, none of which must exist.
_TEMPLATE = re.compile(r"[*<>{}$\[\]]")


def named_paths(text: str) -> list[str]:
    """The repository paths a text names (an anchor, a line number or a trailing full stop
    dropped), templates left out."""
    found = []
    for match in _NAMED.finditer(text):
        path = re.split(r"[#:]", match.group(1))[0].rstrip(".,;)")
        if path and not _TEMPLATE.search(path):
            found.append(path)
    return found


# A package path: `llmd_fleet/` not inside another path, up to a space, quote or bracket.
_PACKAGE = re.compile(r"(?<![\w/.-])(llmd_fleet/[^\s`'\"(),;]*)")


def package_paths(text: str) -> list[str]:
    """The paths inside the package a text names, backticked or not (templates left out)."""
    found = []
    for match in _PACKAGE.finditer(text):
        path = re.split(r"[#:]", match.group(1))[0].rstrip(".,;)")
        if not _TEMPLATE.search(path):
            found.append(path)
    return found


def wheel_sources(root: Path) -> dict[str, str]:
    """Package path -> the repository path the wheel copies there (pyproject.toml force-include)."""
    build = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]
    return {dest: source for source, dest in build["targets"]["wheel"]["force-include"].items()}


def _package_path_exists(path: str, root: Path, wheel: dict[str, str]) -> bool:
    if (root / "components" / path).exists():
        return True
    trimmed = path.rstrip("/")
    for dest, source in wheel.items():
        if dest.startswith(trimmed + "/"):  # a folder the wheel puts copies in
            return True
        if (trimmed == dest or trimmed.startswith(dest + "/")) and (
            root / source / trimmed[len(dest) :].lstrip("/")
        ).exists():
            return True
    return False


def missing(text: str, root: Path) -> list[str]:
    wheel = wheel_sources(root)
    absent = [path for path in named_paths(text) if not (root / path).exists()]
    return absent + [path for path in package_paths(text) if not _package_path_exists(path, root, wheel)]


def _sources() -> list[Path]:
    pages = [p for p in REPO.glob("*.md") if p.name != "CHANGELOG.md"]
    pages += sorted((REPO / "docs").rglob("*.md"))
    code = [
        p for folder in ("components", "devtools", "tests") for p in sorted((REPO / folder).rglob("*.py"))
    ]
    # This module names a bad path on purpose.
    return [*pages, *(p for p in code if p != Path(__file__).resolve())]


def test_the_sources_read_are_the_documents_and_the_code():
    sources = {p.relative_to(REPO).as_posix() for p in _sources()}
    assert {"README.md", "docs/twin.md", "components/llmd_fleet/program.py"} <= sources
    assert "CHANGELOG.md" not in sources


# The fabric preflight probe is shipped verbatim in a ConfigMap (every stack's golden output holds
# its text), so a wording fix alone would change the deployed object; its stale path is fixed with
# the probe's next change (the module moved to devtools/preflight_probe/env.py). Listed exactly:
# the test fails when it is fixed, so the entry goes with it.
KNOWN_STALE = {
    "components/llmd_fleet/layers/preflight/probe.py": ["llmd_fleet/tools/preflight_probe/env.py"],
}


@pytest.mark.parametrize("source", _sources(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_repository_path_named_exists(source):
    expected = KNOWN_STALE.get(source.relative_to(REPO).as_posix(), [])
    assert missing(source.read_text(encoding="utf-8"), REPO) == expected


def test_a_planted_bad_path_is_found_and_templates_and_upstream_paths_are_not():
    text = (
        "See `docs/no-such-page.md#anchor` and `components/llmd_fleet/program.py:12`, "
        "`tests/golden/<stack>/`, `stacks/Pulumi.*.yaml`, `llm-d-router/docs/metrics.md` "
        "and `docs/twin.md`."
    )
    assert named_paths(text) == ["docs/no-such-page.md", "components/llmd_fleet/program.py", "docs/twin.md"]
    assert missing(text, REPO) == ["docs/no-such-page.md"]


def test_a_planted_bad_package_path_is_found_backticked_or_not_and_wheel_paths_are_not():
    text = (
        "Sizing (llmd_fleet/plan/no_such_module.py) and `llmd_fleet/config/responses.py`, beside "
        "llmd_fleet/plan/fleet.py, llmd_fleet/targets/<kind>/config.py, the shipped stacks "
        "(`llmd_fleet/cli/stacks/`, llmd_fleet/cli/stacks/Pulumi.onprem-h100.yaml), "
        "llmd_fleet/cli/stacks/Pulumi.no-such-stack.yaml and `llmd_fleet/examples/`."
    )
    assert package_paths(text) == [
        "llmd_fleet/plan/no_such_module.py",
        "llmd_fleet/config/responses.py",
        "llmd_fleet/plan/fleet.py",
        "llmd_fleet/cli/stacks/",
        "llmd_fleet/cli/stacks/Pulumi.onprem-h100.yaml",
        "llmd_fleet/cli/stacks/Pulumi.no-such-stack.yaml",
        "llmd_fleet/examples/",
    ]
    assert missing(text, REPO) == [
        "llmd_fleet/plan/no_such_module.py",
        "llmd_fleet/config/responses.py",
        "llmd_fleet/cli/stacks/Pulumi.no-such-stack.yaml",
    ]
