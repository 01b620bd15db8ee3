"""Throughput of the fleet from published measurements. Pure.

Every constant the figures depend on is in `CALIBRATION`, with the published figure it comes
from; docs/fleet-scale.md derives each formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.config.stack import StackConfig

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import FleetPlan


@dataclass(frozen=True)
class Constant:
    value: float
    unit: str
    source: str


CALIBRATION: dict[str, Constant] = {
    "decode_step_seconds": Constant(
        0.0191,
        "s per decode step",
        "llm-d's 64 x H200 GLM-5.2 study, 3P1D: ITL p50 19.1 ms, read as the time between streamed "
        "chunks, i.e. one decode step carrying every accepted MTP token (an assumption)",
    ),
    "mtp_tokens_per_step": Constant(
        2.95,
        "tokens per decode step per sequence",
        "llm-d's 64 x H200 GLM-5.2 study: MTP acceptance ~2.95 tokens per step",
    ),
}


def decode_answer_seconds(config: StackConfig, plan: FleetPlan) -> float:
    """Seconds to decode one answer: output tokens / tokens per step x step time."""
    del plan  # the step time is the published one until the step-time model replaces it
    steps = config.workload.output_tokens / CALIBRATION["mtp_tokens_per_step"].value
    return steps * CALIBRATION["decode_step_seconds"].value
