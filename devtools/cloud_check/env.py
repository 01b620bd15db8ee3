"""The API models' own environment: built once, then reused.

    python -m devtools.cloud_check.env      build it if missing, print its site-packages

It lives outside the repository beside the other tool environments (`$LLMD_FLEET_CACHE_DIR`,
default `$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`), under `cloud-models-<key>`,
where the key hashes the botocore and google-api-python-client versions pinned in
images/versions.toml ([tools].cloud-check-botocore, [tools].cloud-check-google-api-python-client),
the build steps and the Python version. It is never mixed into the project's `.venv`.

Build: a venv from Python 3.11, `pip install --no-deps botocore==B google-api-python-client==G`
(only the packages' model files are read: botocore/data/<service>/<api version>/service-2.json.gz
and googleapiclient/discovery_cache/documents/<api>.<version>.json, so neither package's own
dependencies are needed), then the installed versions must be the pinned ones. Only then is the
environment marked complete; an interrupted build is removed and redone under a file lock
(devtools/tool_cache.py). pip's output goes to `cloud-models-<key>.log` beside it.
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root, print_path_main
from devtools.vllm_check.env import EnvError, base_python, step

PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install --no-deps botocore==B google-api-python-client==G; versions"
REPORT_VERSIONS = (
    "import importlib.metadata as m; print(m.version('botocore'), m.version('google-api-python-client'))"
)


def pins() -> tuple[str, str]:
    """(botocore version, google-api-python-client version), from the version matrix."""
    from llmd_fleet.versions import versions

    tools = versions().tools
    return tools.cloud_check_botocore, tools.cloud_check_google_api_python_client


def requirements(botocore: str, google: str) -> list[str]:
    return [f"botocore=={botocore}", f"google-api-python-client=={google}"]


def env_key(botocore: str, google: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    return cache_key(
        RECIPE.encode(),
        " ".join(requirements(botocore, google)).encode(),
        ".".join(map(str, python[:2])).encode(),
    )


def env_dir(botocore: str, google: str) -> Path:
    return cache_root() / f"cloud-models-{env_key(botocore, google)}"


def site_packages(env: Path) -> Path:
    """The environment's site-packages (lib/python3.11/site-packages)."""
    major, minor = PYTHON_VERSION[:2]
    return env / "lib" / f"python{major}.{minor}" / "site-packages"


def build(target: Path, botocore: str, google: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = target / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-deps"]
    wanted = requirements(botocore, google)
    step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    step(f"install {' '.join(wanted)}", [*pip, *wanted], log)
    reported = step("read the installed versions", [str(python), "-c", REPORT_VERSIONS], log).split()
    if reported != [botocore, google]:
        raise EnvError(
            f"the environment holds botocore and google-api-python-client {' '.join(reported)}, "
            f"the version matrix pins {botocore} {google}"
        )
    if not site_packages(target).is_dir():
        raise EnvError(f"no {site_packages(target)} in the built environment")


def ensure(pinned: tuple[str, str] | None = None) -> Path:
    """The environment's site-packages, building the environment first if needed."""
    botocore, google = pinned or pins()
    target = env_dir(botocore, google)
    build_announced(
        target,
        f"cloud API models environment (botocore {botocore}, google-api-python-client {google})",
        lambda path: build(path, botocore, google),
        "\n".join(requirements(botocore, google)) + "\n",
    )
    return site_packages(target)


def main() -> int:
    return print_path_main(ensure, EnvError)


if __name__ == "__main__":
    sys.exit(main())
