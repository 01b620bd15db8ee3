"""The isolated environment that runs the pinned vLLM's parser: built once, then reused.

    python -m devtools.vllm_check.env      build it if missing, print its interpreter

It lives outside the repository, in `$LLMD_FLEET_CACHE_DIR` (default `$XDG_CACHE_HOME/llmd-fleet`,
else `~/.cache/llmd-fleet`), under `vllm-parser-<key>`, where the key hashes everything that
decides its contents: the vLLM version of images/versions.toml, both requirements files, the
build steps and the Python version. Changing any of them builds a new environment beside the old
one; a machine that keeps its cache (CI does) reuses it. It is never mixed into the project's
`.venv`: vLLM pins a CUDA torch and ~200 packages the project must not depend on.

Build (a few minutes from scratch on a 2-core machine; ~2.2 GB with a CPU torch, 6.4 GB without):

1. a venv from this Python (3.11);
2. torch: a CPU wheel (`torch-*+cpu-cp311-*.whl`) from one of pip's local wheel directories
   (`find-links` in pip's configuration or `PIP_FIND_LINKS`) when one is there, otherwise exactly
   the torch vLLM requires (`[build].torch` of the matrix) from the package index, with its CUDA
   wheels. Parsing loads no CUDA code, so either serves; the CPU wheel only saves gigabytes;
3. `pip install -r requirements.txt` (the parser's small dependencies within vLLM's ranges);
4. `pip install --no-deps vllm==<matrix version> -r requirements-nodeps.txt`;
5. `devtools.vllm_check.deps`: installed versions satisfy vLLM's declared ranges;
6. a smoke run that imports vLLM and builds the serve parser.

Which torch was taken is part of the key, so moving to a machine with (or without) the local
wheel builds a fresh environment instead of reusing a mismatched one.

Only then is the environment marked complete; an interrupted build is removed and redone. A file
lock serialises concurrent builds of the same key. pip's output goes to `vllm-parser-<key>.log`
beside the environment; after step 3 pip lists vLLM's requirements that are not installed (CUDA
torch, flashinfer, ...): expected, and the reason step 4 checks the ranges instead of `pip check`.
Parsing needs no network and no model download.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import download_retry
from devtools.tool_cache import build_announced, cache_key, print_path_main
from devtools.tool_cache import cache_root as cache_root
from llmd_fleet.cli.paths import CHECKOUT, SOURCE_ROOT

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = CHECKOUT
REQUIREMENTS = HERE / "requirements.txt"
NO_DEPS_REQUIREMENTS = HERE / "requirements-nodeps.txt"
PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = (
    "venv; pip install TORCH; pip install -r requirements.txt; "
    "pip install --no-deps vllm==V -r requirements-nodeps.txt"
)
# Variables of the calling environment that must not leak into the parser environment's tools.
# With HF_HUB_OFFLINE set, EngineArgs looks for a cached model snapshot and fails.
_DROPPED_VARS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "HF_HUB_OFFLINE")


class EnvError(Exception):
    """The parser environment could not be built."""


def vllm_version() -> str:
    """The vLLM version of the version matrix: the only place it is pinned."""
    from llmd_fleet.versions import versions

    return versions().vllm.version


@dataclass(frozen=True)
class TorchSource:
    """Where step 2 takes torch from."""

    requirement: str
    """What pip installs: a wheel's path, or `torch==<version>`."""
    identity: str
    """What goes into the key: the wheel's file name (not its directory), or the requirement."""


def _pip_find_links() -> list[str]:
    """pip's configured `find-links` values (environment first, then its configuration files)."""
    values = os.environ.get("PIP_FIND_LINKS", "").split()
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    ).stdout
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            values.extend(value.strip().strip("'\"").split())
    return values


def local_cpu_torch(directories: Iterable[str], preferred: str) -> Path | None:
    """A CPU torch wheel for this Python in a local wheel directory: the `preferred` version if
    there, else the newest one present. URLs and missing directories are skipped."""
    tag = "cp{}{}".format(*PYTHON_VERSION)
    pattern = re.compile(rf"torch-(?P<version>[0-9.]+)\+cpu-{tag}-{tag}-[^/]*linux[^/]*_x86_64\.whl")
    found: dict[tuple[int, ...], Path] = {}
    for entry in directories:
        is_url = "://" in entry and not entry.startswith("file://")
        directory = Path(entry.removeprefix("file://"))
        if is_url or not directory.is_dir():
            continue
        for wheel in directory.glob("torch-*+cpu-*.whl"):
            if match := pattern.fullmatch(wheel.name):
                found[tuple(int(part) for part in match["version"].split("."))] = wheel
    if not found:
        return None
    wanted = tuple(int(part) for part in preferred.split("."))
    return found.get(wanted) or found[max(found)]


def torch_source(directories: Iterable[str] | None = None) -> TorchSource:
    """The local CPU wheel when one exists, otherwise vLLM's own torch pin from the index."""
    from llmd_fleet.versions import versions

    pinned = versions().build.torch
    wheel = local_cpu_torch(_pip_find_links() if directories is None else directories, pinned)
    if wheel is not None:
        return TorchSource(requirement=str(wheel), identity=wheel.name)
    return TorchSource(requirement=f"torch=={pinned}", identity=f"torch=={pinned}")


def env_key(
    version: str,
    requirements: bytes,
    no_deps: bytes,
    torch: str,
    python: Sequence[int] = PYTHON_VERSION,
) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    return cache_key(
        RECIPE.encode(),
        f"vllm=={version}".encode(),
        torch.encode(),
        ".".join(str(p) for p in python[:2]).encode(),
        requirements,
        no_deps,
    )


