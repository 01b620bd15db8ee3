"""The images section against the stack's target kind: the variant its fabric needs and where its
build pushes (`TargetSpec.image_registry`), checked by llmd_fleet/images/config.py. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.images.config import ImageTarget, images_config_problems, variant_for
from llmd_fleet.targets.specs import SPECS

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def image_target(kind: str) -> ImageTarget:
    """What the images section is checked against on target kind `kind`."""
    spec = SPECS[kind]
    return ImageTarget(kind, variant_for(spec.fabric.name), spec.image_registry)


def images_problems(config: StackConfig) -> list[Problem]:
    """The `images` section fits the target: the build its fabric needs, the registry it pushes to."""
    roles = config.serving.roles
    return images_config_problems(
        image_target(config.target.kind),
        config.images,
        config.has_registry_password,
        key(config, "images"),
        instance_spans_nodes=any(r.nodes_per_instance > 1 for r in (roles.prefill, roles.decode)),
    )
