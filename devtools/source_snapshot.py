"""Source snapshots the check tools build from, for Go modules the module proxy does not serve.

The llm-d router, its inference simulator and the LWS controller are Go modules the module proxy
refuses, so the tools that run their code (the router check, the twin's controllers) build them
from a snapshot of their source: either a git repository named by an environment variable, or a
`git archive` tarball (`<name>-<version>.tar.gz`) in the `src/` folder of the shared build inputs
beside the checkout (`../shared/src`, as CI lays it out). Nothing of their code is kept in this
repository; the snapshot is a build input, like the vendored CRD schemas.

A snapshot is identified by the commit it was taken at (a tarball made by `git archive` carries it
in its pax header, as `git get-tar-commit-id` reads it) and, for a tarball, by its sha256: both go
into the cache key of what is built from it.
"""

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from llmd_fleet.cli.paths import CHECKOUT

# Where CI and a developer's machine keep the shared build inputs: beside the checkout.
SHARED_SOURCES = CHECKOUT.parent / "shared" / "src"


class SnapshotError(Exception):
    """A snapshot is there but unusable (not a `git archive` tarball, no such ref)."""


class SnapshotMissing(SnapshotError):
    """No snapshot of the source is available: the check that needs it is not run."""


@dataclass(frozen=True)
class Snapshot:
    """One source snapshot: where it is, what commit it holds, and its content hash."""

    path: Path
    commit: str
    digest: str
    """sha256 of the tarball, or the commit again for a git repository (its content address)."""

    @property
    def is_tarball(self) -> bool:
        return self.path.is_file()

    def export(self, into: Path) -> None:
        """Unpack the source into `into` (which must not exist), refusing links and paths that
        leave it. A tarball made with `git archive --prefix=<name>/` has its one top folder
        removed, so `into` is the repository's root either way."""
        staging = into.with_name(into.name + ".unpacking")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        if self.is_tarball:
            with tarfile.open(self.path) as tar:
                tar.extractall(staging, filter="data")
        else:
            archive = subprocess.run(
                ["git", "-C", str(self.path), "archive", "--format=tar", self.commit],
                capture_output=True,
                check=True,
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(staging, filter="data")
        entries = list(staging.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
        root.rename(into)
        shutil.rmtree(staging, ignore_errors=True)


def tarball_commit(path: Path) -> str:
    """The commit a `git archive` tarball was made from (its pax global header's comment)."""
    with tarfile.open(path) as tar:
        comment = tar.pax_headers.get("comment", "")
    if len(comment) != 40 or any(c not in "0123456789abcdef" for c in comment):
        raise SnapshotError(f"{path} is not a `git archive` tarball of a commit (no commit id in its header)")
    return comment


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git_commit(repository: Path, ref: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repository), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SnapshotError(f"{repository} has no {ref}: {result.stderr.strip()}")
    return result.stdout.strip()


def find(env: str, tarball_name: str, ref: str, shared: Path = SHARED_SOURCES) -> Snapshot:
    """The snapshot named by `$env` (a git repository, read at `ref`, or a tarball), else
    `shared/<tarball_name>`; SnapshotMissing says why there is none, SnapshotError why the one
    there cannot be used."""
    named = os.environ.get(env, "")
    path = Path(named) if named else shared / tarball_name
    if not path.exists():
        where = f"${env} ({named})" if named else f"${env} is unset and {path}"
        raise SnapshotMissing(f"{where} does not exist: no source of {tarball_name.removesuffix('.tar.gz')}")
    if path.is_file():
        return Snapshot(path, tarball_commit(path), sha256(path))
    commit = _git_commit(path, ref)
    return Snapshot(path, commit, commit)
