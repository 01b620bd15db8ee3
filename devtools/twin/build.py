"""Build the twin's binaries from their wrapper modules, into a cache outside the repository.

    python -m devtools.twin build [name ...]     build (or reuse) and print where each binary is
    python -m devtools.twin gomod [name ...]     regenerate the wrapper modules (needs the proxy)

`python-host` is one of the names: the Python language host, built from a source snapshot
(python_host.py).

Each wrapper builds into `<cache>/twin-bin-<name>-<key>/`, where <cache> is
`$LLMD_FLEET_CACHE_DIR` (default `$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`) and the
key hashes everything that decides the binaries: the build recipe, the Go version, the wrapper's
go.mod, go.sum and Go files, and the ldflags. A bump in images/versions.toml (after `gomod`)
builds a new directory beside the old one; a machine that keeps its cache reuses it. A binary of
the right version already on PATH is used instead of building. Each wrapper builds under a file
lock of its own (a concurrent run waits rather than building it twice), its binaries in one
`go build`, and each build prints its duration.
"""

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from devtools import tool_cache
from devtools.tool_cache import COMPLETE as COMPLETE
from devtools.tool_cache import cache_root as cache_root
from devtools.twin.modules import (
    GOMOD_DIR,
    KUBERNETES_PROVIDER,
    PULUMI_CLI,
    Binary,
    Wrapper,
    local_replaces,
    upstream_gomod,
    upstream_pins,
    wrapper_gomod,
    wrapper_ok,
    wrapper_sources,
    wrappers,
)

# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "go build -mod=readonly -trimpath -ldflags '-s -w <ldflags>' -o <dir>/<binary> <package>"


class BuildError(Exception):
    """A wrapper module could not be built."""


def go_version() -> str:
    """`go env GOVERSION` (part of the key: a new toolchain builds afresh)."""
    return tool_cache.go_version()


def build_key(wrapper: Wrapper, files: dict[str, bytes], go: str) -> str:
    """16 hex digits over everything that decides the binaries of `wrapper`."""
    generated = (
        (b"module copied, embeds generated, replaced by ./module",) if wrapper.generate is not None else ()
    )
    return tool_cache.cache_key(
        RECIPE.encode(),
        *generated,
        go.encode(),
        wrapper.name.encode(),
        " ".join(wrapper.ldflags).encode(),
        *(b.package.encode() for b in wrapper.binaries),
        *(item for name in sorted(files) for item in (name.encode(), files[name])),
    )


def wrapper_files(wrapper: Wrapper) -> dict[str, bytes]:
    """The committed files of a wrapper module (go.mod, go.sum, *.go)."""
    directory = wrapper.directory
    if not (directory / "go.mod").is_file():
        raise BuildError(f"{directory}/go.mod is missing: run `python -m devtools.twin gomod {wrapper.name}`")
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.name in ("go.mod", "go.sum") or path.suffix == ".go"
    }


def bin_dir(wrapper: Wrapper, go: str | None = None) -> Path:
    key = build_key(wrapper, wrapper_files(wrapper), go or go_version())
    return cache_root() / f"twin-bin-{wrapper.name}-{key}"


def reports_version(output: str, version: str) -> bool:
    """Whether a binary's version output names exactly `version` (as a whole word)."""
    import re

    return re.search(rf"(?<![\w.]){re.escape(version)}(?![\w.+-])", output) is not None


