"""The real Python language host, `pulumi-language-python`, for the engine run and the quickstart walk.

    python -m devtools.twin build python-host     build (or reuse) it and print where it is
    python -m devtools.twin gomod python-host     regenerate its go.mod and go.sum (needs the proxy)

The Pulumi CLI starts this host for a `runtime: python` project and for a Python policy pack: it
honours Pulumi.yaml's runtime options (`toolchain: uv` runs `uv sync` before the program,
`typechecker: mypy` runs mypy over the program directory and refuses to run a program it
rejects), installs dependencies for `pulumi install` and answers `pulumi about`.

The module proxy refuses the host's module at every version, so it is built from a source snapshot
of pulumi/pulumi (devtools/source_snapshot.py): `$LLMD_PULUMI_LANGUAGE_PYTHON_SOURCE` (a git
repository, read at the pinned commit, or a `git archive` tarball), else
`../shared/src/pulumi-language-python-<commit[:7]>.tar.gz`. Of the snapshot only two files are
used: `sdk/python/cmd/pulumi-language-python/main.go` and the exec script beside that folder
(`pulumi-language-python-exec`, which the host looks for beside its own binary). Upstream's go.mod
replaces sdk/v3 and pkg/v3 with directories of its repository; the wrapper module under
devtools/twin/gomod/python-host/ requires both at `[twin].pulumi-cli` instead (the CLI's version, so
the two share every compiled package), keeps upstream's fork replace, and holds the go.sum `go mod
tidy` wrote. The build copies main.go beside that go.mod and go.sum and runs `go build
-mod=readonly`; the version `[twin].pulumi-language-python-version` is stamped into the SDK's
version variable, as upstream's release build does with its own version. The steps are
language_host.py's, shared with the Node.js host.

The binary and the exec script go to `<cache>/pulumi-language-python-<commit[:7]>-<key>/bin/`; the
key hashes the recipe, the commit and the snapshot's sha256, the Go version, the wrapper's files
and the stamped version. Every cold build prints its duration.
"""

import json
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from devtools import source_snapshot
from devtools.twin import language_host
from devtools.twin.language_host import BuildError, Host, Pins

NAME = "python-host"
BINARY = "pulumi-language-python"
EXEC_SCRIPT = "pulumi-language-python-exec"
SOURCE_ENV = "LLMD_PULUMI_LANGUAGE_PYTHON_SOURCE"
PULUMI_SDK = language_host.PULUMI_SDK
# Paths inside the pulumi/pulumi repository.
HOST_DIR = "sdk/python/cmd/pulumi-language-python"
EXEC_PATH = f"sdk/python/cmd/{EXEC_SCRIPT}"


def _main_go(host_dir: Path) -> list[Path]:
    main = host_dir / "main.go"
    return [main] if main.is_file() else []


RECIPE = language_host.Recipe(
    name=NAME,
    binary=BINARY,
    source_env=SOURCE_ENV,
    host_dir=HOST_DIR,
    steps=(
        "main.go of the snapshot's host folder beside the wrapper's go.mod and go.sum; go build "
        "-mod=readonly -trimpath -ldflags '-s -w -X <version var>=<version>' -o bin/pulumi-language-python; "
        "the exec script copied beside it"
    ),
    go_files=_main_go,
    beside=(EXEC_PATH,),
)

SnapshotMissing = source_snapshot.SnapshotMissing
__all__ = ["BuildError", "Host", "Pins", "SnapshotMissing"]


def pins() -> Pins:
    """The host's pins: built against the CLI's sdk/pkg version, so the two share every compiled package."""
    from llmd_fleet.versions import versions

    twin = versions().twin
    return Pins(twin.pulumi_language_python, twin.pulumi_language_python_version, twin.pulumi_cli)


def ensure(verbose: bool = True) -> Host:
    """The host, from the cache or built (language_host.Recipe.ensure)."""
    return RECIPE.ensure(pins(), verbose)


def regenerate() -> Path:
    """Rewrite devtools/twin/gomod/python-host/ from the snapshot (language_host.Recipe.regenerate)."""
    return RECIPE.regenerate(pins())


