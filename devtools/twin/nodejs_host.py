"""The Node.js language host, `pulumi-language-nodejs`, for the TypeScript program of `make components`.

    python -m devtools.twin build nodejs-host     build (or reuse) it and print where it is
    python -m devtools.twin gomod nodejs-host     regenerate its go.mod and go.sum (needs the proxy)

Like the Python host (python_host.py), it is built from a source snapshot of pulumi/pulumi at the
same commit (`[twin].pulumi-language-python`): `$LLMD_PULUMI_LANGUAGE_NODEJS_SOURCE`, else
`../shared/src/pulumi-language-nodejs-<commit[:7]>.tar.gz`; of it, the host folder's Go files
(`main.go`, `installcache.go`, `proxy*.go`). Upstream's go.mod replaces sdk/v3 and pkg/v3 with
directories of its repository; the wrapper under devtools/twin/gomod/nodejs-host/ requires both at
`[twin].pulumi-language-nodejs-sdk` instead. That is not the CLI's version: against v3.277.0 (the
CLI's, the newest the proxy serves) the host does not compile (`*monitorProxy does not implement
pulumirpc.ResourceMonitorServer (missing method ExistsResource)`: the resource monitor gained a
method after this commit), so it builds against the release of its own commit's line. It is
stamped with `[twin].pulumi-language-python-version` (the commit's sdk/.version, a development
build of 3.260.0), as the Python host is.

The build steps are language_host.py's, shared with the Python host. The binary goes to
`<cache>/pulumi-language-nodejs-<commit[:7]>-<key>/bin/`; the key hashes the
recipe, the commit and the snapshot's sha256, the Go version, the wrapper's files and the stamped
version. Every cold build prints its duration.
"""

from pathlib import Path

from devtools.twin import language_host
from devtools.twin.language_host import BuildError, Host, Pins

NAME = "nodejs-host"
BINARY = "pulumi-language-nodejs"
SOURCE_ENV = "LLMD_PULUMI_LANGUAGE_NODEJS_SOURCE"
PULUMI_SDK = language_host.PULUMI_SDK
HOST_DIR = "sdk/nodejs/cmd/pulumi-language-nodejs"
__all__ = ["BuildError", "Host", "Pins"]


def _host_go_files(host_dir: Path) -> list[Path]:
    return sorted(p for p in host_dir.glob("*.go") if not p.name.endswith("_test.go"))


RECIPE = language_host.Recipe(
    name=NAME,
    binary=BINARY,
    source_env=SOURCE_ENV,
    host_dir=HOST_DIR,
    steps=(
        "the Go files of the snapshot's host folder (tests left out) beside the wrapper's go.mod and "
        "go.sum; go build -mod=readonly -trimpath -ldflags '-s -w -X <version var>=<version>' "
        "-o bin/pulumi-language-nodejs"
    ),
    go_files=_host_go_files,
    sdk_in_key=True,
)


def pins() -> Pins:
    """The Python host's commit and stamp, built against `[twin].pulumi-language-nodejs-sdk`."""
    from llmd_fleet.versions import versions

    twin = versions().twin
    return Pins(
        twin.pulumi_language_python, twin.pulumi_language_python_version, twin.pulumi_language_nodejs_sdk
    )


def ensure(verbose: bool = True) -> Host:
    """The host, from the cache or built (language_host.Recipe.ensure)."""
    return RECIPE.ensure(pins(), verbose)


def regenerate() -> Path:
    """Rewrite devtools/twin/gomod/nodejs-host/ from the snapshot (language_host.Recipe.regenerate)."""
    return RECIPE.regenerate(pins())
