"""The wheel as a platform team installs it: built from this checkout, installed into a clean
virtualenv outside the repository (dependencies from uv.lock, through the uv cache), and used from
there: the public API, the example program under mocks, and the policy pack shipped in the package.

Every supported Python (pyproject's classifiers) gets the core install, which
pulls no cloud SDK nor the image build's, so a gke or eks stack is refused naming its extra; one
more virtualenv (this interpreter) gets `llmd-fleet[gcp,aws,build]` and renders the cloud stacks.
A Python that neither `uv python find` nor pyenv has is skipped with the reason (CI has all three).

Slow (builds and installs): `make test-wheel` runs it, `make unit` does not.
"""

import email
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.support import REPO, STACKS_DIR

pytestmark = pytest.mark.slow

STACK = "onprem-h100"
# The supported Pythons, as pyproject's classifiers list them.
PYTHONS = tuple(
    c.rsplit(" :: ", 1)[1]
    for c in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["classifiers"]
    if c.startswith("Programming Language :: Python :: 3.")
)


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, outside the repository."""
    uv = _uv()
    work = tmp_path_factory.mktemp("wheel")
    assert not work.is_relative_to(REPO)
    _run(uv, "build", "--wheel", "--out-dir", work / "dist", cwd=REPO)
    (built,) = (work / "dist").glob("llmd_fleet-*.whl")
    return built


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not on PATH (make setup installs it)")
    return uv


def _install(wheel: Path, work: Path, python: str, extras: tuple[str, ...]) -> Path:
    """A virtualenv under `work` with `python`, the wheel (with `extras`) and the locked dependencies."""
    uv = _uv()
    _run(uv, "venv", "--quiet", "--python", python, work / "venv", cwd=work)
    requirements = work / "requirements.txt"
    _run(
        uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes",
        *[a for e in extras for a in ("--extra", e)], "--output-file", requirements, cwd=REPO,
    )  # fmt: skip
    target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    _run(uv, "pip", "install", "--quiet", "--python", work / "venv" / "bin" / "python", "-r", requirements,
         target, cwd=work)  # fmt: skip
    return work / "venv"


@pytest.fixture(scope="module", params=PYTHONS)
def installed(request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The core install (no extras) on each supported Python."""
    version: str = request.param
    found = subprocess.run([_uv(), "python", "find", version], capture_output=True, text=True, check=False)
    interpreter = found.stdout.strip() if found.returncode == 0 else ""
    if not interpreter:
        # uv finds interpreters on PATH and its own installs; pyenv keeps others under its root.
        root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        pyenv = sorted(root.glob(f"versions/{version}.*/bin/python{version}"))
        interpreter = str(pyenv[-1]) if pyenv else ""
    if not interpreter:
        pytest.skip(f"Python {version} not found by `uv python find {version}` nor under pyenv")
    return _install(wheel, tmp_path_factory.mktemp(f"py{version}"), interpreter, ())


