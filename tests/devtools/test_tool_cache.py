"""The one way tool environments and binaries are built into the cache."""

import re
from pathlib import Path

import pytest

from devtools import tool_cache


def test_build_once_builds_marks_complete_and_then_reuses(tmp_path: Path) -> None:
    target = tmp_path / "tool-abc"
    built: list[Path] = []

    def build(where: Path) -> None:
        assert not where.exists()
        where.mkdir()
        built.append(where)

    assert tool_cache.build_once(target, build, "tool 1\n") is not None
    assert (target / tool_cache.COMPLETE).read_text() == "tool 1\n"
    assert tool_cache.build_once(target, build, "tool 1\n") is None
    assert built == [target]


def test_an_interrupted_or_failed_build_leaves_nothing_and_is_redone(tmp_path: Path) -> None:
    target = tmp_path / "tool-abc"
    target.mkdir()
    (target / "half-written").write_text("x")  # an earlier run died here, unmarked

    def failing(where: Path) -> None:
        where.mkdir()
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        tool_cache.build_once(target, failing, "tool\n")
    assert not target.exists()
    assert tool_cache.build_once(target, lambda where: where.mkdir(), "tool\n") is not None
    assert tool_cache.is_complete(target)


def test_keys_separate_their_parts() -> None:
    assert tool_cache.cache_key(b"ab", b"c") != tool_cache.cache_key(b"a", b"bc")
    assert len(tool_cache.cache_key(b"x")) == 16


def test_build_announced_builds_once_and_says_what_and_how_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "env"
    built: list[Path] = []

    def build(path: Path) -> None:
        path.mkdir()
        built.append(path)

    tool_cache.build_announced(target, "demo 1.0 environment", build, "demo==1.0\n", " (note)")
    err = capsys.readouterr().err
    assert f"building the demo 1.0 environment in {target}" in err
    assert re.search(r"demo 1\.0 environment ready in \d+ s \(note\)", err)
    tool_cache.build_announced(target, "demo 1.0 environment", build, "demo==1.0\n")
    assert built == [target] and capsys.readouterr().err == ""


def test_print_path_main_prints_the_path_or_the_error_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool_cache.print_path_main(lambda: tmp_path, ValueError) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path)

    def broken() -> Path:
        raise ValueError("no wheel for this Python")

    assert tool_cache.print_path_main(broken, ValueError) == 1
    assert capsys.readouterr().err.strip() == "error: no wheel for this Python"


def test_prebuild_reports_a_failed_build_and_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    from devtools import prebuild

    done: list[str] = []

    class SourceMissing(Exception):
        pass

    def fails() -> object:
        raise RuntimeError("go build failed\nthe log's tail")

    def missing() -> object:
        raise SourceMissing("no snapshot of the router in ../shared/src")

    failures: list[str] = []
    prebuild.run_lane(
        [("broken", fails), ("absent", missing), ("fine", lambda: done.append("fine"))], failures
    )
    err = capsys.readouterr().err
    assert failures == ["broken"]
    assert done == ["fine"]  # a failure does not stop the lane
    assert "prebuild: broken: failed after 0 s: go build failed\n" in err
    assert "prebuild: absent: not run: no snapshot of the router in ../shared/src\n" in err


def test_prebuild_lanes_cover_every_go_tool_the_checks_build() -> None:
    from devtools import prebuild
    from devtools.twin.modules import wrappers

    names = [name for lane in prebuild.lanes() for name, _ in lane]
    assert len(names) == len(set(names))
    assert {f"twin {w}" for w in wrappers() if w not in ("pulumi", "kubernetes-provider")} <= set(names)
    assert {"promtool", "router checker", "LWS controller", "Pulumi CLI", "Kubernetes provider"} <= set(names)
    assert "Node.js language host" in names  # make components (docs/components.md)
    first, go_lane = ([name for name, _ in lane] for lane in prebuild.lanes())
    # The engine run's Go tools follow the Python environments in the first lane, so `make e2e`
    # finds them built while the other lane builds the twin's binaries it needs too; the host
    # right after the CLI: it compiles against the same pkg/v3 and sdk/v3 packages.
    assert first[-3:] == ["Pulumi CLI", "Python language host", "Kubernetes provider"]
    assert all(name.endswith("environment") for name in first[:-3])
    assert not {"Pulumi CLI", "Python language host", "Kubernetes provider"} & set(go_lane)
    assert {"data-plane router", "simulator", "vLLM parser environment", "checkov environment"} <= set(names)
    # make day-two's Prometheus, after promtool: the same Prometheus module, so its packages are built.
    assert go_lane.index("Prometheus") > go_lane.index("promtool")
