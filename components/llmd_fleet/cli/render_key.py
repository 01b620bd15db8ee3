"""The key of a render: a hash of everything that decides what `llmd-fleet render` writes.

A render directory records its key in its marker file (llmd_fleet/cli/outdir.py); `render
--reuse` and the golden tests read an earlier render only when its key is the current one, so a
render made before a change to the code, the version matrix, a dependency or the stack's settings
is never read in place of a fresh one.

What goes in: every file of the installed `llmd_fleet` package (code, policy configs, packaged
stacks and schemas), the checkout's images/ (the version matrix, the image build files), the
versions of the distributions the synthesis runs (the Pulumi SDKs, pydantic, PyYAML), the Python
minor, and the stack's name, settings and secret key names as the program receives them.
"""

import hashlib
import json
import sys
from functools import cache
from importlib import metadata

from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.cli.paths import PACKAGE_DIR as PACKAGE_DIR
from llmd_fleet.cli.stack_file import StackFile

# Distributions whose code runs in a synthesis: a new version may declare resources differently.
_RUNTIME_DISTRIBUTIONS = ("pulumi", "pulumi-kubernetes", "pulumi-gcp", "pulumi-aws", "pydantic", "PyYAML")


def _distribution_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


@cache
def code_digest() -> str:
    """The hash of the package's files, the version matrix and the runtime: one per process."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(len(label).to_bytes(8, "big") + label.encode())
        digest.update(len(data).to_bytes(8, "big") + data)

    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            add(str(path.relative_to(PACKAGE_DIR)), path.read_bytes())
    # The checkout's images/: the version matrix and the serving image's build files, which a
    # render names (an installed package has its own copy of the matrix, hashed above).
    images = CHECKOUT / "images"
    for path in sorted(images.rglob("*")) if images.is_dir() else ():
        if path.is_file():
            add(str(path.relative_to(CHECKOUT)), path.read_bytes())
    for name in _RUNTIME_DISTRIBUTIONS:
        add(f"distribution {name}", _distribution_version(name).encode())
    add("python", f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    return digest.hexdigest()


def render_key(stack_file: StackFile) -> str:
    """16 hex digits over the code (`code_digest`) and the stack as the program receives it."""
    stack = json.dumps(
        {"stack": stack_file.stack, "values": stack_file.values, "secrets": sorted(stack_file.secret_keys)},
        sort_keys=True,
    )
    return hashlib.sha256(f"{code_digest()}\n{stack}".encode()).hexdigest()[:16]
