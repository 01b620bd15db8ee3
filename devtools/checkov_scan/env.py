"""checkov's own environment: built once, then reused.

    python -m devtools.checkov_scan.env      build it if missing, print its checkov executable

It lives outside the repository beside the vLLM parser environment (`$LLMD_FLEET_CACHE_DIR`,
default `$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`), under `checkov-<key>`, where
the key hashes the checkov version pinned in images/versions.toml ([tools].checkov), the build
steps and the Python version. A version bump builds a new environment beside the old one. It is
never mixed into the project's `.venv`: checkov pins boto3, networkx and ~100 other packages the
project must not depend on.

Build: a venv from Python 3.11, `pip install checkov==<version>` (checkov pins most of its own
dependencies exactly), then `checkov --version` must print the pinned version. Only then is the
environment marked complete; an interrupted build is removed and redone, and a file lock
serialises concurrent builds. pip's output goes to `checkov-<key>.log` beside it.
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root, print_path_main
from devtools.vllm_check.env import EnvError, base_python, step

PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install checkov==V; checkov --version"


def checkov_version() -> str:
    """The checkov version of the version matrix: the only place it is pinned."""
    from llmd_fleet.versions import versions

    return versions().tools.checkov


def env_key(version: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    return cache_key(RECIPE.encode(), f"checkov=={version}".encode(), ".".join(map(str, python[:2])).encode())


def env_dir(version: str | None = None) -> Path:
    return cache_root() / f"checkov-{env_key(version or checkov_version())}"


def executable(env: Path) -> Path:
    return env / "bin" / "checkov"


def build(target: Path, version: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = target / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install checkov=={version}", [*pip, f"checkov=={version}"], log)
    reported = step("run checkov --version", [str(executable(target)), "--version"], log).strip()
    if reported != version:
        raise EnvError(f"the environment's checkov reports {reported!r}, the version matrix pins {version}")


def ensure(version: str | None = None) -> Path:
    """checkov's executable, building the environment first if needed."""
    version = version or checkov_version()
    target = env_dir(version)

    build_announced(
        target, f"checkov {version} environment", lambda path: build(path, version), f"checkov=={version}\n"
    )
    return executable(target)


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
