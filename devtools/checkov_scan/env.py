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

from devtools.pip_tool import PYTHON_VERSION, PipTool
from devtools.tool_cache import print_path_main
from devtools.vllm_check.env import EnvError

CHECKOV = PipTool(
    name="checkov",
    package="checkov",
    command="checkov",
    recipe="venv; pip install checkov==V; checkov --version",
    reports=lambda version: version,
    pinned_by="the version matrix",
)


def checkov_version() -> str:
    """The checkov version of the version matrix: the only place it is pinned."""
    from llmd_fleet.versions import versions

    return versions().tools.checkov


def env_key(version: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    return CHECKOV.key(version, python)


def env_dir(version: str | None = None) -> Path:
    return CHECKOV.env_dir(version or checkov_version())


def ensure(version: str | None = None) -> Path:
    """checkov's executable, building the environment first if needed."""
    return CHECKOV.ensure(version or checkov_version())


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
