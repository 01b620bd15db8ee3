"""The P:D split as a computed recommendation. Pure.

Every split of the stack's prefill and decode nodes into whole instances (each role keeps its
instance shape: EP/DP, nodes per instance), ranked by the agents it serves under the declared
workload. A split serves the fewer of:
- the agents its output capacity feeds (plan/throughput.py: the least of its ceilings, over
  `requestsPerAgentMinute x outputTokens` per agent), and
- the agents its decode HBM holds without preemption: the inverse of the workload check's
  Little's law (plan/workload.py), `held x DECODE_KV_HEADROOM x (t_dec + toolGapSeconds) / t_dec`.
The stack's own split is shown beside the best one; the stacks keep their choice, the table says
which resource binds it. docs/fleet-scale.md "The P:D split".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.plan.throughput import Turn, declared_turn, decode_kv, fleet_throughput, role_shapes
from llmd_fleet.plan.workload import DECODE_KV_HEADROOM, plan_workload

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import FleetPlan
    from llmd_fleet.stack.model import StackConfig

DECODE_KV = "decode HBM contexts"


@dataclass(frozen=True)
class Split:
    """One split of a node group's nodes into prefill and decode instances, and the agents it serves
    by throughput and by decode's KV room."""

    prefill: int
    decode: int
    nodes: int
    output_per_min: float
    limit: str
    """The binding ceiling of the throughput model."""
    agents_by_throughput: float
    agents_by_decode_kv: float

    @property
    def agents(self) -> float:
        """The agents the split serves: the lesser of its two bounds."""
        return min(self.agents_by_throughput, self.agents_by_decode_kv)

    @property
    def binds(self) -> str:
        """What limits the split: decode's KV room, or the throughput model's binding ceiling."""
        return DECODE_KV if self.agents_by_decode_kv < self.agents_by_throughput else self.limit

    @property
    def label(self) -> str:
        """`<prefill>P:<decode>D`, in instances."""
        return f"{self.prefill}P:{self.decode}D"


@dataclass(frozen=True)
class SplitPlan:
    """The splits one node group allows, ranked, beside the stack's own (`llmd-fleet plan`)."""

    node_group: str
    nodes: int
    prefill_nodes_per_instance: int
    decode_nodes_per_instance: int
    turn: Turn
    stack: Split
    ranked: tuple[Split, ...]
    """Every maximal split (no further instance of either role fits), most agents first."""

    @property
    def best(self) -> Split:
        """The split that serves the most agents."""
        return self.ranked[0]


def splits(budget: int, prefill_nodes: int, decode_nodes: int) -> list[tuple[int, int]]:
    """(prefill, decode) instance counts, each at least 1, whose nodes fit `budget` and leave too
    few nodes for another instance of either role."""
    out = []
    for p in range(1, budget // prefill_nodes + 1):
        for d in range(1, (budget - p * prefill_nodes) // decode_nodes + 1):
            spare = budget - p * prefill_nodes - d * decode_nodes
            if spare < min(prefill_nodes, decode_nodes):
                out.append((p, d))
    return out


def plan_splits(config: StackConfig, plan: FleetPlan, cache_hit: float | None = None) -> SplitPlan | None:
    """The ranked splits, or None when the throughput model cannot size the stack or the two
    roles run on different node groups (their nodes are not interchangeable)."""
    shapes = role_shapes(config, plan)
    turn = declared_turn(config, plan, cache_hit)
    wp = plan_workload(config, plan)
    sizing = plan.model
    if shapes is None or turn is None or wp is None or sizing is None:
        return None
    if sizing.kv is None or sizing.description is None:
        return None
    prefill_role, decode_role = plan.role("prefill"), plan.role("decode")
    if prefill_role.node_group != decode_role.node_group:
        return None
    prefill, decode = shapes
    description = sizing.description
    kv = decode_kv(config, description)
    w = config.workload
    np_, nd = prefill_role.nodes_per_instance, decode_role.nodes_per_instance
    budget = prefill.instances * np_ + decode.instances * nd
    per_agent_output = w.requests_per_agent_minute * w.output_tokens
    turn_seconds = wp.decode_seconds + w.tool_gap_seconds
    held_per_instance = wp.decode_contexts_held / decode.instances

    def split(p: int, d: int) -> Split:
        t = fleet_throughput(
            dataclasses.replace(prefill, instances=p),
            dataclasses.replace(decode, instances=d),
            kv,
            description,
            turn,
        )
        out_min = t.output_per_s * 60
        return Split(
            prefill=p,
            decode=d,
            nodes=p * np_ + d * nd,
            output_per_min=out_min,
            limit=t.limit,
            agents_by_throughput=out_min / per_agent_output,
            agents_by_decode_kv=held_per_instance * d * DECODE_KV_HEADROOM * turn_seconds / wp.decode_seconds,
        )

    ranked = sorted(
        (split(p, d) for p, d in splits(budget, np_, nd)),
        key=lambda s: (-s.agents, s.nodes, s.prefill),
    )
    return SplitPlan(
        node_group=prefill_role.node_group,
        nodes=budget,
        prefill_nodes_per_instance=np_,
        decode_nodes_per_instance=nd,
        turn=turn,
        stack=split(prefill.instances, decode.instances),
        ranked=tuple(ranked),
    )


# The hit rates the plan compares splits at: the calibration's assumed one, a range up to the
# declared median prefix reuse (workload.prefixReuse), which bounds what routing can reach.
HIT_RATES = (0.90, 0.95, 0.97, 0.98, 0.99)


@dataclass(frozen=True)
class HitRateRow:
    """The best split and the stack's own at one prefix-cache hit rate (`by_hit_rate`)."""

    cache_hit: float
    best: Split
    stack: Split


def by_hit_rate(
    config: StackConfig, plan: FleetPlan, rates: tuple[float, ...] = HIT_RATES
) -> list[HitRateRow]:
    """The best split and the stack's own at each prefix-cache hit rate (the declared
    `workload.prefixReuse` added as the last row); empty when `plan_splits` is None."""
    rows = []
    for rate in sorted({*rates, config.workload.prefix_reuse}):
        sp = plan_splits(config, plan, rate)
        if sp is None:
            return []
        rows.append(HitRateRow(rate, sp.best, sp.stack))
    return rows


def stack_best_range(config: StackConfig, plan: FleetPlan, step: float = 0.001) -> tuple[float, float] | None:
    """The lowest and highest prefix-cache hit rate, on a grid of `step` from 0.50 to the declared
    prefix reuse, at which the stack's split serves the most agents (ties count); None if none."""
    found: list[float] = []
    rate = 0.50
    while rate <= config.workload.prefix_reuse + 1e-9:
        sp = plan_splits(config, plan, rate)
        if sp is None:
            return None
        if sp.stack.agents >= sp.best.agents:
            found.append(rate)
        rate = round(rate + step, 6)
    return (min(found), max(found)) if found else None
