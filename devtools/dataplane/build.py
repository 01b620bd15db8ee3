"""Build the data plane's binaries from the pinned source snapshots, into the tool cache.

Two `go build` invocations, each inside the upstream module's own tree (its go.mod and go.sum, as
released), so the Go build cache the router checker filled is reused:

- the router (`[images.endpoint-picker]` tag): `cmd/epp`, `cmd/pd-sidecar` and the gateway
  stand-in (devtools/dataplane/gateway/*.go, placed into the tree at build time: it needs the
  envoy ext_proc protos the router's module already requires) in one invocation, after the
  stand-in's own tests (`go test`, gateway/*_test.go) have passed in the same tree;
- the inference simulator (`[images.inference-sim]` tag): `cmd/llm-d-inference-sim`.

Sources as for the router checker (devtools/source_snapshot.py): `$LLMD_ROUTER_SOURCE` /
`$LLMD_INFERENCE_SIM_SOURCE`, else `../shared/src/<name>-<tag>.tar.gz`. Every cold build prints
its duration.
"""

import os
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from devtools import source_snapshot, tool_cache

HERE = Path(__file__).resolve().parent
VERSIONS = HERE.parents[1] / "images" / "versions.toml"
GATEWAY_DIR = HERE / "gateway"
# Where the stand-in goes inside the router's tree: a folder upstream does not have.
GATEWAY_PACKAGE = "llmdfleet/gateway"
RECIPE = "go build -mod=readonly -trimpath -ldflags '-s -w' -o bin/ <packages> in the snapshot's tree"


class BuildError(Exception):
    """A binary could not be built (a source is unusable or `go build` failed)."""


@dataclass(frozen=True)
class Target:
    name: str
    env: str
    tarball_prefix: str
    image: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]


ROUTER = Target(
    "router",
    "LLMD_ROUTER_SOURCE",
    "llm-d-router",
    "endpoint-picker",
    ("./cmd/epp", "./cmd/pd-sidecar", "./" + GATEWAY_PACKAGE),
    ("epp", "pd-sidecar", "gateway"),
)
SIMULATOR = Target(
    "simulator",
    "LLMD_INFERENCE_SIM_SOURCE",
    "llm-d-inference-sim",
    "inference-sim",
    ("./cmd/llm-d-inference-sim",),
    ("llm-d-inference-sim",),
)


def image_tag(image: str, versions_file: Path = VERSIONS) -> str:
    """The pinned tag of `[images.<image>]` (read from the file, so the library's layout does
    not matter here)."""
    with versions_file.open("rb") as handle:
        return str(tomllib.load(handle)["images"][image]["tag"])


def ensure(target: Target) -> Path:
    """The folder holding `target`'s binaries, built first when the cache has none. Raises
    SnapshotMissing when there is no source (the caller says "not run")."""
    tag = image_tag(target.image)
    snapshot = source_snapshot.find(target.env, f"{target.tarball_prefix}-{tag}.tar.gz", tag)
    try:
        go = tool_cache.go_version()
    except OSError as exc:
        raise BuildError(f"Go is not usable here: {exc}") from None
    sources = {p.name: p.read_bytes() for p in sorted(GATEWAY_DIR.glob("*.go"))} if target is ROUTER else {}
    extra = b"".join(name.encode() + b"\0" + text for name, text in sources.items())
    key = tool_cache.cache_key(
        RECIPE.encode(),
        tag.encode(),
        snapshot.commit.encode(),
        snapshot.digest.encode(),
        go.encode(),
        extra,
        " ".join(target.packages).encode(),
    )
    folder = tool_cache.cache_root() / f"dataplane-{target.name}-{tag}-{key}"

    def build(path: Path) -> None:
        path.mkdir(parents=True)
        tree = path / "src"
        snapshot.export(tree)
        if sources:
            (tree / GATEWAY_PACKAGE).mkdir(parents=True)
            for name, text in sources.items():
                (tree / GATEWAY_PACKAGE / name).write_bytes(text)
        log = path.with_name(path.name + ".log")
        log.write_text("")
        print(
            f"building {', '.join(target.binaries)} ({target.tarball_prefix} {tag}) in {path}",
            file=sys.stderr,
        )
        started = time.monotonic()
        if sources:
            # The stand-in's own tests (gateway/*_test.go) gate its build: a failing one fails it.
            status = tool_cache.go_test(["./" + GATEWAY_PACKAGE], tree, log)
            if status != 0:
                tail = "\n".join(log.read_text().splitlines()[-30:])
                raise BuildError(f"testing the gateway stand-in failed (exit {status}); {log}:\n{tail}")
        status = tool_cache.go_build(
            list(target.packages), path / "bin", tree, "-s -w", log, into_directory=True
        )
        if status != 0:
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building {target.name} failed (exit {status}); {log}:\n{tail}")
        print(f"dataplane: {target.name} built in {time.monotonic() - started:.0f} s", file=sys.stderr)
        shutil.rmtree(tree)  # the source is a build input, not part of the cache

    tool_cache.build_once(folder, build, f"{target.tarball_prefix} {tag} {snapshot.commit}\n")
    return folder / "bin"


