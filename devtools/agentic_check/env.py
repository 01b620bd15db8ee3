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
from pathlib import Path

from devtools.pip_tool import PipTool
from devtools.tool_cache import print_path_main
from devtools.vllm_check.env import EnvError

AGENTIC_API = PipTool(
    name="agentic-api",
    package="agentic-api",
    command="agentic-server",
    recipe="venv; pip install agentic-api==V; agentic-server --version",
    reports=lambda version: f"agentic-server {version}",
    pinned_by="the image tag",
)


def agentic_version() -> str:
    """The wheel version of the pinned image tag (`v0.9.0` -> `0.9.0`)."""
    from llmd_fleet.versions import versions

    return versions().image("agentic-api").tag.removeprefix("v")


def ensure(version: str | None = None) -> Path:
    """The `agentic-server` executable, building the environment first if needed."""
    return AGENTIC_API.ensure(version or agentic_version())


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
