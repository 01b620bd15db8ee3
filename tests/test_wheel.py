"""The wheel as a platform team installs it: built from this checkout, installed into a clean
virtualenv outside the repository (dependencies from uv.lock, through the uv cache), and used from
there: the public API, the example program under mocks, and the policy pack shipped in the package.

Slow (a build and an install of the cloud SDKs): `make test-wheel` runs it, `make unit` does not.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, STACKS_DIR

pytestmark = pytest.mark.slow

STACK = "onprem-h100"


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv outside the repository with the built wheel and the locked dependencies."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not on PATH (make setup installs it)")
    work = tmp_path_factory.mktemp("wheel")
    assert not work.is_relative_to(REPO)
    _run(uv, "build", "--wheel", "--out-dir", work / "dist", cwd=REPO)
    (wheel,) = (work / "dist").glob("llmd_fleet-*.whl")
    _run(uv, "venv", "--quiet", "--python", sys.executable, work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    requirements = work / "requirements.txt"
    _run(
        uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes",
        "--output-file", requirements, cwd=REPO,
    )  # fmt: skip
    _run(uv, "pip", "install", "--quiet", "--python", python, "-r", requirements, wheel, cwd=work)
    return work / "venv"


def _env(venv: Path) -> dict[str, str]:
    """A child environment with only the virtualenv on PATH and nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    return site


def test_one_namespace_in_site_packages(installed: Path) -> None:
    site = _site_packages(installed)
    assert (site / "llmd_fleet" / "py.typed").is_file()
    assert (site / "llmd_fleet" / "versions.toml").is_file()
    assert (site / "llmd_fleet" / "policies" / "PulumiPolicy.yaml").is_file()
    assert list((site / "llmd_fleet" / "tools" / "schemas" / "crds").rglob("*.yaml"))
    for generic in ("components", "devtools", "infra", "policies", "tests", "examples"):
        assert not (site / generic).exists(), f"the wheel installs a top-level {generic!r}"
    record = next(site.glob("llmd_fleet-*.dist-info")) / "RECORD"
    tops = {line.split("/")[0] for line in record.read_text().splitlines()}
    assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"llmd_fleet"}


def test_no_dev_tooling_ships(installed: Path, tmp_path: Path) -> None:
    """The wheel holds the library and the user CLI only: none of devtools/ (the twin, the checks
    against pinned upstream tools and their Go modules, the generators), and `llmd-fleet twin`
    says where it runs instead of failing on an import."""
    record = next(_site_packages(installed).glob("llmd_fleet-*.dist-info")) / "RECORD"
    files = [line.split(",")[0] for line in record.read_text().splitlines()]
    dev = {"twin", "vllm_check", "router_check", "promtool", "checkov_scan", "metrics_catalogue", "golden.py"}
    assert not [f for f in files if set(f.split("/")) & dev or f.endswith(("go.mod", "go.sum"))]
    env = _env(installed)
    result = subprocess.run(
        [str(installed / "bin" / "llmd-fleet"), "twin", "status"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "runs from a checkout" in result.stderr, result.stderr


def test_the_public_api_imports_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import llmd_fleet
        assert "pulumi" not in sys.modules, "import llmd_fleet loaded the SDK"
        from llmd_fleet import ModelServing, Router, plan_fleet, parse_config
        missing = [n for n in llmd_fleet.__all__ if getattr(llmd_fleet, n, None) is None]
        undocumented = [n for n in llmd_fleet.__all__ if not (getattr(llmd_fleet, n).__doc__ or "").strip()]
        print(json.dumps({"file": llmd_fleet.__file__, "missing": missing, "undocumented": undocumented,
                          "n": len(llmd_fleet.__all__)}))
        """
    )
    out = json.loads(_run(installed / "bin" / "python", "-c", code, cwd=tmp_path, env=_env(installed)))
    assert Path(out["file"]).is_relative_to(_site_packages(installed))
    assert out["missing"] == [] and out["undocumented"] == [] and out["n"] >= 30


def test_the_example_program_runs_under_mocks(installed: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "existing_cluster.py", tmp_path / "existing_cluster.py")
    shutil.copy(STACKS_DIR / f"Pulumi.{STACK}.yaml", tmp_path / "stack.yaml")
    (tmp_path / "run.py").write_text(
        textwrap.dedent(
            """
            import json
            import pulumi, pulumi_kubernetes as k8s, yaml
            from llmd_fleet.cli.synth import RecordingMocks

            mocks = RecordingMocks()
            pulumi.runtime.set_mocks(mocks, project="platform", stack="wheel", preview=False)
            from existing_cluster import add_llmd_serving

            document = yaml.safe_load(open("stack.yaml"))["config"]
            settings = {k.split(":", 1)[1]: v for k, v in document.items()
                        if not (isinstance(v, dict) and set(v) == {"secure"})}

            @pulumi.runtime.test
            def program():
                provider = k8s.Provider("gpu-cluster", kubeconfig="apiVersion: v1\\nkind: Config\\n")
                fleet = add_llmd_serving(settings, provider, pulumi.Output.secret("wheel-test"))
                return fleet.serving.disaggregated_set.urn

            program()
            print(json.dumps(sorted({r.type for r in mocks.created})))
            """
        )
    )
    types = json.loads(_run(installed / "bin" / "python", "run.py", cwd=tmp_path, env=_env(installed)))
    assert "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet" in types
    assert "kubernetes:inference.networking.k8s.io/v1:InferencePool" in types


def test_the_policy_pack_runs_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    env = _env(installed)
    pack = Path(_run(installed / "bin" / "llmd-fleet", "policy-pack-path", cwd=tmp_path, env=env).strip())
    assert pack.is_relative_to(_site_packages(installed)) and (pack / "__main__.py").is_file()
    out = _run(
        installed / "bin" / "llmd-fleet", "--stacks-dir", STACKS_DIR, "check", STACK,
        "--out", tmp_path / "out",
        "--policy-config", REPO / "policies" / "config" / f"{STACK}.json",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert " valid, 0 invalid" in out
    assert "policies" in out and "0 mandatory" in out
