"""No Python module over 800 lines: the library, the repository's tooling and the tests are read
one module at a time, and a module past that length holds more than one subject. The modules still
over it are listed below, each with why, and the list is held exactly: a new long module fails, and
so does an entry whose module was split (the list only shrinks)."""

from pathlib import Path

from tests.support import REPO

LIMIT = 800
"""Lines (as `wc -l` counts them) a module may have."""
FOLDERS = ("components", "devtools", "tests", "infra", "policies", "examples", "provider")
"""Where the repository's Python lives."""
NOT_OURS = frozenset({"__pycache__", "venv", ".venv", "site-packages", "node_modules"})
"""Folders under them that hold what is not the repository's own code (ignored by git: bytecode,
and the virtual environments `make components` creates, e.g. provider/venv/)."""
KNOWN_OVER: dict[str, str] = {}
"""Each module over `LIMIT` lines today (path from the repository root) -> why it still is."""


def line_count(path: Path) -> int:
    """The lines of a file as `wc -l` counts them (its newlines)."""
    return path.read_bytes().count(b"\n")


def long_modules(root: Path, folders: tuple[str, ...] = FOLDERS, limit: int = LIMIT) -> dict[str, int]:
    """Every `*.py` under `root`'s folders with more than `limit` lines -> its lines."""
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if NOT_OURS.intersection(path.relative_to(root).parts):
                continue
            lines = line_count(path)
            if lines > limit:
                found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_module_is_over_the_limit_but_the_known_ones():
    over = long_modules(REPO)
    new = {path: lines for path, lines in over.items() if path not in KNOWN_OVER}
    assert new == {}, f"split these modules (at most {LIMIT} lines each): {new}"
    split = sorted(set(KNOWN_OVER) - set(over))
    assert split == [], f"now at most {LIMIT} lines: remove them from KNOWN_OVER: {split}"


def test_the_size_check_sees_a_long_module(tmp_path):
    """Not vacuous: a module one line over the limit is found, one at the limit is not, and
    neither a folder outside the list nor a virtual environment inside one is read."""
    (tmp_path / "devtools" / "twin").mkdir(parents=True)
    (tmp_path / "devtools" / "twin" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "devtools" / "twin" / "fits.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    # A virtual environment under a listed folder (what `make components` leaves in provider/).
    (tmp_path / "provider" / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "provider" / "venv" / "lib" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    assert long_modules(tmp_path) == {"devtools/twin/long.py": LIMIT + 1}
    assert line_count(tmp_path / "devtools" / "twin" / "fits.py") == LIMIT
