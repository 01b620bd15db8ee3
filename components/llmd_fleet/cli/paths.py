"""Where the offline tools find the checkout they run in.

The library lives in `components/llmd_fleet` (components/ is the source root, like `src/`), so the
repository root is two levels above the package. Installed from the wheel there is no checkout;
what the tools need from one ships in the wheel (the version matrix, the CRD schemas, the policy
pack and the example stacks' policy configs, the example stacks, the own-program example).
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# The directory that holds the `llmd_fleet` package: `components/` in a checkout, site-packages
# when installed. A child interpreter (the vLLM check environment) imports the package from here.
SOURCE_ROOT = PACKAGE_DIR.parent
CHECKOUT = SOURCE_ROOT.parent

PACKAGED_STACKS = PACKAGE_DIR / "cli" / "stacks"
"""The example stack files the wheel ships (the repository's stacks/), used outside a checkout."""


def stacks_dir_for(root: Path) -> Path:
    """The stacks of the project at `root`, or the packaged examples when it has none."""
    own = root / "stacks"
    return own if own.is_dir() or not PACKAGED_STACKS.is_dir() else PACKAGED_STACKS


PACKAGED_POLICY_CONFIGS = PACKAGE_DIR / "policies" / "config"
"""The example stacks' policy configs the wheel ships (the repository's policies/config/)."""

PACKAGED_EXAMPLES = PACKAGE_DIR / "examples"
"""The own-program example the wheel ships (the repository's examples/existing_cluster.py)."""


def policy_config_for(root: Path, stack: str) -> Path | None:
    """The default policy config of `stack`: the project's policies/config/STACK.json, or where the
    project has no policies/config/ (an installed package), the one the package ships; None when
    there is none."""
    own = root / "policies" / "config"
    directory = own if own.is_dir() else PACKAGED_POLICY_CONFIGS
    path = directory / f"{stack}.json"
    return path if path.is_file() else None
