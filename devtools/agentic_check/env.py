"""The agentic API's own environment: the `agentic-api` wheel (the Rust binary `agentic-server`
and a small Python launcher) at the version of the image tag the stacks render, built once, then
reused.

    python -m devtools.agentic_check.env      build it if missing, print its agentic-server

It lives in the tool cache (devtools/tool_cache.py) under `agentic-api-<key>`, the key hashing the
version, the build steps and the Python version. Build: a venv, `pip install agentic-api==<version>`
(a 26 MB wheel, no dependencies), then `agentic-server --version` must print
`agentic-server <version>`. The version is `[images.agentic-api].tag` of images/versions.toml
without its `v`: the image and the wheel are released together from one tag
(vllm-project/agentic-api), so the tag is pinned once.
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root, print_path_main
from devtools.vllm_check.env import EnvError, base_python, step

PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install agentic-api==V; agentic-server --version"


def agentic_version() -> str:
    """The wheel version of the pinned image tag (`v0.9.0` -> `0.9.0`)."""
    from llmd_fleet.versions import versions

    return versions().image("agentic-api").tag.removeprefix("v")


def env_key(version: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    return cache_key(
        RECIPE.encode(), f"agentic-api=={version}".encode(), ".".join(map(str, python[:2])).encode()
    )


def env_dir(version: str | None = None) -> Path:
    return cache_root() / f"agentic-api-{env_key(version or agentic_version())}"


def executable(env: Path) -> Path:
    return env / "bin" / "agentic-server"


def build(target: Path, version: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = target / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install agentic-api=={version}", [*pip, f"agentic-api=={version}"], log)
    reported = step("run agentic-server --version", [str(executable(target)), "--version"], log).strip()
    if reported != f"agentic-server {version}":
        raise EnvError(f"the environment's binary reports {reported!r}, the image tag pins {version}")


def ensure(version: str | None = None) -> Path:
    """The `agentic-server` executable, building the environment first if needed."""
    version = version or agentic_version()
    target = env_dir(version)
    build_announced(
        target,
        f"agentic-api {version} environment",
        lambda path: build(path, version),
        f"agentic-api=={version}\n",
    )
    return executable(target)


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
