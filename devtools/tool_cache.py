"""Tools the checks build once and keep outside the repository: the vLLM parser and checkov
environments, promtool and the twin's binaries.

Each lives in `cache_root()` (`$LLMD_FLEET_CACHE_DIR`, else `$XDG_CACHE_HOME/llmd-fleet`, else
`~/.cache/llmd-fleet`) under a name carrying a key that hashes everything deciding its contents,
so a version bump builds beside the old copy and a machine that keeps its cache (CI does) reuses
it. `build_once` is the one way they are built: under a file lock (concurrent runs build once),
marked complete only at the end, and an interrupted build is removed and redone.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from devtools import download_retry

COMPLETE = ".complete"


def cache_root() -> Path:
    if explicit := os.environ.get("LLMD_FLEET_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmd-fleet"


def cache_key(*parts: bytes) -> str:
    """16 hex digits over the parts (each length-prefixed, so no two lists collide)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:16]


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_complete(target: Path) -> bool:
    return (target / COMPLETE).is_file()


def build_once(target: Path, build: Callable[[Path], None], marker: str) -> float | None:
    """Run `build(target)` unless `target` is complete already; `target` does not exist when
    `build` starts. Returns the build's duration in seconds, or None when nothing was built."""
    if is_complete(target):
        return None
    with locked(target.with_name(target.name + ".lock")):
        if is_complete(target):  # built by a concurrent run meanwhile
            return None
        shutil.rmtree(target, ignore_errors=True)  # an interrupted build
        started = time.monotonic()
        try:
            build(target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        (target / COMPLETE).write_text(marker)
        return time.monotonic() - started


def build_announced(
    target: Path, what: str, build: Callable[[Path], None], marker: str, note: str = ""
) -> None:
    """`build_once`, saying on stderr what is built where and, once built, how long it took
    (`note` is added to that line)."""

    def build_here(path: Path) -> None:
        print(f"building the {what} in {path}", file=sys.stderr, flush=True)
        build(path)

    elapsed = build_once(target, build_here, marker)
    if elapsed is not None:
        print(f"{what} ready in {elapsed:.0f} s{note}", file=sys.stderr)


def print_path_main(ensure: Callable[[], Path], error: type[Exception]) -> int:
    """A tool environment's command line: build it if needed and print the path to use, or the
    build's error and exit 1."""
    try:
        path = ensure()
    except error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def go_version() -> str:
    """`go env GOVERSION` (part of a Go build's key: a new toolchain builds afresh). Raises
    OSError or CalledProcessError when Go is not usable."""
    return subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()


def go_build(
    package: str | Sequence[str],
    out: Path,
    module_dir: Path,
    ldflags: str,
    log: Path,
    tags: Sequence[str] = (),
    into_directory: bool = False,
) -> int:
    """`go build` of `package` (or of several main packages into the directory `out`, linked in
    parallel) from the wrapper module in `module_dir` (its go.sum as committed, no edits), with
    build `tags`, appending the command and its output to `log`; the exit status. A build that
    fails on a module download (a corrupt or truncated zip, a dropped connection) removes that
    module from the module cache and runs once more (devtools/download_retry.py)."""
    packages = [package] if isinstance(package, str) else list(package)  # `into_directory`: out is a folder
    target = str(out) + "/" if into_directory or len(packages) > 1 else str(out)
    command = ["go", "build", "-mod=readonly", "-trimpath", "-ldflags", ldflags]
    if tags:
        command += ["-tags", ",".join(tags)]
    command += ["-o", target, *packages]
    with log.open("a") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()

        def append(text: str) -> None:
            handle.write(text)
            handle.flush()

        def announce(line: str) -> None:
            append(line + "\n")
            print(line, file=sys.stderr, flush=True)

        return download_retry.run("go", command, cwd=module_dir, output=append, announce=announce).returncode


def go_test(packages: Sequence[str], module_dir: Path, log: Path) -> int:
    """`go test` of `packages` in the module in `module_dir` (its go.sum as committed, no edits),
    appending the command and its output to `log`; the exit status."""
    command = ["go", "test", "-mod=readonly", "-trimpath", "-count=1", *packages]
    with log.open("a") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()

        def append(text: str) -> None:
            handle.write(text)
            handle.flush()

        def announce(line: str) -> None:
            append(line + "\n")
            print(line, file=sys.stderr, flush=True)

        return download_retry.run("go", command, cwd=module_dir, output=append, announce=announce).returncode


def go_wrapper_tool(
    gomod_dir: Path,
    module: str,
    pinned: str,
    pin_key: str,
    binary_name: str,
    what: str,
    error: type[Exception],
) -> Path:
    """A small Go program of this repository (the `main` package of the wrapper module in
    `gomod_dir`, which must require `module` at `pinned`, `pin_key` of images/versions.toml),
    built with `go build -trimpath -ldflags '-s -w'` into `<cache>/<binary_name>-<key>` if the
    cache has none, keyed by the recipe, Go's version and the module's files; `what` names it in
    the printed lines (the cold build's time among them). `error` is raised on a pin mismatch or
    a failed build."""
    rel = os.path.relpath(gomod_dir, Path(__file__).resolve().parents[1])
    gomod = (gomod_dir / "go.mod").read_text()
    if not re.search(rf"^\s*{re.escape(module)} {re.escape(pinned)}$", gomod, re.M):
        raise error(
            f"{rel}/go.mod does not require {module} {pinned} ({pin_key} of images/versions.toml): "
            "`go get` it and `go mod tidy`"
        )
    ldflags = "-s -w"
    # The recipe is the command go_build runs, so the cache key follows any change to it.
    recipe = f"go build -mod=readonly -trimpath -ldflags '{ldflags}' -o <dir>/{binary_name} ."
    files = {p.name: p.read_bytes() for p in sorted(gomod_dir.iterdir()) if p.is_file()}
    key = cache_key(
        recipe.encode(), go_version().encode(), *(i for n in sorted(files) for i in (n.encode(), files[n]))
    )
    target = cache_root() / f"{binary_name}-{key}"

    def build(target: Path) -> None:
        target.mkdir(parents=True)
        binary, log = target / binary_name, target.with_name(target.name + ".log")
        log.write_text("")
        print(f"building {what} ({module}@{pinned}) into {target}", file=sys.stderr)
        if go_build(".", binary, gomod_dir, ldflags, log) != 0:
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise error(f"building {what} failed; {log}:\n{tail}")

    elapsed = build_once(target, build, f"{module}@{pinned}\n")
    if elapsed is not None:
        print(f"{what} built in {elapsed:.0f} s", file=sys.stderr)
    return target / binary_name
