"""The `router` section: endpoint picker mode, prefix routing, flow control, priorities. Pure."""

from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    DNS_LABEL,
    CookieName,
    HttpHeaderName,
    Pattern,
    ServiceUrl,
)


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class PriorityClassConfig(_Model):
    """A traffic class: an InferenceObjective clients select with `x-llm-d-inference-objective`."""

    name: Annotated[str, Pattern(DNS_LABEL), Field(max_length=63)]
    """InferenceObjective name (the header value clients send)."""
    priority: Annotated[int, Field(ge=-1000, le=1000)]
    """Flow-control priority band: higher is served first; negative is sheddable under saturation."""
    max_requests: Annotated[int, Field(ge=1, le=1_000_000)]
    """Most requests this band may queue in the router before new ones are rejected."""


def _default_priority_classes() -> list["PriorityClassConfig"]:
    # Interactive main-agent turns first, their sub-agent bursts next, batch last and sheddable.
    return [
        PriorityClassConfig(name="agent-interactive", priority=100, max_requests=4000),
        PriorityClassConfig(name="agent-subagent", priority=50, max_requests=8000),
        PriorityClassConfig(name="batch", priority=-10, max_requests=2000),
    ]


class SessionAffinityConfig(_Model):
    """Keep a multi-turn agent on the decode endpoint that holds its KV: the
    session-affinity-scorer (`session_id` strategy) keyed by the first of `header`, `cookie` and
    the coding agent's own session header that a request carries (docs/llm-d-1.0.md)."""

    enabled: bool = True
    """Score endpoints by the request's session key (session-affinity-scorer, `session_id` strategy)."""
    header: HttpHeaderName = "x-session-id"
    """Request header carrying a client-chosen session id; the first source of the key."""
    cookie: CookieName | None = None
    """Cookie carrying the session id (read by the router's session-id-producer), tried after
    `header`. Unset by default: no cookie source."""
    agent_identity: bool = True
    """Also key sessions by the coding agent's own session header (the router's agent-identity
    plugin: `x-claude-code-session-id`, `x-session-affinity`, `session-id`, `session_id`), tried
    after `header` and `cookie`. The same identity names the agent's flow for program-aware
    fairness."""
    agent_headers: Annotated[list[HttpHeaderName], Field(max_length=8)] = Field(default_factory=list)
    """Extra agent session headers the agent-identity plugin checks before its built-in ones
    (`additionalSessionHeaders`); none by default, at most 8."""
    token_header: HttpHeaderName | None = "x-session-token"
    """Response header that returns the session token (the serving endpoint, encoded) to the
    client, which echoes it on its next turn: a second session-affinity-scorer with the
    `encoded_endpoint_header` strategy. It needs no router state, so it also survives an EPP
    failover. Default `x-session-token`; unset: nothing is returned."""
    ttl_seconds: Annotated[int, Field(ge=10, le=86400)] = 1800
    """How long a session is remembered after its last request (agents pause in tool calls)."""


class TracingConfig(_Model):
    """OpenTelemetry export of the endpoint picker's traces (the OTEL_* variables of its SDK)."""

    otlp_endpoint: ServiceUrl
    """OTLP gRPC collector, e.g. `http://otel-collector.monitoring.svc:4317`."""
    sampling_ratio: Annotated[float, Field(ge=0, le=1)] = 0.01
    """Fraction of traces kept (parent-based trace-id ratio sampler)."""


