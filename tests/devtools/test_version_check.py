"""make check-versions: every version key classified, the line and its exit status, a retry before
"not checkable now", and the wheel set's failure naming the requirement that cannot resolve."""

import sys
import tomllib
from pathlib import Path

import pytest

from devtools.version_check import cli, resolve
from devtools.version_check.pins import Offline, PyPI, WheelSet, pins
from devtools.version_check.resolve import Answer, Status, WheelSetResult
from llmd_fleet.cli.paths import CHECKOUT

MATRIX = tomllib.loads((CHECKOUT / "images" / "versions.toml").read_text())


def test_every_version_of_the_matrix_is_classified():
    found = pins(MATRIX)
    assert [p.key for p in found if p.check is None] == []
    keys = {p.key for p in found}
    assert {"vllm.version", "build.torch", "twin.kwok", "images.vllm.tag", "charts.keda.version"} <= keys
    assert "build.cuda_arch" not in keys and "images.vllm.repository" not in keys


def test_the_image_pins_name_the_cuda_major_of_the_matrix():
    by_key = {p.key: p.check for p in pins(MATRIX)}
    major = MATRIX["build"]["cuda"].split(".")[0]
    assert by_key["build.nixl"] == PyPI(("nixl", f"nixl-cu{major}"), "build")
    assert by_key["build.bundled.nccl"] == WheelSet(f"nvidia-nccl-cu{major}")
    assert (
        isinstance(by_key["images.vllm.tag"], Offline)
        and "docker.io/vllm/vllm-openai" in by_key["images.vllm.tag"].where
    )


def test_a_key_nobody_classified_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    _canned(monkeypatch)
    matrix = tmp_path / "versions.toml"
    matrix.write_text((CHECKOUT / "images" / "versions.toml").read_text() + '\n[extra]\nthing = "1.0"\n')
    assert cli.main(["--matrix", str(matrix)]) == 1
    assert "not classified in devtools/version_check/pins.py: extra.thing" in capsys.readouterr().out


def _canned(
    monkeypatch: pytest.MonkeyPatch,
    python: dict[str, Answer] | None = None,
    wheels: WheelSetResult | None = None,
) -> None:
    answers = python or {}
    monkeypatch.setattr(
        cli, "python_pin", lambda package, version, py: answers.get(package, Answer(Status.RESOLVED))
    )
    monkeypatch.setattr(cli, "go_pin", lambda module, version: Answer(Status.RESOLVED))
    bundled = MATRIX["build"]["bundled"]
    major = MATRIX["build"]["cuda"].split(".")[0]
    default = WheelSetResult(
        {"flashinfer-python": bundled["flashinfer"], f"nvidia-nccl-cu{major}": bundled["nccl"]}
    )
    monkeypatch.setattr(cli, "wheel_set", lambda requirements, python: wheels or default)


def _line(out: str) -> str:
    return out.splitlines()[0]


def test_all_resolved_is_exit_0_with_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    _canned(monkeypatch)
    assert cli.main([]) == 0
    every = pins(MATRIX)
    offline = sum(isinstance(p.check, Offline) for p in every)
    assert _line(capsys.readouterr().out) == (
        f"versions: {len(every)} pinned, {len(every) - offline} resolved, {offline} not checkable offline, "
        "0 unpublished, 0 not checkable now"
    )


def test_an_unpublished_pin_fails(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    pinned = MATRIX["tools"]["checkov"]
    _canned(monkeypatch, {"checkov": Answer(Status.UNPUBLISHED, f"there is no version of checkov=={pinned}")})
    assert cli.main([]) == 1
    out = capsys.readouterr().out
    assert ", 1 unpublished, 0 not checkable now" in _line(out)
    assert f"  unpublished: tools.checkov = {pinned}: there is no version of checkov=={pinned}" in out


def test_a_registry_that_does_not_answer_is_never_a_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    _canned(monkeypatch, {"numpy": Answer(Status.NOW, "dns error")})
    assert cli.main([]) == 0
    line = _line(capsys.readouterr().out)
    every = pins(MATRIX)
    offline = sum(isinstance(p.check, Offline) for p in every)
    assert f"{len(every) - offline - 1} resolved" in line and line.endswith(
        "0 unpublished, 1 not checkable now"
    )


def test_a_bundled_pin_the_wheel_set_disagrees_with_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    major = MATRIX["build"]["cuda"].split(".")[0]
    _canned(
        monkeypatch,
        wheels=WheelSetResult(
            {"flashinfer-python": "0.0.1", f"nvidia-nccl-cu{major}": MATRIX["build"]["bundled"]["nccl"]}
        ),
    )
    assert cli.main([]) == 1
    assert "build.bundled.flashinfer" in capsys.readouterr().out


def test_a_wheel_set_that_does_not_resolve_names_the_requirement():
    """uv itself, offline with no index: the requirement it cannot satisfy is named."""
    result = resolve.wheel_set(["llmd-fleet-no-such-package==0.0.1"], "3.11", ["--offline", "--no-index"])
    assert not result.now
    assert result.failure.startswith(
        "llmd-fleet-no-such-package==0.0.1: Because llmd-fleet-no-such-package was not found"
    )


def test_the_conflicting_requirement_is_the_one_named():
    stderr = (
        "error: No solution found when resolving dependencies\n"
        "  cause: Because engine==7.1 depends on tensors==4.2 and you require engine==7.1, "
        "we can conclude that you require tensors==4.2.\n"
        "         And because you require tensors==4.1, we can conclude that your requirements "
        "are unsatisfiable.\n"
    )
    assert resolve.unresolvable_requirement(stderr) == "tensors==4.1"
    assert (
        resolve.unresolvable_requirement(
            "Because there is no version of vllm==9.9 and you require vllm==9.9,"
        )
        == "vllm==9.9"
    )


def _flaky(tmp_path: Path, first: str, then: str) -> list[str]:
    """A command that fails with `first` on its first run and behaves as `then` afterwards."""
    marker = tmp_path / "ran"
    script = (
        "import pathlib, sys\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        f"    m.write_text('1'); sys.stderr.write({first!r}); sys.exit(1)\n"
        f"{then}\n"
    )
    return [sys.executable, "-c", script]


def test_one_retry_after_a_registry_that_did_not_answer(tmp_path: Path):
    command = _flaky(tmp_path, "error: dns error\n", "sys.exit(0)")
    assert resolve._ask(command, resolve._UV_MISSING) == Answer(Status.RESOLVED)


def test_two_failures_are_not_checkable_now(tmp_path: Path):
    command = _flaky(
        tmp_path, "error: dns error\n", "sys.stderr.write('error: connection reset\\n'); sys.exit(1)"
    )
    assert resolve._ask(command, resolve._UV_MISSING) == Answer(Status.NOW, "error: connection reset")


def test_no_such_version_is_unpublished_at_once(tmp_path: Path):
    command = [
        sys.executable,
        "-c",
        "import sys; sys.stderr.write('Because there is no version of x==1\\n'); sys.exit(1)",
    ]
    assert resolve._ask(command, resolve._UV_MISSING).status is Status.UNPUBLISHED


def test_make_check_versions_runs_in_ci_after_check_cloud():
    steps = [
        line.removeprefix("step ").strip()
        for line in (CHECKOUT / ".ci" / "run").read_text().splitlines()
        if line.startswith("step make")
    ]
    assert steps.index("make check-versions") == steps.index("make check-cloud") + 1