# The body-based router (`llmd-fleet:models`): cmd/bbr of the Gateway API inference extension's Go
# module at the `[images.body-based-router]` tag, fetched through `go mod download` (the module
# proxy serves that exact version; `go list -m -versions` lists only v1.6.2) and built inside a
# copy of the module's tree, its go.mod and go.sum as released. The module's go.work is left out
# of the copy: it names ./conformance, a module of its own that is not in this module's zip.
BBR_MODULE = "sigs.k8s.io/gateway-api-inference-extension"
BBR_IMAGE = "body-based-router"
BBR_RECIPE = "go mod download -json <module>@<tag>; copy its tree less go.work; " + RECIPE


def module_source(module: str, version: str) -> tuple[Path, str]:
    """The module's extracted tree in the Go module cache and its go.sum hash, downloaded first
    when the cache has none (BuildError when the proxy does not serve it)."""
    import json
    import subprocess

    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=HERE,
            env={**os.environ, "GOWORK": "off"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"go mod download {module}@{version}: {exc}") from None
    try:
        info = json.loads(done.stdout or "{}")
    except ValueError:
        info = {}
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        reason = info.get("Error") or done.stderr.strip() or f"exit {done.returncode}"
        raise BuildError(f"go mod download {module}@{version}: {reason}")
    return Path(info["Dir"]), str(info.get("Sum", ""))


def ensure_bbr() -> Path:
    """The body-based router's binary (`bbr`), built first when the cache has none."""
    tag = image_tag(BBR_IMAGE)
    try:
        go = tool_cache.go_version()
    except OSError as exc:
        raise BuildError(f"Go is not usable here: {exc}") from None
    source, digest = module_source(BBR_MODULE, tag)
    key = tool_cache.cache_key(BBR_RECIPE.encode(), tag.encode(), digest.encode(), go.encode())
    folder = tool_cache.cache_root() / f"dataplane-bbr-{tag}-{key}"

    def build(path: Path) -> None:
        path.mkdir(parents=True)
        tree = path / "src"
        # The module cache's files are read-only; the copy's folders are made writable again
        # below so the tree can be removed after the build.
        shutil.copytree(
            source, tree, ignore=lambda folder, names: ["go.work"] if folder == str(source) else []
        )
        log = path.with_name(path.name + ".log")
        log.write_text("")
        print(f"building bbr ({BBR_MODULE} {tag}) in {path}", file=sys.stderr)
        started = time.monotonic()
        status = tool_cache.go_build("./cmd/bbr", path / "bin" / "bbr", tree, "-s -w", log)
        if status != 0:
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building bbr failed (exit {status}); {log}:\n{tail}")
        print(f"dataplane: bbr built in {time.monotonic() - started:.0f} s", file=sys.stderr)
        for folder, _, _ in os.walk(tree):
            os.chmod(folder, 0o755)
        shutil.rmtree(tree)

    tool_cache.build_once(folder, build, f"{BBR_MODULE} {tag} {digest}\n")
    return folder / "bin" / "bbr"