class RouterConfig(_Model):
    """The llm-d endpoint picker (EPP) in front of the serving pods."""

    replicas: Annotated[int, Field(ge=1, le=10)] = 2
    """EPP replicas; 2 or more for high availability."""
    mode: Literal["active-passive", "active-active"] = "active-passive"
    """`active-passive`: leader election, one replica routes and the other is a hot standby.
    `active-active`: every replica routes; only valid with precise prefix routing, where each
    replica builds the same index from the engines' KV events."""
    prefix_routing: Literal["precise", "approximate"] = "precise"
    """`precise`: route by the KV blocks engines report over ZMQ; `approximate`: by the router's
    own guess of what each engine cached."""
    pd_decider: Literal["always", "prefix"] | None = None
    """Which requests the router sends to a prefill instance first. `always` (the router's
    always-disagg-pd-decider, as llm-d's wide-EP GLM guide configures it): every request, so a
    decode step carries only decode tokens and decode's token budget and DeepEP buffers stay
    sized for decode. `prefix` (prefix-based-pd-decider): only requests with at least
    `nonCachedTokensForRemotePrefill` prompt tokens not cached on the chosen decode endpoint; the
    rest are prefilled on decode, whose token budget grows by that threshold. Unset: `prefix`
    when `nonCachedTokensForRemotePrefill` is set, else `always`."""
    non_cached_tokens_for_remote_prefill: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] | None = None
    """With `pdDecider: prefix`: prefill remotely only when at least this many prompt tokens are
    not cached on the chosen decode endpoint; smaller remainders are prefilled on decode. Unset:
    16, the router's own P/D configs' value (deploy/config/pd-epp-config.yaml at the pinned tag)."""
    session_affinity: SessionAffinityConfig = Field(default_factory=SessionAffinityConfig)
    """Session affinity for multi-turn agents."""
    flow_control: bool = True
    """Queue and prioritise requests in the router (the `flowControl` feature gate)."""
    fairness: Literal["program-aware", "round-robin", "strict"] = "program-aware"
    """Fairness between flows inside a priority band. A flow is the `x-llm-d-inference-fairness-id`
    header, else the agent identity (with `sessionAffinity.agentIdentity`), so each agent program
    is a flow. `program-aware`: the router's program-aware-fairness policy (least attained
    service in weighted tokens, idle programs decay); `round-robin`; `strict`: global strict."""
    probabilistic_admission: bool = True
    """Shed sheddable (negative-priority) requests before scheduling with a probability that rises
    steeply with the pool's saturation (the router's probabilistic-admitter), with the same
    queue-depth and KV-utilisation thresholds as flow control's saturation detector; non-negative
    priorities are always admitted. The curve is derived by the plan: nothing shed at nominal load
    (one typical prompt per rank), everything at flow control's gate (`llmd-fleet plan` shows
    both). Needs a negative-priority class; refused when nominal load is already at the gate."""
    priority_classes: Annotated[list[PriorityClassConfig], Field(min_length=1)] = Field(
        default_factory=_default_priority_classes
    )
    """Priority bands and the InferenceObjectives that select them."""
    expected_requests_per_second: Annotated[float, Field(gt=0, le=400)] = 127
    """Peak request rate the router must sustain; sizes its CPU (about 0.5 core per req/s, so the
    bound keeps one replica within the largest CPU nodes) and its memory. Default: the 544 x H100
    run's measured 7,612 req/min at 2,500 agents (126.9 req/s); the plan refuses a router whose
    memory does not cover the declared workload's rate (plan/workload.py)."""
    agent_tool_gap_seconds: Annotated[int, Field(ge=5, le=3600)] = 60
    """The longest usual pause between two model calls of one agent session (the agent running a
    tool, p99). Sizes program-aware fairness, where every agent session is a program: attained
    service halves over one gap of idleness (`lasHalfLifeSeconds`), and a program with no
    completion for five gaps, whose service has decayed below 1/32, is forgotten
    (`evictionTtlSeconds`; swept every gap), which bounds the programs and their series."""
    expected_prompt_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] | None = None
    """Typical (median) prompt length in tokens; sizes the router's memory and the flow-control
    byte bounds. Unset: the declared workload's `inputTokensP50` (its default, 195,000, is the
    reference agentic traffic's median input per turn)."""
    memory_gib: Annotated[int, Field(ge=2, le=1024)] | None = None
    """Memory per EPP replica. Unset: derived by the plan from the request rate, the prompt size
    and the flow-control queue bound (`llmd-fleet plan` shows it); an explicit value below the
    derived one is refused."""
    tracing: TracingConfig | None = None
    """Export the EPP's traces over OTLP; unset turns tracing off (`--tracing=false`), since the
    EPP traces by default and with no collector every span is wasted work."""

    def decider(self) -> Literal["always", "prefix"]:
        """The P/D decider the stack runs: as named, else `prefix` when it sets a threshold, else
        `always`."""
        if self.pd_decider is not None:
            return self.pd_decider
        return "prefix" if self.non_cached_tokens_for_remote_prefill is not None else "always"

    def remote_prefill_threshold(self) -> int | None:
        """The prefix decider's threshold (None with the always decider): tokens decode may
        prefill locally, just under this many per request."""
        if self.decider() != "prefix":
            return None
        return self.non_cached_tokens_for_remote_prefill or DEFAULT_NON_CACHED_TOKENS

    def prompt_tokens(self, workload_input_p50: int) -> int:
        """`expectedPromptTokens`, or the workload's median input when unset."""
        return self.expected_prompt_tokens or workload_input_p50


# The prefix decider's threshold when a stack names none: the router's own P/D configs
# (deploy/config/pd-epp-config.yaml and sim-pd-epp-config.yaml at v0.10.0: nonCachedTokens 16).
DEFAULT_NON_CACHED_TOKENS = 16
