"""The cached environment that runs the fabric preflight probe on this machine: built once, then reused.

    python -m devtools.preflight_probe.env      build it if missing, print its interpreter

The probe (llmd_fleet/layers/preflight/probe.py) is what the preflight Job runs in the serving image; its
test (tests/devtools/test_preflight_probe.py, `make preflight-probe`) drives the same code over NIXL's UCX
backend between two agents on one machine, host memory only. That needs the real `nixl` package,
which the project's `.venv` must not carry (a CUDA runtime's worth of wheels), so it lives in its own
environment outside the repository, beside the vLLM parser and checkov environments
(`$LLMD_FLEET_CACHE_DIR`, default `$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`), under
`nixl-probe-<key>`. The key hashes the NIXL version and CUDA major of images/versions.toml ([build]),
the numpy pin ([tools].preflight_numpy), the build steps and the Python version.

Build: a venv from Python 3.11, then `pip install --no-deps nixl==V nixl-cu<major>==V numpy==N`.
`nixl` itself is a front package that requires both CUDA backend wheels and an unpinned torch; the
serving image skips its dependencies the same way (images/Dockerfile.wide-ep). Then a smoke run
imports `nixl._api` and creates an agent with the UCX backend. Only then is the environment marked
complete; an interrupted build is removed and redone under a file lock (tools/tool_cache.py).
pip's output goes to `nixl-probe-<key>.log` beside it.

LIBFABRIC (the EFA backend) does not load on a machine without the CUDA libraries, so only UCX
is exercised here; the Job on EKS uses LIBFABRIC in the EFA image.
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root, print_path_main
from devtools.vllm_check.env import EnvError, base_python, step

PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install --no-deps nixl==V nixl-cuM==V numpy==N; smoke: UCX agent"
# Creates one agent with the UCX backend (the progress thread on, as the probe runs it).
SMOKE = (
    "from nixl._api import nixl_agent, nixl_agent_config; "
    "a = nixl_agent('smoke', nixl_agent_config(enable_prog_thread=True, backends=['UCX'])); "
    "print(sorted(a.get_plugin_list()))"
)


def pins() -> tuple[str, str, str]:
    """(NIXL version, CUDA major of its backend wheel, numpy version), from the version matrix."""
    from llmd_fleet.versions import versions

    matrix = versions()
    return matrix.build.nixl, matrix.build.cuda_major, matrix.tools.preflight_numpy


def requirements(nixl: str, cuda_major: str, numpy: str) -> list[str]:
    return [f"nixl=={nixl}", f"nixl-cu{cuda_major}=={nixl}", f"numpy=={numpy}"]


def env_key(nixl: str, cuda_major: str, numpy: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    return cache_key(
        RECIPE.encode(),
        " ".join(requirements(nixl, cuda_major, numpy)).encode(),
        ".".join(map(str, python[:2])).encode(),
    )


def env_dir() -> Path:
    return cache_root() / f"nixl-probe-{env_key(*pins())}"


def interpreter(env: Path) -> Path:
    return env / "bin" / "python"


def build(target: Path, nixl: str, cuda_major: str, numpy: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = interpreter(target)
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    wanted = requirements(nixl, cuda_major, numpy)
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install {' '.join(wanted)} without dependencies", [*pip, "--no-deps", *wanted], log)
    plugins = step("create a NIXL agent with the UCX backend", [str(python), "-I", "-c", SMOKE], log)
    if "UCX" not in plugins:
        raise EnvError(f"NIXL {nixl} in {target} lists no UCX plugin: {plugins.strip()}")


def ensure() -> Path:
    """The environment's interpreter, building the environment first if needed."""
    nixl, cuda_major, numpy = pins()
    target = env_dir()

    build_announced(
        target,
        f"NIXL {nixl} probe environment",
        lambda path: build(path, nixl, cuda_major, numpy),
        " ".join(requirements(nixl, cuda_major, numpy)) + "\n",
    )
    return interpreter(target)


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
