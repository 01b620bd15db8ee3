"""The cloud SDKs are extras: a gke or eks stack without its extra is refused in one line naming
the extra (exit 2), before anything imports the SDK; the core dependencies name neither SDK."""

import sys
import tomllib

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.targets.extras import (
    TARGET_EXTRAS,
    MissingExtraError,
    require_image_build_extra,
    require_target_extra,
)
from tests.support import REPO, STACKS_DIR


def test_core_dependencies_pull_no_cloud_sdk() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [
        d
        for d in project["dependencies"]
        if d.startswith(("pulumi-gcp", "pulumi-aws", "pulumi-docker-build"))
    ]
    extras = project["optional-dependencies"]
    assert {e: extras[e][0].split(">")[0] for e in extras} == {
        "gcp": "pulumi-gcp",
        "aws": "pulumi-aws",
        "build": "pulumi-docker-build",
    }
    assert {k: v[0] for k, v in TARGET_EXTRAS.items()} == {"gke": "gcp", "eks": "aws"}


@pytest.mark.parametrize("kind", ["onprem", "local", "gke", "eks"])
def test_installed_extras_pass(kind: str) -> None:
    require_target_extra(kind)  # the repository's environment has both extras


@pytest.mark.parametrize(
    ("stack", "module", "extra"), [("gke-h100", "pulumi_gcp", "gcp"), ("eks-h100", "pulumi_aws", "aws")]
)
def test_a_cloud_stack_without_its_extra_is_one_line(
    stack: str,
    module: str,
    extra: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(MissingExtraError):
        require_target_extra(stack.split("-")[0])
    code = run(["--stacks-dir", str(STACKS_DIR), "render", stack, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"needs the {extra} extra" in err and f"pip install 'llmd-fleet[{extra}]'" in err
    assert not (tmp_path / "out").exists()


def test_the_image_build_without_its_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    require_image_build_extra(False)
    require_image_build_extra(True)  # the repository's environment has the extra
    monkeypatch.setitem(sys.modules, "pulumi_docker_build", None)  # as if not installed
    require_image_build_extra(False)  # no build asked: nothing needed
    with pytest.raises(MissingExtraError, match=r"llmd-fleet:images.build needs the build extra"):
        require_image_build_extra(True)
    # eks-h100 builds its image (its aws extra is installed here).
    code = run(["--stacks-dir", str(STACKS_DIR), "render", "eks-h100", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pip install 'llmd-fleet[build]'" in err
