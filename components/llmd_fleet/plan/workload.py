"""The declared workload against the fleet plan: context window, decode contexts, CPU tier, router.
Pure.

Every figure is a formula over the stack config (`llmd-fleet:workload`, the roles, the router)
and the fleet plan (KV tokens per rank, CPU-tier tokens, EPP sizing); docs/fleet-scale.md
"The workload the stack is sized for" derives each one and names its source. The decode time of
an answer comes from plan/throughput.py (the step-time model and its calibration table).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.config.workload import Percentile
from llmd_fleet.core.problems import key
from llmd_fleet.plan.epp import EPP_BASELINE_GIB, EPP_BYTES_PER_TOKEN_PER_RPS, GIB

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import FleetPlan, RolePlan
    from llmd_fleet.stack.model import StackConfig
from llmd_fleet.plan.throughput import decode_answer_seconds, plan_throughput

PERCENTILES: tuple[tuple[Percentile, float], ...] = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))

DECODE_KV_HEADROOM = 0.90
"""Share of the decode ranks' KV tokens the needed contexts may fill before the plan refuses:
contexts grow by an answer while they decode and vary around the median; the rest is slack for
block rounding and a burst. Our choice, not a published figure."""


@dataclass(frozen=True)
class WorkloadPlan:
    """What the declared workload needs from the fleet, and what the fleet holds."""

    served_window: int
    """The longest turn (input + output) every role accepts: min of the roles' maxModelLen and
    the model's window."""
    input_percentiles: tuple[tuple[Percentile, int], ...]
    first_refused: Percentile | None
    """The lowest declared percentile whose turn (input + output) exceeds the served window."""
    refused_share: float
    """Estimated share of turns refused (log-linear CDF between the declared percentiles)."""
    context_tokens: int
    """One agent's context at the median: p50 input + one answer."""
    decode_seconds: float
    """Time to decode one answer (plan/throughput.py decode_answer_seconds)."""
    decode_contexts_needed: float
    """Little's law: agents x decode time / (decode time + tool gap)."""
    decode_contexts_held: float
    """Decode ranks' KV tokens / context tokens (the most instances an autoscaled role runs)."""
    decode_contexts_whole: int
    """The same counting only whole contexts per rank (DP attention keeps a sequence on one rank)."""
    cpu_tier_tokens_needed: int
    """Every agent's context: agents x context tokens."""
    cpu_tier_tokens_held: int
    """The decode ranks' CPU tier, where session affinity keeps an agent's context between turns."""
    requests_per_second: float
    """agents x requests per agent-minute / 60."""
    decode_contexts_at_measured_rate: float
    """Little's law at that (measured, throttled) rate: requests/s x decode time. Below the needed
    figure because the measured turns also waited for prefill and queues; shown, not checked."""
    epp_working_set_gib: float
    """The EPP's working set at that rate (the plan's router formula)."""
    epp_needed_gib: float
    """Working set plus the flow-control queue bound."""
    epp_memory_gib: int


def refused_share(window: float, output: int, percentiles: tuple[tuple[Percentile, int], ...]) -> float:
    """Share of turns whose input + output exceeds `window`: the CDF interpolated linearly in
    log(tokens) between the declared percentiles (an assumption: the trace publishes only three
    points). Below p50 it is reported as at least 50%, above p99 as at most 1%."""
    points = [(q, tokens + output) for (_, q), (_, tokens) in zip(PERCENTILES, percentiles, strict=True)]
    if window < points[0][1]:
        return 1 - points[0][0]
    for (q0, t0), (q1, t1) in itertools.pairwise(points):
        if window < t1:
            covered = q0 + (q1 - q0) * math.log(window / t0) / math.log(t1 / t0)
            return 1 - covered
    return 1 - points[-1][0]


