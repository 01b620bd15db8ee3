"""Every repository path the documents and docstrings name exists: a page or module that moves
takes its mentions with it. A path counts when it is backticked and starts with one of the
repository's own folders; an upstream repository's file is written with that repository's name
in front (`llm-d-router/docs/metrics.md`), so it is not read as ours. CHANGELOG.md is history: it
names files as they were when each entry was written, and is not read."""

import re
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


def missing(text: str, root: Path) -> list[str]:
    return [path for path in named_paths(text) if not (root / path).exists()]


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


@pytest.mark.parametrize("source", _sources(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_repository_path_named_exists(source):
    assert missing(source.read_text(encoding="utf-8"), REPO) == []


def test_a_planted_bad_path_is_found_and_templates_and_upstream_paths_are_not():
    text = (
        "See `docs/no-such-page.md#anchor` and `components/llmd_fleet/program.py:12`, "
        "`tests/golden/<stack>/`, `stacks/Pulumi.*.yaml`, `llm-d-router/docs/metrics.md` "
        "and `docs/twin.md`."
    )
    assert named_paths(text) == ["docs/no-such-page.md", "components/llmd_fleet/program.py", "docs/twin.md"]
    assert missing(text, REPO) == ["docs/no-such-page.md"]
