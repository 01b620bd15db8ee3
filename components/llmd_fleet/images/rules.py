"""The images section's rules against the target. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.images.config import images_config_problems

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def images_problems(config: StackConfig) -> list[Problem]:
    roles = config.serving.roles
    return images_config_problems(
        config.target.kind,
        config.images,
        config.has_registry_password,
        key(config, "images"),
        instance_spans_nodes=any(r.nodes_per_instance > 1 for r in (roles.prefill, roles.decode)),
    )
