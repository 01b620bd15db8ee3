"""The router's plan: how big the endpoint picker's prefix index, flow-control bounds and memory
must be for the fleet's ranks and expected traffic (used by plan/fleet.py). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.plan.admission import (
    AdmissionPlan,
    FairnessPlan,
    nominal_saturation,
    plan_admission,
    plan_fairness,
)
from llmd_fleet.plan.epp import EPP_BASELINE_GIB, EPP_BYTES_PER_TOKEN_PER_RPS, GIB

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import RolePlan
    from llmd_fleet.stack.model import StackConfig

# Bytes a prompt token takes in a request body (UTF-8 text of code and prose is ~4 characters per
# token for GLM-class tokenizers); the flow-control byte bounds count request bodies.
PROMPT_BYTES_PER_TOKEN = 4
# The EPP's working set per request/s per prompt token and its baseline: plan/epp.py.
# Headroom on top of the working set and the queue bound before the limit (allocator slack, GC).
EPP_MEMORY_HEADROOM = 1.25
# Headroom on the precise index's holders per block key (speculative entries, churn).
INDEX_HOLDER_HEADROOM = 1.25


@dataclass(frozen=True)
class RouterPlan:
    """Sizes of the endpoint picker derived from the fleet and its expected traffic."""

    endpoints: int
    """Rank endpoints that can hold a block: every DP rank of every instance of both roles."""
    tiers: int
    """Places a rank can hold a block that the engines report (HBM, plus the CPU tier when on)."""
    index_holders: int
    """The precise index's holders per block key (`podCacheSize`): at least endpoints x tiers,
    with headroom, or a popular prefix (every subagent shares the repository prefix) silently
    loses its holders and affinity drops to zero."""
    prompt_bytes: int
    """Bytes of one typical request body (expected prompt tokens x PROMPT_BYTES_PER_TOKEN)."""
    band_max_bytes: tuple[tuple[int, int], ...]
    """(priority, maxBytes) of each flow-control band: its maxRequests typical bodies."""
    queue_max_bytes: int
    """Global flow-control `maxBytes`: the sum of the bands' bounds."""
    working_set_gib: float
    """Memory the EPP needs to route at the expected rate (baseline plus traffic)."""
    memory_gib: int
    """Memory request and limit per EPP replica: working set plus the queue bound, with headroom."""
    nominal_saturation: float = 0.0
    """Pool saturation at nominal load: one typical prompt in every rank's KV cache, no queue
    (llmd_fleet/plan/admission.py)."""
    admission: AdmissionPlan | None = None
    """The probabilistic admitter's curve (None when the nominal load is already at the gate)."""
    fairness: FairnessPlan | None = None
    """program-aware-fairness's decay and eviction (None with another fairness policy or without
    flow control)."""


def plan_router(config: StackConfig, roles: tuple[RolePlan, ...]) -> RouterPlan:
    """The endpoint pickers' and tokenizers' sizing, for the most instances the roles can run
    (autoscaled roles at their maximum)."""
    router = config.router
    # Sized for the most instances the roles can run (autoscaled roles grow to their maximum).
    endpoints = sum(r.max_instances * r.data_parallel for r in roles)
    cpu_tier = config.serving.kv_tier.cpu_offload and any(r.memory.cpu_tier_tokens > 0 for r in roles)
    tiers = 2 if cpu_tier else 1
    holders = math.ceil(endpoints * tiers * INDEX_HOLDER_HEADROOM)
    prompt_tokens = router.prompt_tokens(config.workload.input_tokens_p50)
    prompt_bytes = prompt_tokens * PROMPT_BYTES_PER_TOKEN
    bands = tuple((c.priority, c.max_requests * prompt_bytes) for c in router.priority_classes)
    queue_bytes = sum(b for _, b in bands) if router.flow_control else 0
    working = (
        EPP_BASELINE_GIB
        + EPP_BYTES_PER_TOKEN_PER_RPS * router.expected_requests_per_second * prompt_tokens / GIB
    )
    memory = math.ceil((working + queue_bytes / GIB) * EPP_MEMORY_HEADROOM)
    # The instances the roles run (an autoscaled role's start, its minimum), not their maxima:
    # saturation is a mean over the endpoints, and each rank holds one typical prompt (no longer
    # than the role's maxModelLen).
    saturation = nominal_saturation(
        [
            (
                r.instances * r.data_parallel,
                r.memory.kv_tokens,
                min(prompt_tokens, getattr(config.serving.roles, r.name).max_model_len),
            )
            for r in roles
        ]
    )
    return RouterPlan(
        endpoints=endpoints,
        tiers=tiers,
        index_holders=holders,
        prompt_bytes=prompt_bytes,
        band_max_bytes=bands,
        queue_max_bytes=queue_bytes,
        working_set_gib=round(working, 1),
        memory_gib=memory,
        nominal_saturation=saturation,
        admission=plan_admission(saturation) if router.probabilistic_admission else None,
        fairness=(
            plan_fairness(router.agent_tool_gap_seconds, router.expected_requests_per_second)
            if router.flow_control and router.fairness == "program-aware"
            else None
        ),
    )
