"""One render per CI run: `render --reuse` and the golden tests read an earlier render only when
its recorded key is the current one (llmd_fleet/cli/render_key.py); a stale render is never read."""

import shutil
from pathlib import Path

import pytest
import yaml

from devtools import golden
from llmd_fleet.cli import render_key
from llmd_fleet.cli.main import run
from llmd_fleet.cli.outdir import OUTPUT_MARKER, read_output, recorded_key
from llmd_fleet.cli.stack_file import read_stack_file
from tests.support import STACKS_DIR

STACK = "quickstart-h100"


def _stacks_copy(tmp_path: Path) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(STACKS_DIR / f"Pulumi.{STACK}.yaml", stacks)
    return stacks


def test_reuse_keeps_a_current_render_and_renders_a_stale_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks, out = _stacks_copy(tmp_path), tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", STACK, "--out", str(out)]) == 0
    first = recorded_key(out)
    assert first == render_key.render_key(read_stack_file(stacks, STACK))
    capsys.readouterr()

    (out / "summary.md").write_text("left by the first render\n")  # proves the directory was kept
    assert run(["--stacks-dir", str(stacks), "render", STACK, "--out", str(out), "--reuse"]) == 0
    assert f"rendered {STACK}: reused {out} (key {first}: same code and settings)" in capsys.readouterr().out
    assert (out / "summary.md").read_text() == "left by the first render\n"

    # A changed setting is a new key: the render runs and replaces the directory.
    path = stacks / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["llmd-fleet:serving"]["namespace"] = "agents"
    path.write_text(yaml.safe_dump(document))
    assert run(["--stacks-dir", str(stacks), "render", STACK, "--out", str(out), "--reuse"]) == 0
    assert "reused" not in capsys.readouterr().out
    assert recorded_key(out) not in (None, first)
    assert (out / "summary.md").read_text() != "left by the first render\n"


def test_a_change_to_the_code_changes_every_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stack_file = read_stack_file(STACKS_DIR, STACK)
    before = render_key.render_key(stack_file)
    package = tmp_path / "llmd_fleet"
    shutil.copytree(render_key.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(render_key, "PACKAGE_DIR", package)
    render_key.code_digest.cache_clear()
    try:
        assert render_key.render_key(stack_file) == before  # the same files, the same key
        (package / "layers" / "serving" / "vllm.py").write_text("# changed\n", encoding="utf-8")
        render_key.code_digest.cache_clear()
        assert render_key.render_key(stack_file) != before
    finally:
        render_key.code_digest.cache_clear()


def test_a_render_without_a_key_is_never_reused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / OUTPUT_MARKER).write_text("Written by `llmd-fleet render`\n")  # an older render: no key
    assert recorded_key(out) is None


def test_the_golden_test_reads_build_only_when_its_key_is_current(tmp_path: Path) -> None:
    build = tmp_path / "build"
    assert run(["render", STACK, "--out", str(build / STACK)]) == 0
    fresh = read_output(build / STACK)
    assert golden.rendered(STACK, build) == fresh

    # Same key, different content: read as it is (nothing is rendered again for it).
    (build / STACK / "summary.md").write_text("read from build/\n")
    assert golden.rendered(STACK, build)["summary.md"] == "read from build/\n"

    # A stale key: rendered afresh, build/ not read.
    marker = build / STACK / OUTPUT_MARKER
    marker.write_text(
        marker.read_text().replace(f"key: {recorded_key(build / STACK)}", "key: 0000000000000000")
    )
    assert golden.rendered(STACK, build) == fresh
