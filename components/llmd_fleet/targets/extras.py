"""The cloud SDKs are optional extras of the package: `llmd-fleet[gcp]` for gke stacks,
`llmd-fleet[aws]` for eks stacks; the core install (on-prem, local, one's own cluster) pulls
neither. So is the serving image build's SDK (`llmd-fleet[build]`, pulumi-docker-build, for
`llmd-fleet:images.build`): without it the core install requires no provider plugin but
Kubernetes' (the component provider, docs/components.md).
`require_target_extra` is called before anything imports a target's cloud half, by the
CLI (render, check) and by the stack program (`pulumi up`), so a missing SDK is one line naming the
extra rather than an import traceback. Pure: importlib and the target registry only."""

import importlib.util

from llmd_fleet.targets.specs import SPECS

TARGET_EXTRAS: dict[str, tuple[str, str, str]] = {
    kind: spec.sdk_extra for kind, spec in SPECS.items() if spec.sdk_extra is not None
}
"""target kind -> (extra, distribution, module), from each kind's `TargetSpec.sdk_extra`."""


# `llmd-fleet:images.build: true` -> (extra, distribution, module)
IMAGE_BUILD_EXTRA = ("build", "pulumi-docker-build", "pulumi_docker_build")


class MissingExtraError(Exception):
    """A stack's target needs a cloud SDK extra that is not installed (a one-line message)."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def require_target_extra(kind: str) -> None:
    """Raise MissingExtraError when target kind `kind` needs an extra that is not installed
    (nothing for a kind, or a name under targets/ that is no kind, without an extra)."""
    if kind not in TARGET_EXTRAS:
        return
    extra, distribution, module = TARGET_EXTRAS[kind]
    if not _installed(module):
        raise MissingExtraError(
            f"llmd-fleet:target.kind {kind} needs the {extra} extra ({distribution}), which is not "
            f"installed: pip install 'llmd-fleet[{extra}]'"
        )


def require_image_build_extra(build: bool) -> None:
    """Raise MissingExtraError when a stack asks for the image build (`images.build`) and its SDK
    is not installed."""
    extra, distribution, module = IMAGE_BUILD_EXTRA
    if build and not _installed(module):
        raise MissingExtraError(
            f"llmd-fleet:images.build needs the {extra} extra ({distribution}), which is not "
            f"installed: pip install 'llmd-fleet[{extra}]'"
        )
