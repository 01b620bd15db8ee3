"""Build the router checker (gomod/main.go) against the pinned llm-d router's source.

    python -m devtools.router_check build      build (or reuse) it and print its path

The Go module proxy does not serve `github.com/llm-d/llm-d-router`, so the wrapper module in
devtools/router_check/gomod replaces it with `./router-src`: the router's source unpacked at
build time from a snapshot (tools/source_snapshot.py): `$LLMD_ROUTER_SOURCE` (a git repository of
llm-d/llm-d-router, read at the tag, or a `git archive` tarball), else
`../shared/src/llm-d-router-<tag>.tar.gz` beside the checkout. The tag is `[images.endpoint-picker]`
of images/versions.toml. Nothing of the router's source is kept in this repository. Every other
module comes from the proxy, at the versions go.sum pins. The binary goes to
`<cache>/router-check-<tag>-<key>/routercheck` (<cache> as for the other tools:
`$LLMD_FLEET_CACHE_DIR`, else `~/.cache/llmd-fleet`); the key hashes the recipe, the tag, the
snapshot's commit and sha256, the Go version and the wrapper's files.
"""

import shutil
import subprocess
import sys
from pathlib import Path

from devtools import source_snapshot, tool_cache
from llmd_fleet.versions import versions

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
MODULE = "github.com/llm-d/llm-d-router"
SOURCE_ENV = "LLMD_ROUTER_SOURCE"
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = "snapshot of <tag> unpacked into router-src; " + (
    "go build -mod=readonly -trimpath -ldflags '-s -w' -o routercheck ."
)


class BuildError(Exception):
    """The checker could not be built (no router source, wrong tag, or a failed build)."""


def router_tag() -> str:
    """The router release the fleet deploys: the endpoint picker's image tag."""
    return versions().image("endpoint-picker").tag


def wrapper_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(GOMOD_DIR.iterdir()) if p.is_file()}


def wrapper_problem(tag: str, files: dict[str, bytes]) -> str | None:
    """Why the committed wrapper does not build against `tag`, or None."""
    gomod = files.get("go.mod", b"").decode()
    if "go.sum" not in files or "main.go" not in files:
        return "devtools/router_check/gomod needs go.mod, go.sum and main.go"
    if f"\t{MODULE} {tag}\n" not in gomod and f"require {MODULE} {tag}\n" not in gomod:
        return f"devtools/router_check/gomod/go.mod does not require {MODULE} {tag}"
    if f"replace {MODULE} => ./router-src" not in gomod:
        return f"devtools/router_check/gomod/go.mod does not replace {MODULE} with ./router-src"
    return None


class SourceMissing(BuildError):
    """No router source snapshot: the check is not run (and says so), which is not a failure."""


def router_source(tag: str) -> source_snapshot.Snapshot:
    try:
        return source_snapshot.find(SOURCE_ENV, f"llm-d-router-{tag}.tar.gz", tag)
    except source_snapshot.SnapshotMissing as exc:
        raise SourceMissing(
            f"{exc} (the Go module proxy does not serve {MODULE}; set ${SOURCE_ENV} to a git "
            "repository or `git archive` tarball of llm-d/llm-d-router)"
        ) from None
    except source_snapshot.SnapshotError as exc:
        raise BuildError(str(exc)) from None


def ensure() -> Path:
    """The checker binary for the pinned router, built first if the cache has none."""
    tag = router_tag()
    files = wrapper_files()
    if problem := wrapper_problem(tag, files):
        raise BuildError(problem)
    source = router_source(tag)
    commit = source.commit
    try:
        go = tool_cache.go_version()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"the router checker is built with Go, which is not usable here: {exc}") from None
    key = tool_cache.cache_key(
        RECIPE.encode(),
        tag.encode(),
        commit.encode(),
        source.digest.encode(),
        go.encode(),
        *(item for name in sorted(files) for item in (name.encode(), files[name])),
    )
    target = tool_cache.cache_root() / f"router-check-{tag}-{key}"

    def build(target: Path) -> None:
        target.mkdir(parents=True)
        for name, content in files.items():
            (target / name).write_bytes(content)
        source.export(target / "router-src")
        log = target.with_name(target.name + ".log")
        log.write_text("")
        print(
            f"building the router checker against {MODULE} {tag} ({commit[:12]}) in {target}", file=sys.stderr
        )
        status = tool_cache.go_build(".", target / "routercheck", target, "-s -w", log)
        if status != 0:
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building the router checker failed (exit {status}); {log}:\n{tail}")
        # Only the binary is kept: the exported source is a build input, not a cache of it.
        shutil.rmtree(target / "router-src")

    elapsed = tool_cache.build_once(target, build, f"{MODULE}@{tag} {commit}\n")
    if elapsed is not None:
        print(f"router checker built in {elapsed:.0f} s", file=sys.stderr)
    return target / "routercheck"
