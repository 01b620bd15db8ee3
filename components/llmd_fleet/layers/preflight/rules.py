"""The preflight's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def preflight_problems(config: StackConfig) -> list[Problem]:
    """The preflight pairs two nodes of the one node group both roles run on."""
    serving = config.serving
    if not serving.preflight.enabled:
        return []
    path = key(config, "serving", "preflight", "enabled")
    if serving.engine == "simulator":
        return [
            Problem(
                path,
                "must be false with engine simulator: the simulator moves no KV over a fabric, so "
                "there is nothing for the NIXL probe to measure (unset, it is off there)",
            )
        ]
    groups = sorted({serving.roles.prefill.node_group, serving.roles.decode.node_group})
    if len(groups) > 1:
        return [
            Problem(
                path,
                f"prefill and decode run on different node groups ({', '.join(groups)}); the preflight "
                "pairs two nodes of one group with one claim shape: set it false",
            )
        ]
    group = config.fleet.node_groups.get(groups[0])
    if group is not None and group.count < 2:
        return [
            Problem(
                path, f"node group {groups[0]} has {group.count} node; the preflight needs two: set it false"
            )
        ]
    return []
