"""The tests share their support one way: fixtures in conftest.py, everything else in
tests/support.py (stacks, raw config, the mock engine, config problems), so that no test module
imports conftest and Pulumi's mock engine is put in place in one function."""

import ast
from pathlib import Path

from tests.support import REPO

TESTS = REPO / "tests"
# Runs in a child interpreter against the installed wheel, where the tests tree is not importable.
OWN_ENGINE = {"test_wheel.py"}
SELF = Path(__file__).name  # names set_mocks in its planted file


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def conftest_importers(root: Path) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "conftest.py" and "tests.conftest" in _imports(path)
    )


def mock_engine_setters(root: Path) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name not in {*OWN_ENGINE, SELF, "support.py"} and "set_mocks" in path.read_text()
    )


def test_no_test_module_imports_conftest():
    assert conftest_importers(TESTS) == []


def test_only_the_support_module_sets_the_mock_engine():
    assert mock_engine_setters(TESTS) == []


def test_the_checks_find_a_planted_import_and_a_planted_engine(tmp_path):
    (tmp_path / "test_planted.py").write_text(
        "from tests.conftest import REPO\nimport pulumi\npulumi.runtime.set_mocks(None)\n"
    )
    (tmp_path / "test_clean.py").write_text("from tests.support import REPO\n")
    assert conftest_importers(tmp_path) == ["test_planted.py"]
    assert mock_engine_setters(tmp_path) == ["test_planted.py"]