def _decode_capacity(decode: RolePlan, context_tokens: int) -> tuple[float, int, int]:
    ranks = decode.max_instances * decode.data_parallel
    held = ranks * decode.memory.kv_tokens / context_tokens
    whole = ranks * (decode.memory.kv_tokens // context_tokens)
    return held, whole, ranks * decode.memory.cpu_tier_tokens


def plan_workload(config: StackConfig, plan: FleetPlan) -> WorkloadPlan | None:
    """The workload's needs against the plan; None for the simulator (nothing sized from HBM)."""
    if config.serving.engine == "simulator":
        return None
    w = config.workload
    roles = config.serving.roles
    window = min(roles.prefill.max_model_len, roles.decode.max_model_len)
    if plan.model is not None:
        window = min(window, plan.model.context_window)
    percentiles: tuple[tuple[Percentile, int], ...] = (
        ("p50", w.input_tokens_p50),
        ("p90", w.input_tokens_p90),
        ("p99", w.input_tokens_p99),
    )
    first = next((name for name, tokens in percentiles if tokens + w.output_tokens > window), None)
    context = min(w.input_tokens_p50 + w.output_tokens, window)  # a longer turn is refused, not held
    decode_s = decode_answer_seconds(config, plan)
    needed = w.agents * decode_s / (decode_s + w.tool_gap_seconds)
    held, whole, cpu_held = _decode_capacity(plan.role("decode"), context)
    rate = w.agents * w.requests_per_agent_minute / 60
    working = (
        EPP_BASELINE_GIB
        + EPP_BYTES_PER_TOKEN_PER_RPS
        * rate
        * config.router.prompt_tokens(config.workload.input_tokens_p50)
        / GIB
    )
    return WorkloadPlan(
        served_window=window,
        input_percentiles=percentiles,
        first_refused=first,
        refused_share=refused_share(window, w.output_tokens, percentiles),
        context_tokens=context,
        decode_seconds=decode_s,
        decode_contexts_needed=needed,
        decode_contexts_held=held,
        decode_contexts_whole=whole,
        cpu_tier_tokens_needed=w.agents * context,
        cpu_tier_tokens_held=cpu_held,
        requests_per_second=rate,
        decode_contexts_at_measured_rate=rate * decode_s,
        epp_working_set_gib=working,
        epp_needed_gib=working + plan.router.queue_max_bytes / GIB,
        epp_memory_gib=plan.router.memory_gib,
    )


def workload_problems(config: StackConfig, plan: FleetPlan) -> tuple[list[tuple[str, str]], list[str]]:
    """(refusals, warnings) of the declared workload against the plan.

    Refused: a served window below the declared p99 unless `workload.refusedPercentile` names
    the first percentile it drops (and a declared one it does serve); decode contexts needed above
    DECODE_KV_HEADROOM of those held when the CPU tier cannot hold the agents' contexts either
    (then the excess is preempted and recomputed); a CPU tier (when on) that cannot hold every
    agent's context; EPP memory below the working set at the workload's rate plus the queue bound.
    Warned: decode contexts above the headroom while the CPU tier holds them (turns wait for KV
    room and reload from the CPU tier, which needs session affinity); a modelled output capacity
    below the declared demand (plan/throughput.py: calibrated within +-25%, so a warning, not a
    refusal)."""
    wp = plan_workload(config, plan)
    if wp is None:
        return [], []
    w = config.workload
    refusals: list[tuple[str, str]] = []
    warnings: list[str] = []
    declared = w.refused_percentile
    percentile_key = key(config, "workload", "refused_percentile")
    tokens = dict(wp.input_percentiles)
    if wp.first_refused != declared:
        if wp.first_refused is None:
            refusals.append(
                (
                    percentile_key,
                    f"is {declared} but the served window {wp.served_window:,} covers the declared p99 "
                    f"({tokens['p99']:,} input + {w.output_tokens} output); unset it",
                )
            )
        else:
            refusals.append(
                (
                    percentile_key,
                    f"the served window {wp.served_window:,} tokens (serving.roles.*.maxModelLen, the "
                    f"model's window) does not cover the declared {wp.first_refused} "
                    f"({tokens[wp.first_refused]:,} input + {w.output_tokens} output): about "
                    f"{wp.refused_share:.0%} of turns would be refused. Declare "
                    f"`refusedPercentile: {wp.first_refused}` or serve a longer window",
                )
            )
    decode_room = wp.decode_contexts_held * DECODE_KV_HEADROOM
    cpu_on = config.serving.kv_tier.cpu_offload and wp.cpu_tier_tokens_held > 0
    cpu_fits = cpu_on and wp.cpu_tier_tokens_needed <= wp.cpu_tier_tokens_held
    if wp.decode_contexts_needed > decode_room:
        what = (
            f"{w.agents:,} agents need {wp.decode_contexts_needed:,.0f} concurrent decode contexts of "
            f"{wp.context_tokens:,} tokens (Little's law: {wp.decode_seconds:.2f} s decoding per "
            f"{wp.decode_seconds + w.tool_gap_seconds:.2f} s turn) but the decode ranks hold "
            f"{wp.decode_contexts_held:,.0f} ({DECODE_KV_HEADROOM:.0%}: {decode_room:,.0f})"
        )
        if cpu_fits:
            warnings.append(
                f"{what}; the excess waits for KV room and reloads its context from the CPU tier, "
                "which holds every agent's context only while session affinity keeps each agent on "
                "its decode rank"
            )
        else:
            refusals.append(
                (
                    key(config, "workload", "agents"),
                    f"{what}, and no CPU tier holds the rest: the excess is preempted and recomputed",
                )
            )
    if not config.router.session_affinity.enabled and cpu_on:
        warnings.append(
            "router.sessionAffinity is off: an agent's next turn may land on a rank that does not "
            "hold its context, so the CPU tier's capacity below does not protect it"
        )
    if cpu_on and not cpu_fits:
        refusals.append(
            (
                key(config, "serving", "kv_tier", "host_memory_fraction"),
                f"the decode ranks' CPU tier holds {wp.cpu_tier_tokens_held:,} tokens but {w.agents:,} "
                f"agents' contexts need {wp.cpu_tier_tokens_needed:,} ({w.agents:,} x "
                f"{wp.context_tokens:,})",
            )
        )
    capacity = plan_throughput(config, plan)
    if capacity is not None and capacity.headroom < 1:
        t = capacity.throughput
        warnings.append(
            f"the modelled output capacity {capacity.output_per_min / 1e6:,.2f}M tok/min (limit: {t.limit}, "
            f"at {capacity.turn.cache_hit:.0%} prefix-cache hits, plan/throughput.py) is "
            f"{capacity.headroom:.2f}x the declared {capacity.demand_output_per_min / 1e6:,.2f}M "
            f"({w.agents:,} agents x {w.requests_per_agent_minute:g} req/min x {w.output_tokens} tokens): "
            f"about {w.agents * capacity.headroom:,.0f} agents served; the P:D split table shows "
            "what another split or hit rate gives"
        )
    if wp.epp_memory_gib < wp.epp_needed_gib:
        refusals.append(
            (
                key(config, "router", "expected_requests_per_second"),
                f"{config.router.expected_requests_per_second:g} req/s sizes the EPP at "
                f"{wp.epp_memory_gib} GiB, below the {wp.epp_needed_gib:.1f} GiB the workload needs: "
                f"{w.agents:,} agents x {w.requests_per_agent_minute:g} req/min = "
                f"{wp.requests_per_second:.0f} req/s (working set {wp.epp_working_set_gib:.1f} GiB) "
                f"plus the {plan.router.queue_max_bytes / GIB:.1f} GiB flow-control queue bound",
            )
        )
    return refusals, warnings
