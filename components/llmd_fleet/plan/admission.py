"""The endpoint picker's admission and fairness, planned from the fleet: the probabilistic
admitter's shedding curve (`plan_admission`) and program-aware fairness per agent session
(`plan_fairness`); llmd_fleet/layers/router/epp_config.py writes them into its config. Pure."""

import math
from dataclasses import dataclass

# The probabilistic admitter's shedding curve.
#
# Facts (llm-d-router v0.10.0,
# pkg/epp/framework/plugins/requestcontrol/admitter/probabilisticadmitter/plugin.go lines 123-162,
# and its README):
# - a request with priority >= 0 is always admitted; a sheddable one (priority < 0) is rejected
#   with probability `p = min(saturation^power * k, 1)`;
# - saturation is the mean over the candidate endpoints of
#   `max(WaitingQueueSize / queueDepthThreshold, KVCacheUsagePercent / kvCacheUtilThreshold)`
#   (an endpoint without metrics counts 1.0);
# - 100% shedding starts at `saturation = (1/k)^(1/power)`; the defaults `power 5, k 300` put it
#   at about 0.32, where one long agent context per rank already is.
# Flow control's utilization-detector computes the same saturation with the same thresholds
# (pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/detector.go lines
# 119-160), and dispatch holds at saturation >= 1.0 (pkg/epp/framework/interface/flowcontrol/
# plugins.go lines 119-124): that is the gate the admitter must not pre-empt.
#
# The plan's nominal load: every rank endpoint of both roles holds one typical prompt
# (`router.expectedPromptTokens`, at most the role's maxModelLen) in its KV cache, with no queue
# (an agent turn per rank; the fleet is sized for the contexts per rank, docs/fleet-scale.md).
# The curve sheds all sheddable traffic exactly at the gate (k = 1) and is steep enough (power)
# that at nominal load at most `NOMINAL_SHED` of it is shed.


# Saturation thresholds shared by flow control's detector and the probabilistic admitter, so both
# call the pool saturated at the same point: queues building, or KV caches nearly full.
QUEUE_DEPTH_THRESHOLD = 5
KV_CACHE_UTIL_THRESHOLD = 0.85
GATE_SATURATION = 1.0
"""Where flow control's dispatch gate holds (saturation >= 1.0) and the admitter sheds 100%."""
NOMINAL_SHED = 0.001
"""At most one sheddable request in a thousand is shed at the plan's nominal load."""
OVERLOAD = 1.5
"""The load `llmd-fleet plan` also shows the shed probability at (1.5x nominal)."""


@dataclass(frozen=True)
class AdmissionPlan:
    """The admitter's parameters and what they shed."""

    nominal_saturation: float
    """Pool saturation at nominal load (one typical prompt per rank, no queue)."""
    power: float
    k: float
    shed_nominal: float
    """Probability a sheddable request is shed at nominal load."""
    shed_overload: float
    """... at OVERLOAD x nominal load."""

    @property
    def full_shed_saturation(self) -> float:
        """Saturation at which every sheddable request is shed: (1/k)^(1/power)."""
        return float((1 / self.k) ** (1 / self.power))


def shed_probability(saturation: float, power: float, k: float) -> float:
    """The admitter's p = min(saturation^power * k, 1) (plugin.go line 137)."""
    return min(float(saturation**power) * k, 1.0)


def nominal_saturation(ranks: list[tuple[int, int, int]]) -> float:
    """Mean endpoint saturation when every rank holds one typical prompt and no queue; `ranks`
    is (rank endpoints, KV tokens per rank, prompt tokens: at most the role's maxModelLen) per
    role."""
    endpoints = sum(n for n, _, _ in ranks)
    total = sum(n * min(prompt / max(kv, 1), 1.0) / KV_CACHE_UTIL_THRESHOLD for n, kv, prompt in ranks)
    return total / max(endpoints, 1)


def plan_admission(saturation: float) -> AdmissionPlan | None:
    """k and power from the nominal saturation, or None when the nominal load is already at the
    gate (no curve sheds nothing there and everything at the gate)."""
    if not 0 < saturation < GATE_SATURATION:
        return None
    k = 1.0
    power = float(max(1, math.ceil(math.log(NOMINAL_SHED) / math.log(saturation / GATE_SATURATION))))
    return AdmissionPlan(
        nominal_saturation=saturation,
        power=power,
        k=k,
        shed_nominal=shed_probability(saturation, power, k),
        shed_overload=shed_probability(OVERLOAD * saturation, power, k),
    )


# --- Program-aware fairness per agent session.
# Facts (llm-d-router v0.10.0 pkg/epp/framework/plugins/flowcontrol/fairness/program-aware/:
# README.md "Configuration" and "Trade-offs", plugin.go lines 27-66, prometheus.go, strategy_las.go
# lines 180-190): `lasDecayFactor` decays idle programs per Pick, so its half-life follows the pick
# rate; `lasHalfLifeSeconds` > 0 decays on the wall clock instead. A program with no completion
# for `evictionTtlSeconds` is evicted by a sweep every `evictionSweepSeconds` (default 300), its
# series deleted with it; a program with requests in flight is never evicted. Each live program
# has its own queue and two series labelled `program_id`
# (llm_d_epp_program_aware_avg_wait_time_milliseconds, ..._attained_service_tokens).
FAIRNESS_TTL_HALF_LIVES = 5
"""Evict after five half-lives of idleness: the program's service has decayed below 1/32, so
forgetting it changes its rank by almost nothing."""
PROGRAM_SERIES = (
    "llm_d_epp_program_aware_avg_wait_time_milliseconds",
    "llm_d_epp_program_aware_attained_service_tokens",
)
"""The EPP's per-program series (label `program_id`), dropped at scrape."""


@dataclass(frozen=True)
class FairnessPlan:
    """program-aware-fairness parameters and the programs they keep."""

    half_life_seconds: int
    eviction_ttl_seconds: int
    eviction_sweep_seconds: int
    max_programs: int
    """Programs the EPP can hold at the expected rate if every request were a new program (the
    worst case): rate x (TTL + sweep). Agent sessions make several calls each, so fewer."""

    @property
    def max_series(self) -> int:
        """Per-program series in the EPP's /metrics at max_programs."""
        return len(PROGRAM_SERIES) * self.max_programs


def plan_fairness(tool_gap_seconds: int, requests_per_second: float) -> FairnessPlan:
    ttl = FAIRNESS_TTL_HALF_LIVES * tool_gap_seconds
    sweep = tool_gap_seconds
    return FairnessPlan(
        half_life_seconds=tool_gap_seconds,
        eviction_ttl_seconds=ttl,
        eviction_sweep_seconds=sweep,
        max_programs=math.ceil(requests_per_second * (ttl + sweep)),
    )
