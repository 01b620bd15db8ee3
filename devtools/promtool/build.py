"""Build promtool from the Prometheus Go module into a cache outside the repository.

    python -m devtools.promtool build      build (or reuse) promtool and print its path
    python -m devtools.promtool gomod      regenerate the wrapper module after a version bump (needs
                                        the Go module proxy)

The wrapper module in devtools/promtool/gomod requires `github.com/prometheus/prometheus` at
`[tools].promtool` of images/versions.toml and repeats the module's own exclude and replace
directives (a dependency's are not applied). The binary goes to
`<cache>/promtool-<version>-<key>/promtool`, where <cache> is `$LLMD_FLEET_CACHE_DIR` (default
`$XDG_CACHE_HOME/llmd-fleet`, else `~/.cache/llmd-fleet`) and the key hashes the recipe, the Go
version and the wrapper's files. A machine that keeps its cache reuses the binary; a build runs
once under a file lock and is checked with `promtool --version` before it is marked complete.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from devtools import tool_cache
from llmd_fleet.versions import versions

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
MODULE = "github.com/prometheus/prometheus"
PACKAGE = f"{MODULE}/cmd/promtool"
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = (
    "go build -mod=readonly -trimpath -ldflags '-s -w -X <version var>=<release>' -tags <tags> "
    "-o <dir>/promtool <package>"
)
# Prometheus' own build tag that leaves out every service-discovery plugin (plugins/plugin_*.go:
# `//go:build !remove_all_sd || enable_<name>_sd`): checking and unit-testing rules discovers
# nothing, and the cloud SDKs those plugins pull in are most of a cold build. promtool's own
# imports (file and kubernetes SD, for `check config`) stay.
TAGS = ("remove_all_sd",)
VERSION_VAR = "github.com/prometheus/common/version.Version"


class BuildError(Exception):
    """promtool could not be built."""


def module_version() -> str:
    """The Prometheus module version of the matrix (v0.3xx.y for Prometheus 3.xx.y)."""
    return versions().tools.promtool


def release(module: str) -> str:
    """Prometheus 3.x is tagged v0.3xx.y in its Go module: v0.3xx.y -> 3.xx.y."""
    match = re.fullmatch(r"v0\.3(\d\d)\.(\d+)", module)
    if not match:
        raise BuildError(f"[tools].promtool {module!r} is not a Prometheus 3.x module tag (v0.3xx.y)")
    return f"3.{int(match[1])}.{match[2]}"


def wrapper_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(GOMOD_DIR.iterdir()) if p.is_file()}


def wrapper_problem(module: str, files: dict[str, bytes]) -> str | None:
    """Why the committed wrapper does not build `module`, or None."""
    gomod = files.get("go.mod", b"").decode()
    if "go.sum" not in files:
        return "devtools/promtool/gomod/go.sum is missing"
    if not re.search(rf"^require {re.escape(MODULE)} {re.escape(module)}$", gomod, re.M):
        return f"devtools/promtool/gomod/go.mod does not require {MODULE} {module}"
    return None


def go_version() -> str:
    try:
        return tool_cache.go_version()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"promtool is built with Go, which is not usable here: {exc}") from None


def build_key(module: str, go: str, files: dict[str, bytes]) -> str:
    return tool_cache.cache_key(
        RECIPE.encode(),
        " ".join(TAGS).encode(),
        module.encode(),
        go.encode(),
        *(item for name in sorted(files) for item in (name.encode(), files[name])),
    )


def binary_dir(module: str | None = None) -> Path:
    module = module or module_version()
    return tool_cache.cache_root() / f"promtool-{module}-{build_key(module, go_version(), wrapper_files())}"


def reported_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"promtool, version (\S+)", out)
    return match[1] if match else ""


def ensure() -> Path:
    """The pinned promtool, built first if the cache has none."""
    module = module_version()
    if problem := wrapper_problem(module, wrapper_files()):
        raise BuildError(f"{problem}: run `python -m devtools.promtool gomod`")
    target = binary_dir(module)

    def build(target: Path) -> None:
        target.mkdir(parents=True)
        binary, log = target / "promtool", target.with_name(target.name + ".log")
        log.write_text("")
        print(f"building promtool {release(module)} ({PACKAGE}@{module}) into {target}", file=sys.stderr)
        ldflags = f"-s -w -X {VERSION_VAR}={release(module)}"
        status = tool_cache.go_build(PACKAGE, binary, GOMOD_DIR, ldflags, log, tags=TAGS)
        if status != 0 or reported_version(binary) != release(module):
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building promtool failed (exit {status}); {log}:\n{tail}")

    elapsed = tool_cache.build_once(target, build, f"{PACKAGE}@{module}\n")
    if elapsed is not None:
        print(f"promtool built in {elapsed:.0f} s", file=sys.stderr)
    return target / "promtool"


HEADER = """// The wrapper module `make promtool` builds promtool from (devtools/promtool/build.py).
// The version follows [tools].promtool of images/versions.toml; the exclude and replace
// directives are the ones the Prometheus module itself declares at that version (`go build` of a
// dependency does not apply them). Regenerate with `python -m devtools.promtool gomod`
// after a bump.
"""


def regenerate_gomod() -> None:
    """Rewrite go.mod from the upstream module's directives and tidy go.sum (uses the proxy)."""
    module = module_version()
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    info = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{module}"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    gomod_path = re.search(r'"GoMod":\s*"([^"]+)"', info)
    if not gomod_path:
        raise BuildError(f"no go.mod for {MODULE}@{module}")
    upstream = Path(gomod_path[1]).read_text()
    directives = "\n".join(
        block.strip() for block in re.findall(r"^((?:exclude|replace) (?:\([^)]*\)|[^\n]*))", upstream, re.M)
    )
    text = (
        f"{HEADER}\nmodule llmd-fleet.invalid/promtool\n\ngo 1.26.0\n\n"
        f"require {MODULE} {module}\n\n{directives}\n"
    )
    (GOMOD_DIR / "go.mod").write_text(text)
    subprocess.run(["go", "mod", "tidy"], cwd=GOMOD_DIR, check=True, env=env)
