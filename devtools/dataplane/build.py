"""Build the data plane's binaries from the pinned source snapshots, into the tool cache.

Two `go build` invocations, each inside the upstream module's own tree (its go.mod and go.sum, as
released), so the Go build cache the router checker filled is reused:

- the router (`[images.endpoint-picker]` tag): `cmd/epp`, `cmd/pd-sidecar` and the gateway
  stand-in (devtools/dataplane/gateway/main.go, placed into the tree at build time: it needs the
  envoy ext_proc protos the router's module already requires) in one invocation;
- the inference simulator (`[images.inference-sim]` tag): `cmd/llm-d-inference-sim`.

Sources as for the router checker (devtools/source_snapshot.py): `$LLMD_ROUTER_SOURCE` /
`$LLMD_INFERENCE_SIM_SOURCE`, else `../shared/src/<name>-<tag>.tar.gz`. Every cold build prints
its duration.
"""

import shutil
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from devtools import source_snapshot, tool_cache

HERE = Path(__file__).resolve().parent
VERSIONS = HERE.parents[1] / "images" / "versions.toml"
GATEWAY_SOURCE = HERE / "gateway" / "main.go"
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
    extra = GATEWAY_SOURCE.read_bytes() if target is ROUTER else b""
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
        if extra:
            (tree / GATEWAY_PACKAGE).mkdir(parents=True)
            (tree / GATEWAY_PACKAGE / "main.go").write_bytes(extra)
        log = path.with_name(path.name + ".log")
        log.write_text("")
        print(
            f"building {', '.join(target.binaries)} ({target.tarball_prefix} {tag}) in {path}",
            file=sys.stderr,
        )
        started = time.monotonic()
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
