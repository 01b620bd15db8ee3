"""The `workload` section: the agentic traffic the stack is sized for. Pure.

Defaults are llm-d's published GLM-5.2 agentic study and 544 x H100 run (issue #31), except the
tool-loop gap, which no published figure gives: it is the repository's own benchmark shape
(llmd_fleet/cli/bench/workload.py TOOL_LATENCY_MEAN_S). docs/fleet-scale.md names the source of
every default and the rules that check the stack against it (plan/workload.py).
"""

from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel

Percentile = Literal["p50", "p90", "p99"]


class WorkloadConfig(ConfigModel):
    """What the fleet must serve: concurrent agents and the shape of their turns."""

    agents: Annotated[int, Field(ge=1, le=1_000_000)] = 3_000
    """Concurrent agents (published: the 544 x H100 run's 3,000 agents)."""
    input_tokens_p50: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 195_000
    """Median main-agent input tokens per turn (published: llm-d's GLM-5.2 agentic trace)."""
    input_tokens_p90: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 521_000
    """90th-percentile input tokens per turn (published, same trace)."""
    input_tokens_p99: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 849_000
    """99th-percentile input tokens per turn (published, same trace)."""
    output_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 317
    """Output tokens per answer (published, same trace)."""
    growth_tokens_per_turn: Annotated[int, Field(ge=0, le=1_000_000)] = 632
    """Tokens a turn adds to the agent's context (published, same trace: ~632)."""
    prefix_reuse: Annotated[float, Field(ge=0, le=1)] = 0.996
    """Share of a turn's input that repeats the previous turn's (published: median 99.6%)."""
    tool_gap_seconds: Annotated[float, Field(ge=0, le=3600)] = 2.0
    """Seconds an agent spends in a tool between its answer and its next turn, holding no GPU.
    Assumed: no published figure; the mean tool latency of the repository's benchmark
    (llmd_fleet/cli/bench/workload.py TOOL_LATENCY_MEAN_S)."""
    requests_per_agent_minute: Annotated[float, Field(gt=0, le=600)] = 3.045
    """Requests each agent sends per minute under load, which sizes the router. Measured: the
    544 x H100 run's 7,612 req/min at 2,500 agents (7,612 / 2,500)."""
    refused_percentile: Percentile | None = None
    """The lowest input percentile the served window (`serving.roles.*.maxModelLen`) does not
    cover, declared by a stack that refuses those turns; unset: the window must cover p99."""