def env_dir(version: str | None = None, torch: TorchSource | None = None) -> Path:
    key = env_key(
        version or vllm_version(),
        REQUIREMENTS.read_bytes(),
        NO_DEPS_REQUIREMENTS.read_bytes(),
        (torch or torch_source()).identity,
    )
    return cache_root() / f"vllm-parser-{key}"


def interpreter(env: Path) -> Path:
    return env / "bin" / "python"


def child_environ(**extra: str) -> dict[str, str]:
    """This process's environment without what belongs to the project's own environment."""
    environ = {k: v for k, v in os.environ.items() if k not in _DROPPED_VARS}
    environ.update(extra)
    return environ


def module_command(python: Path, module: str, *args: str) -> list[str]:
    """Run a module of this package with the parser environment's interpreter, isolated (-I: no
    user site, no PYTHON* variables, no current directory on sys.path), with only the checkout
    (for `devtools.vllm_check`) and the library's source root added. (Never run it from inside
    vLLM's package directory: its `tokenizers/` subpackage would shadow the `tokenizers`
    distribution.)"""
    bootstrap = (
        "import runpy, sys; "
        f"sys.path[:0] = [{str(CHECKOUT)!r}, {str(SOURCE_ROOT)!r}]; "
        f"sys.argv[0] = {module!r}; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [str(python), "-I", "-c", bootstrap, *args]


def run_in_env(python: Path, module: str, jobs: Any, what: str, **extra: str) -> Any:
    """Run `module` of this package in the parser environment with `jobs` as a JSON file and read
    back the JSON result file it writes (`module JOBS.json RESULT.json`); `extra` adds variables
    to its environment. Raises EnvError naming `what` with the output's tail when it fails."""
    with tempfile.TemporaryDirectory(prefix="vllm-check-") as tmp:
        jobs_path, result = Path(tmp) / "jobs.json", Path(tmp) / "result.json"
        jobs_path.write_text(json.dumps(jobs))
        proc = subprocess.run(
            module_command(python, module, str(jobs_path), str(result)),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=tmp,
            env=child_environ(VLLM_TARGET_DEVICE="cpu", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", **extra),
            check=False,
        )
        if proc.returncode != 0 or not result.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
            raise EnvError(f"{what} failed (exit {proc.returncode}):\n{tail}")
        return json.loads(result.read_text())


def base_python() -> str:
    """A Python 3.11 to create the venv from: this one, or python3.11 on PATH."""
    if sys.version_info[:2] == PYTHON_VERSION:
        return sys.executable
    found = shutil.which("python{}.{}".format(*PYTHON_VERSION))
    if not found:
        raise EnvError("the parser environment needs Python 3.11 (the interpreter the checks were made with)")
    return found


def step(title: str, command: list[str], log: Path, **extra: str) -> str:
    """Run one build step of a tool environment (this one or checkov's) with the calling
    environment's own variables dropped, its output appended to `log`; its stdout. Raises
    EnvError with the log's tail when it fails."""
    started = time.monotonic()
    print(f"  {title} ...", end="", file=sys.stderr, flush=True)
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        if "pip" in command[1:3] and "install" in command:
            # A download that fails (a truncated wheel, a hash mismatch) is retried once without
            # pip's cache (devtools/download_retry.py); the retry line goes to the log and stderr.
            def announce(line: str) -> None:
                out.write(line + "\n")
                print(f"\n{line}", file=sys.stderr, flush=True)

            def record(text: str) -> None:
                out.write(text)

            result = download_retry.run(
                "pip",
                command,
                cwd=PROJECT_ROOT,
                env=child_environ(**extra),
                output=record,
                announce=announce,
            )
            result.stdout, result.stderr = "", ""  # already in the log; pip install's stdout is not used
        else:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                env=child_environ(**extra),
                cwd=PROJECT_ROOT,
                check=False,
            )
            out.write(result.stdout + result.stderr)
    print(f" {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if result.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-40:])
        raise EnvError(f"{title} failed (exit {result.returncode}); last lines of {log}:\n{tail}")
    return result.stdout


def build(target: Path, version: str, torch: TorchSource) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = interpreter(target)
    # --no-compile: the smoke run below compiles what the check imports, a fraction of the files.
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-compile"]
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install torch ({torch.identity})", [*pip, torch.requirement], log)
    step("install the parser's dependencies", [*pip, "-r", str(REQUIREMENTS)], log)
    step(
        f"install vllm=={version} without its dependencies",
        [*pip, "--no-deps", f"vllm=={version}", "-r", str(NO_DEPS_REQUIREMENTS)],
        log,
    )
    step(
        "check the versions against vLLM's declared ranges",
        module_command(python, "devtools.vllm_check.deps"),
        log,
    )
    step(
        "import vLLM and build the serve parser",
        module_command(python, "devtools.vllm_check.checker", "--smoke"),
        log,
        VLLM_TARGET_DEVICE="cpu",
    )


def ensure(version: str | None = None) -> Path:
    """The parser environment's interpreter, building the environment first if needed."""
    version = version or vllm_version()
    torch = torch_source()
    target = env_dir(version, torch)

    build_announced(
        target,
        f"vLLM {version} parser environment",
        lambda path: build(path, version, torch),
        f"vllm=={version}\n",
        f" (torch: {torch.identity})",
    )
    return interpreter(target)


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
