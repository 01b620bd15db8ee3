"""inference-perf's own environment, where the rendered workload files are validated with the
tool's config models: built once, then reused.

    python -m devtools.bench.env STACK...   build it if missing, validate each stack's workload

It lives outside the repository beside the other tool environments (`$LLMD_FLEET_CACHE_DIR`,
default `$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`), under `inference-perf-<key>`,
where the key hashes the inference-perf version pinned in images/versions.toml
([tools].inference-perf), the build steps and the Python version. It is never mixed into the
project's `.venv`: inference-perf needs a newer Python than the project's 3.11 (its
Requires-Python) and pins transformers exactly.

That Python, the minor of [tools].inference-perf-python (`X.Y`), comes from the machine, never
from a download: `pythonX.Y` on PATH when it runs, else pyenv's installations of that minor
(`pyenv root`/versions/X.Y.*), else the distribution's /usr/bin/pythonX.Y (Debian bookworm has
none). Without one the build stops with that message and the check fails: it is never skipped.

Build: a venv from that Python, `pip install inference-perf==<version>`, then `pip show` must
report the pinned version. Validation runs `devtools.bench.validate` in it: each workload
through `inference_perf.config.read_config`, the function `inference-perf --config_file` loads its
file with, plus a negative control (a misspelt key must be refused).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root
from devtools.vllm_check.env import EnvError, child_environ, step
from llmd_fleet.cli.paths import CHECKOUT

# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install inference-perf==V; pip show inference-perf"


def python_version() -> tuple[int, int]:
    """The Python minor of the version matrix the environment is built from."""
    from llmd_fleet.versions import versions

    major, minor = versions().tools.inference_perf_python.split(".")
    return int(major), int(minor)


def inference_perf_version() -> str:
    """The inference-perf version of the version matrix: the only place it is pinned."""
    from llmd_fleet.versions import versions

    return versions().tools.inference_perf


def _runs_as(python: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out == "{}.{}".format(*python_version())


def _pyenv_pythons() -> list[str]:
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return []
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False).stdout.strip()
    name = "python{}.{}".format(*python_version())
    prefix = "{}.{}.".format(*python_version())
    versions_dir = Path(root) / "versions"
    if not root or not versions_dir.is_dir():
        return []
    found = [p / "bin" / name for p in versions_dir.iterdir() if p.name.startswith(prefix)]
    return [str(p) for p in sorted(found, reverse=True) if p.is_file()]


def base_python() -> str:
    """A Python of the pinned minor on this machine (see the module docstring), or EnvError."""
    name = "python{}.{}".format(*python_version())
    candidates = [found] if (found := shutil.which(name)) else []
    candidates += [*_pyenv_pythons(), f"/usr/bin/{name}"]
    for candidate in candidates:
        if _runs_as(candidate):
            return candidate
    raise EnvError(
        f"inference-perf needs Python {'.'.join(map(str, python_version()))} and none runs here "
        f"(tried: {', '.join(candidates)}); install one (pyenv, or a distribution package) and retry"
    )


def env_key(version: str, python: Sequence[int] | None = None) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    python = python or python_version()
    return cache_key(
        RECIPE.encode(), f"inference-perf=={version}".encode(), ".".join(map(str, python[:2])).encode()
    )


def env_dir(version: str | None = None) -> Path:
    return cache_root() / f"inference-perf-{env_key(version or inference_perf_version())}"


def interpreter(env: Path) -> Path:
    return env / "bin" / "python"


def build(target: Path, version: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = interpreter(target)
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install inference-perf=={version}", [*pip, f"inference-perf=={version}"], log)
    shown = step("pip show inference-perf", [str(python), "-m", "pip", "show", "inference-perf"], log)
    reported = next(
        (line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Version:")), ""
    )
    if reported != version:
        raise EnvError(f"the environment's inference-perf is {reported!r}, the version matrix pins {version}")


def ensure(version: str | None = None) -> Path:
    """The environment's interpreter, building the environment first if needed."""
    version = version or inference_perf_version()
    target = env_dir(version)

    build_announced(
        target,
        f"inference-perf {version} environment",
        lambda path: build(path, version),
        f"inference-perf=={version}\n",
    )
    return interpreter(target)


def validate(python: Path, workloads: dict[str, str]) -> dict[str, str | None]:
    """Stack -> None when inference-perf accepts its workload, else the tool's error."""
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        jobs, result = Path(tmp) / "jobs.json", Path(tmp) / "result.json"
        jobs.write_text(json.dumps(workloads))
        bootstrap = (
            "import runpy, sys; "
            f"sys.path.insert(0, {str(CHECKOUT)!r}); "
            "sys.argv[0] = 'validate'; "
            "runpy.run_module('devtools.bench.validate', run_name='__main__', alter_sys=True)"
        )
        # -I: no user site, no PYTHON* variables; only the checkout is added, and the one module
        # imported from it uses nothing but the standard library and inference-perf.
        proc = subprocess.run(
            [str(python), "-I", "-c", bootstrap, str(jobs), str(result)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=tmp,
            env=child_environ(HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error"),
            check=False,
        )
        if proc.returncode != 0 or not result.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
            raise EnvError(f"the validation run failed (exit {proc.returncode}):\n{tail}")
        answer: dict[str, str | None] = json.loads(result.read_text())
        return answer


def main(argv: list[str]) -> int:
    from llmd_fleet.cli.bench.workload import BenchError, BenchOptions, workload
    from llmd_fleet.cli.render import to_yaml
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config
    from llmd_fleet.core.problems import ConfigError
    from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS

    stacks_dir = Path(os.environ.get("LLMD_FLEET_STACKS_DIR", "stacks"))
    workloads: dict[str, str] = {}
    for stack in argv:
        try:
            config = stack_config(read_stack_file(stacks_dir, stack))
            options = BenchOptions()
            if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
                # The managed gateway's address is the cloud's; any address validates the file.
                options = BenchOptions(gateway_address="10.0.0.2")
            workloads[stack] = to_yaml(workload(config, options))
        except (ConfigError, BenchError) as exc:
            print(f"error: {stack}: {exc}", file=sys.stderr)
            return 2
    if not workloads:
        print("error: no stack given", file=sys.stderr)
        return 2
    try:
        python = ensure()
        results = validate(python, workloads)
    except EnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    failed = False
    for stack in workloads:
        problem = results.get(stack, "no result")
        if problem is None:
            print(f"{stack}: workload accepted by inference-perf {inference_perf_version()}'s config models")
        else:
            failed = True
            print(f"{stack}: REFUSED by inference-perf {inference_perf_version()}: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
