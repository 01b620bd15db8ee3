"""The canary's surge: the nodes and GPUs a canary revision (`serving.canary`) runs on beside the
stable revision, and whether its node groups have them. Pure.

The canary's roles are the stable roles with the canary's instances: same node group, nodes per
instance, parallelism and pods, so each canary instance needs exactly what a stable instance of
its role needs. Its nodes must be spare: what a group has left once every stable role runs its
most instances (`RolePlan.max_instances`, the autoscaling ceiling included). The stable roles'
own rollout surge (`rollouts_for`) then counts only what the canary leaves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llmd_fleet.core.problems import PROJECT

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import RolePlan
    from llmd_fleet.stack.model import StackConfig


@dataclass(frozen=True)
class CanaryPlan:
    """The canary revision's roles and traffic share."""

    weight: int
    """Percent of the route's requests the canary's pool gets."""
    roles: tuple[RolePlan, ...]
    """The stable role plans with the canary's instances (fixed: no autoscaling, no surge)."""
    spare_nodes: Mapping[str, int]
    """Per node group: nodes left beside the stable roles at their most instances, before the
    canary."""

    @property
    def nodes(self) -> int:
        return sum(r.nodes for r in self.roles)

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.roles)

    def nodes_in(self, group: str) -> int:
        return sum(r.nodes for r in self.roles if r.node_group == group)


def canary_role(role: RolePlan, instances: int) -> RolePlan:
    """`role` with `instances` fixed instances, replaced one at a time on an update."""
    return replace(
        role,
        instances=instances,
        min_instances=instances,
        max_instances=instances,
        autoscaled=False,
        max_surge=0,
        max_unavailable=1,
    )


def plan_canary(
    config: StackConfig, roles: Sequence[RolePlan], spare: Mapping[str, int]
) -> tuple[CanaryPlan | None, list[tuple[str, str]]]:
    """The canary's plan and the refusals of a canary its node groups have no room for (one per
    group short of nodes, naming it)."""
    canary = config.serving.canary
    if canary is None:
        return None, []
    instances = {"prefill": canary.instances.prefill, "decode": canary.instances.decode}
    plan = CanaryPlan(
        weight=canary.weight,
        roles=tuple(canary_role(r, instances[r.name]) for r in roles),
        spare_nodes=dict(spare),
    )
    problems = []
    for group, left in sorted(spare.items()):
        needed = plan.nodes_in(group)
        if needed > left:
            parts = " + ".join(
                f"{r.name} {r.instances}x{r.nodes_per_instance}" for r in plan.roles if r.node_group == group
            )
            problems.append(
                (
                    f"{PROJECT}:serving.canary.instances",
                    f"the canary needs {needed} nodes of node group {group} ({parts}) but the group "
                    f"has {left} spare beside the stable roles "
                    f"(fleet.nodeGroups.{group}.count {config.fleet.node_groups[group].count}); "
                    f"add {needed - left} nodes to the group or run fewer canary instances",
                )
            )
    return plan, problems
