"""ModelExpress' rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def weight_loading_problems(config: StackConfig) -> list[Problem]:
    """ModelExpress needs its client, which only the wide-EP image carries."""
    if config.serving.weight_loading == "modelexpress" and not config.images.build:
        return [
            Problem(
                key(config, "serving", "weight_loading"),
                "modelexpress needs images.build true: the ModelExpress client is installed in the "
                "wide-EP image (images/Dockerfile.wide-ep), not in the upstream vLLM image",
            )
        ]
    return []