# --- a checkout as a user has it, for the host ------------------------------------------------------


def copy_checkout(source: Path, target: Path) -> int:
    """Copy the checkout's tracked and untracked (not ignored) files into `target`; returns the
    number of files copied. No `.venv`: `sync_venv` makes the copy's own, as `make setup` does."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=True,
    ).stdout.decode()
    count = 0
    for name in filter(None, listed.split("\0")):
        origin = source / name
        if not origin.is_file():
            continue  # deleted in the work tree
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, destination)
        count += 1
    return count


def uv_cache_dir(base: Mapping[str, str]) -> str:
    """The uv cache of the caller's environment (`$UV_CACHE_DIR`, else what `uv cache dir` says
    there): shared with the copy, whose HOME may be a fresh one with no cache of its own."""
    if explicit := base.get("UV_CACHE_DIR"):
        return explicit
    done = subprocess.run(["uv", "cache", "dir"], env=dict(base), capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise BuildError(f"`uv cache dir` failed: {done.stderr.strip() or 'no output'}")
    return done.stdout.strip()


def uv_env(base: Mapping[str, str]) -> dict[str, str]:
    """What every uv run of the copy gets, the host's own `uv sync --inexact` before each program
    and policy pack included: the lock is used as it is (`UV_FROZEN`: never re-resolved, never
    rewritten) and the caller's uv cache is shared (so a warm cache makes no downloads)."""
    return {"UV_FROZEN": "1", "UV_CACHE_DIR": uv_cache_dir(base)}


def sync_venv(checkout: Path, env: Mapping[str, str]) -> float:
    """`uv sync --frozen` in `checkout` (its `.venv`, as `make setup` makes it, without the
    bytecode step); returns the seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        ["uv", "sync", "--frozen", "--no-progress"],
        cwd=checkout,
        env={k: v for k, v in env.items() if k != "VIRTUAL_ENV"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BuildError(f"uv sync --frozen in {checkout} failed: {done.stderr.strip()[-2000:]}")
    return time.monotonic() - started


def about_host(about_json: str) -> dict[str, str]:
    """What `pulumi about --json` says of the language host: the version of the `python` language
    plugin the CLI ran (`version`, from the host's plugin info) and what the host's About answered
    for the project (`toolchain`, `typechecker`, lower-cased: the host names them `Uv`, `Mypy`)."""
    document = json.loads(about_json)
    if not isinstance(document, dict):
        return {}
    found: dict[str, str] = {}
    runtime = document.get("runtime")
    if isinstance(runtime, dict):
        for option in ("toolchain", "typechecker"):
            if option in runtime:
                found[option] = str(runtime[option]).lower()
    for plugin in document.get("plugins") or []:
        if isinstance(plugin, dict) and plugin.get("kind") == "language" and plugin.get("name") == "python":
            found["version"] = str(plugin.get("version"))
    return found


def host_line(about: Mapping[str, str], commit: str) -> str:
    """The line saying the real host ran the program with the project's runtime options."""
    return (
        f"engine: language host {BINARY} {about.get('version', '?')} (from source {commit[:7]}), "
        f"toolchain {about.get('toolchain', '?')}, typechecker {about.get('typechecker', '?')}: ok"
    )


def host_problems(host: Host, about: Mapping[str, str], project: Mapping[str, str]) -> list[str]:
    """Why the host `pulumi about` describes is not the one pinned, or did not apply the project's
    runtime options (`project`: Pulumi.yaml's `runtime.options`)."""
    problems = []
    if about.get("version") != host.version:
        problems.append(
            f"the CLI ran {BINARY} {about.get('version')!r} (`pulumi about`), the matrix pins {host.version}"
        )
    for option in ("toolchain", "typechecker"):
        if about.get(option) != project.get(option, "").lower():
            problems.append(
                f"{BINARY}: {option} {about.get(option)!r} in `pulumi about`, "
                f"Pulumi.yaml asks for {project.get(option)!r}"
            )
    return problems


NOT_RUN_LINE = "engine: language host: not run (no source snapshot)"