def on_path(binary: Binary, version: str) -> Path | None:
    """`binary` from PATH when it reports `version`, else None (always None for a binary that
    has no version arguments: a plugin, which PATH does not hold)."""
    found = shutil.which(binary.name)
    if not found or not binary.version_args:
        return None
    try:
        out = subprocess.run(
            [found, *binary.version_args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(found) if reports_version(out.stdout + out.stderr, version) else None


def module_dir(wrapper: Wrapper) -> Path:
    """The upstream module's directory in the module cache (downloaded, checksum verified against
    the wrapper's go.sum)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", wrapper.module],
        cwd=wrapper.directory,
        capture_output=True,
        text=True,
        check=False,
    )
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise BuildError(
            f"{wrapper.name}: go mod download {wrapper.module}: {info.get('Error') or out.stderr}"
        )
    return Path(info["Dir"])


def build_dir(wrapper: Wrapper, target: Path) -> Path:
    """Where `wrapper` builds: its own directory, or, for a wrapper whose module needs generated
    files, a scratch copy under `target` (`src/`) holding a writable copy of the module
    (`src/module/`, the generated files written into it) and `replace <module> => ./module`."""
    if wrapper.generate is None:
        return wrapper.directory
    source = module_dir(wrapper)
    src = target / "src"
    src.mkdir()
    for name, data in wrapper_files(wrapper).items():
        (src / name).write_bytes(data)
    shutil.copytree(source, src / "module")
    for path in [src / "module", *(src / "module").rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    wrapper.generate(src / "module")
    subprocess.run(["go", "mod", "edit", f"-replace={wrapper.module}=./module"], cwd=src, check=True)
    return src


def _go_build(wrapper: Wrapper, binaries: Sequence[Binary], out: Path, log: Path, directory: Path) -> None:
    """`binaries` into `out`: one binary to its own path, several main packages in one `go build`
    (their links run in parallel and share one load of the package graph)."""
    ldflags = " ".join(("-s", "-w", *wrapper.ldflags))
    packages = [binary.package for binary in binaries]
    target = out / binaries[0].name if len(binaries) == 1 else out
    if tool_cache.go_build(packages, target, directory, ldflags, log) != 0:
        tail = log.read_text().splitlines()[-15:]
        raise BuildError(f"{wrapper.name}: go build {' '.join(packages)} failed:\n" + "\n".join(tail))


def _named_by_package(binary: Binary) -> bool:
    """Whether `go build -o DIR/` names this binary as the wrapper does (the package's last element)."""
    return binary.package.rstrip("/").rsplit("/", 1)[-1] == binary.name


def ensure(wrapper: Wrapper, verbose: bool = True) -> dict[str, Path]:
    """Every binary of `wrapper`: from PATH at the right version, else from the cache, else built."""
    found = {b.name: on_path(b, wrapper.reported_version) for b in wrapper.binaries}
    if all(found.values()):
        return {name: path for name, path in found.items() if path is not None}
    target = bin_dir(wrapper)
    seconds = tool_cache.build_once(
        target, lambda target: _build(wrapper, target, verbose), f"{wrapper.module} {wrapper.version}\n"
    )
    if verbose and seconds is not None:
        print(
            f"twin build: {wrapper.name} {wrapper.version} built in {seconds:.0f} s ({target})",
            file=sys.stderr,
        )
    return {b.name: found[b.name] or target / b.name for b in wrapper.binaries}


def _build(wrapper: Wrapper, target: Path, verbose: bool) -> None:
    """Every binary of `wrapper` into `target` (tool_cache.build_once marks it complete)."""
    target.mkdir(parents=True)
    log = target.with_name(target.name + ".log")
    log.write_text("")
    directory = build_dir(wrapper, target)
    together = [b for b in wrapper.binaries if _named_by_package(b)]
    groups = [together] if together else []
    groups += [[b] for b in wrapper.binaries if not _named_by_package(b)]
    for group in groups:
        began = time.monotonic()
        _go_build(wrapper, group, target, log, directory)
        if verbose:
            names = ", ".join(b.name for b in group)
            print(
                f"twin build: {names} {wrapper.version} in {time.monotonic() - began:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def regenerate(name: str) -> None:
    """Rewrite devtools/twin/gomod/<name>/ for the matrix's version: the replaced-module
    list read from the upstream go.mod at that version, then `go mod tidy` for the requirements and go.sum."""
    current = wrappers()[name]
    upstream = upstream_gomod(current.module, current.version)
    pins = list(local_replaces(upstream, "unused"))
    if name == "kubernetes":
        wrapper = wrappers(kubernetes_replaces=pins)[name]
    elif name == "etcd":
        wrapper = wrappers(etcd_replaces=pins)[name]
    elif current.module in (PULUMI_CLI, KUBERNETES_PROVIDER):
        replaces, forks = upstream_pins(upstream)
        wrapper = replace(current, replaces=replaces, forks=forks)
    else:
        wrapper = current
    directory = GOMOD_DIR / name
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink()
    (directory / "go.mod").write_text(wrapper_gomod(wrapper))
    for file, text in wrapper_sources(wrapper).items():
        (directory / file).write_text(text)
    subprocess.run(["go", "mod", "tidy"], cwd=directory, check=True)
    problems = wrapper_ok(wrapper, (directory / "go.mod").read_text())
    if problems:
        raise BuildError("; ".join(problems))


def main(argv: Sequence[str]) -> int:
    from devtools.source_snapshot import SnapshotError
    from devtools.twin import nodejs_host, python_host

    command, names = argv[0], list(argv[1:])
    known = wrappers()
    for name in names or list(known):
        if name not in known and name not in (python_host.NAME, nodejs_host.NAME):
            choices = ", ".join([*known, python_host.NAME, nodejs_host.NAME])
            print(f"twin: unknown module {name!r} (known: {choices})", file=sys.stderr)
            return 2
    try:
        for name in names or [*known, python_host.NAME]:
            if name == nodejs_host.NAME:
                if command == "gomod":
                    print(f"twin gomod: {nodejs_host.regenerate()}")
                else:
                    print(f"{nodejs_host.BINARY}\t{nodejs_host.ensure().binary}")
            elif name == python_host.NAME:
                if command == "gomod":
                    print(f"twin gomod: {python_host.regenerate()}")
                else:
                    try:
                        print(f"{python_host.BINARY}\t{python_host.ensure().binary}")
                    except python_host.SnapshotMissing as missing:
                        if names:  # asked for by name: its source is needed
                            raise
                        print(f"twin build: {python_host.BINARY}: not run: {missing}", file=sys.stderr)
            elif command == "gomod":
                regenerate(name)
                print(f"twin gomod: {known[name].directory}")
            else:
                for binary, path in ensure(wrappers()[name]).items():
                    print(f"{binary}\t{path}")
    except (BuildError, python_host.BuildError, nodejs_host.BuildError, SnapshotError) as error:
        print(f"twin: {error}", file=sys.stderr)
        return 1
    return 0