@pytest.fixture(scope="module")
def installed_with_clouds(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`llmd-fleet[gcp,aws,build]` on this interpreter (eks-h100 builds its serving image)."""
    return _install(wheel, tmp_path_factory.mktemp("clouds"), sys.executable, ("gcp", "aws", "build"))


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
    assert list((site / "llmd_fleet" / "cli" / "schemas" / "crds").rglob("*.yaml"))
    for generic in ("components", "devtools", "infra", "policies", "tests", "examples"):
        assert not (site / generic).exists(), f"the wheel installs a top-level {generic!r}"
    record = next(site.glob("llmd_fleet-*.dist-info")) / "RECORD"
    tops = {line.split("/")[0] for line in record.read_text().splitlines()}
    assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"llmd_fleet"}


def test_no_dev_tooling_ships(installed: Path, tmp_path: Path) -> None:
    """The wheel holds the library and the user CLI only: none of devtools/ (the twin, the checks
    against pinned upstream tools and their Go modules, the generators), and the CLI has no
    command that reaches for them (`python -m devtools.twin` runs the twin from a checkout)."""
    record = next(_site_packages(installed).glob("llmd_fleet-*.dist-info")) / "RECORD"
    files = [line.split(",")[0] for line in record.read_text().splitlines()]
    dev = {"twin", "vllm_check", "router_check", "promtool", "checkov_scan", "metrics_catalogue", "golden.py"}
    assert not [f for f in files if set(f.split("/")) & dev or f.endswith(("go.mod", "go.sum"))]
    env = _env(installed)
    result = subprocess.run(
        [str(installed / "bin" / "llmd-fleet"), "twin", "status"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "invalid choice: 'twin'" in result.stderr, result.stderr


_PUBLIC_API = textwrap.dedent(
    """
    import json, sys
    import llmd_fleet
    assert "pulumi" not in sys.modules, "import llmd_fleet loaded the SDK"
    from llmd_fleet import ModelServing, Router, plan_fleet, parse_config
    loaded, needs_extra = {}, {}
    for n in llmd_fleet.__all__:
        try:
            loaded[n] = getattr(llmd_fleet, n)
        except ImportError as exc:
            needs_extra[n] = str(exc)
    undocumented = [n for n, v in loaded.items() if not (v.__doc__ or "").strip()]
    print(json.dumps({"file": llmd_fleet.__file__, "undocumented": undocumented,
                      "needs_extra": needs_extra, "n": len(llmd_fleet.__all__)}))
    """
)


def test_the_public_api_imports_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    """Every public name loads and is documented; in the core install, the GKE and EKS components
    raise ImportError naming their extra."""
    out = json.loads(_run(installed / "bin" / "python", "-c", _PUBLIC_API, cwd=tmp_path, env=_env(installed)))
    assert Path(out["file"]).is_relative_to(_site_packages(installed))
    assert out["undocumented"] == [] and out["n"] >= 30
    assert out["needs_extra"] and all(n.startswith(("Gke", "Eks", "Tcpxo")) for n in out["needs_extra"])
    assert all("pip install 'llmd-fleet[" in m for m in out["needs_extra"].values())


def test_the_public_api_is_whole_with_the_extras(installed_with_clouds: Path, tmp_path: Path) -> None:
    env = _env(installed_with_clouds)
    out = json.loads(_run(installed_with_clouds / "bin" / "python", "-c", _PUBLIC_API, cwd=tmp_path, env=env))
    assert out["needs_extra"] == {} and out["undocumented"] == []


def test_the_example_and_the_policy_configs_ship(installed: Path) -> None:
    """The own-program example and its project file, and every example stack's policy config
    (beside the pack `llmd-fleet policy-pack-path` prints), byte for byte as in the repository."""
    package = _site_packages(installed) / "llmd_fleet"
    for name in ("existing_cluster.py", "Pulumi.yaml"):
        assert (package / "examples" / name).read_bytes() == (REPO / "examples" / name).read_bytes()
    shipped = {p.name: p.read_bytes() for p in (package / "policies" / "config").glob("*.json")}
    assert shipped and shipped == {
        p.name: p.read_bytes() for p in (REPO / "policies" / "config").glob("*.json")
    }


def test_the_example_program_runs_under_mocks(installed: Path, tmp_path: Path) -> None:
    """The example as the wheel ships it, copied out and run against the installed package (it
    imports only the public API, so nothing of this checkout is needed)."""
    shipped = _site_packages(installed) / "llmd_fleet" / "examples" / "existing_cluster.py"
    shutil.copy(shipped, tmp_path / "existing_cluster.py")
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
    # No --policy-config and no policies/config/ here: the config the package ships is the default.
    out = _run(
        installed / "bin" / "llmd-fleet", "--stacks-dir", STACKS_DIR, "check", STACK,
        "--out", tmp_path / "out",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert " valid, 0 invalid" in out
    assert "policies" in out and "0 mandatory" in out
    assert f"(config {pack / 'config' / f'{STACK}.json'})" in out


def test_the_example_stacks_ship_and_plan_outside_a_checkout(installed: Path, tmp_path: Path) -> None:
    """Installed, with no stacks/ in the working directory, `llmd-fleet` uses the examples it ships."""
    shipped = _site_packages(installed) / "llmd_fleet" / "cli" / "stacks"
    assert {p.name for p in shipped.glob("Pulumi.*.yaml")} == {
        p.name for p in STACKS_DIR.glob("Pulumi.*.yaml")
    }
    out = _run(installed / "bin" / "llmd-fleet", "plan", "quickstart-h100", cwd=tmp_path, env=_env(installed))
    assert out.startswith("# plan of quickstart-h100: 16 GPUs on 2 nodes")


def test_metadata_names_the_license_urls_pythons_and_extras(installed: Path) -> None:
    info = next(_site_packages(installed).glob("llmd_fleet-*.dist-info"))
    assert "Apache License" in (info / "licenses" / "LICENSE").read_text()
    meta = email.message_from_string((info / "METADATA").read_text())
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == "<3.14,>=3.11"
    classifiers = meta.get_all("Classifier") or []
    assert {f"Programming Language :: Python :: {v}" for v in PYTHONS} <= set(classifiers)
    assert {u.split(",")[0] for u in meta.get_all("Project-URL") or []} >= {"Homepage", "Repository"}
    assert set(meta.get_all("Provides-Extra") or []) == {"gcp", "aws", "build"}


def test_the_core_install_has_no_cloud_sdk_and_names_the_extra(installed: Path, tmp_path: Path) -> None:
    site = _site_packages(installed)
    assert not (site / "pulumi_gcp").exists() and not (site / "pulumi_aws").exists()
    # Nor the image build's: the core install requires no provider plugin but Kubernetes'.
    assert not (site / "pulumi_docker_build").exists()
    for stack, extra in (("gke-h100", "gcp"), ("eks-h100", "aws")):
        result = subprocess.run(
            [str(installed / "bin" / "llmd-fleet"), "--stacks-dir", str(STACKS_DIR), "render", stack,
             "--out", str(tmp_path / stack)],
            cwd=tmp_path, env=_env(installed), capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and f"pip install 'llmd-fleet[{extra}]'" in result.stderr


def test_the_cloud_extras_render_the_cloud_stacks(installed_with_clouds: Path, tmp_path: Path) -> None:
    """Both cloud stacks render from the installed package with the extras (eks-h100 builds its
    serving image from the Dockerfile the wheel ships), to the same image tag as in a checkout."""
    for stack in ("gke-h100", "eks-h100"):
        out = _run(
            installed_with_clouds / "bin" / "llmd-fleet", "--stacks-dir", STACKS_DIR, "render", stack,
            "--out", tmp_path / stack, cwd=tmp_path, env=_env(installed_with_clouds),
        )  # fmt: skip
        assert f"rendered {stack}:" in out
    golden = (REPO / "tests" / "golden" / "eks-h100" / "summary.md").read_text()
    assert (tmp_path / "eks-h100" / "summary.md").read_text() == golden
