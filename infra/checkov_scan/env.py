"""checkov's own environment: built once, then reused.

    python -m infra.checkov_scan.env      build it if missing, print its checkov executable

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

import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from infra.vllm_check.env import EnvError, base_python, cache_root, child_environ

PYTHON_VERSION = (3, 11)
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "venv; pip install checkov==V; checkov --version"
COMPLETE = ".complete"


def checkov_version() -> str:
    """The checkov version of the version matrix: the only place it is pinned."""
    from components.versions import versions

    return versions().tools.checkov


def env_key(version: str, python: Sequence[int] = PYTHON_VERSION) -> str:
    """16 hex digits over everything that decides the environment's contents."""
    digest = hashlib.sha256()
    for part in (RECIPE.encode(), f"checkov=={version}".encode(), ".".join(map(str, python[:2])).encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:16]


def env_dir(version: str | None = None) -> Path:
    return cache_root() / f"checkov-{env_key(version or checkov_version())}"


def executable(env: Path) -> Path:
    return env / "bin" / "checkov"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _step(title: str, command: list[str], log: Path) -> str:
    started = time.monotonic()
    print(f"  {title} ...", end="", file=sys.stderr, flush=True)
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=child_environ(),
            check=False,
        )
        out.write(result.stdout + result.stderr)
    print(f" {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if result.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-40:])
        raise EnvError(f"{title} failed (exit {result.returncode}); last lines of {log}:\n{tail}")
    return result.stdout


def build(target: Path, version: str) -> None:
    """Build the environment into `target` (which must not exist)."""
    log = target.with_name(target.name + ".log")
    log.write_text(f"building {target}\n")
    python = target / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    _step("create the venv", [base_python(), "-m", "venv", str(target)], log)
    _step(f"install checkov=={version}", [*pip, f"checkov=={version}"], log)
    reported = _step("run checkov --version", [str(executable(target)), "--version"], log).strip()
    if reported != version:
        raise EnvError(f"the environment's checkov reports {reported!r}, the version matrix pins {version}")


def ensure(version: str | None = None) -> Path:
    """checkov's executable, building the environment first if needed."""
    version = version or checkov_version()
    target = env_dir(version)
    if (target / COMPLETE).is_file():
        return executable(target)
    with _locked(target.with_name(target.name + ".lock")):
        if (target / COMPLETE).is_file():  # built by a concurrent run meanwhile
            return executable(target)
        if target.exists():
            shutil.rmtree(target)  # an interrupted build
        started = time.monotonic()
        print(f"building the checkov {version} environment in {target}", file=sys.stderr, flush=True)
        try:
            build(target, version)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        (target / COMPLETE).write_text(f"checkov=={version}\n")
        print(f"checkov environment ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return executable(target)


def main() -> int:
    try:
        checkov = ensure()
    except EnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(checkov)
    return 0


if __name__ == "__main__":
    sys.exit(main())
