"""The agentic replay: a deterministic list of requests (pure; seeded), written as JSON lines for
the gateway stand-in.

- agent sessions (interactive band) whose turns grow one shared prefix: the program's system
  prompt, then every earlier turn; each session carries the session header its client sends
  (Claude Code `x-claude-code-session-id`, Codex `session-id`, OpenCode `x-session-affinity`,
  as the router's agent-identity plugin reads them: llm-d-router v0.10.0
  pkg/epp/framework/plugins/requestcontrol/requestheader/agentidentity/agent_identity.go);
- sub-agent bursts: several short sessions started at once from a parent's prefix (sub-agent band);
- batch requests from other programs (batch band).

Three phases, each replayed and measured on its own (docs/twin.md): the steady replay (hit rate,
TTFT, stickiness, P/D), then the overload (a flood of batch requests sized from the rendered
saturation thresholds, see `flood`, while interactive sessions and a sub-agent burst go on: flow
control), then the failover replay (agent sessions while the leader picker is stopped).

Bands are the rendered InferenceObjectives, named by `x-llm-d-inference-objective`; programs by
the fairness header `x-llm-d-inference-fairness-id` (pkg/epp/metadata/consts.go).
"""

import json
import random
from dataclasses import dataclass, replace
from typing import Any

OBJECTIVE_HEADER = "x-llm-d-inference-objective"
FAIRNESS_HEADER = "x-llm-d-inference-fairness-id"
CLIENTS = {
    "claude-code": "x-claude-code-session-id",
    "codex": "session-id",
    "opencode": "x-session-affinity",
}
WORDS = [
    "repository",
    "function",
    "test",
    "module",
    "build",
    "config",
    "router",
    "engine",
    "prefill",
    "decode",
    "cache",
    "token",
    "session",
    "agent",
    "tool",
    "patch",
    "diff",
    "review",
    "deploy",
    "cluster",
    "node",
    "pod",
    "scheduler",
    "metric",
    "latency",
]


@dataclass(frozen=True)
class Shape:
    sessions: int
    turns: int
    turn_gap_ms: int
    bursts: int
    burst_size: int
    batch: int
    prompt_words: int
    turn_words: int
    max_tokens: int
    batch_words: int = 400
    overload_words: int = 400
    overload_sessions: int = 4
    overload_turns: int = 8
    failover_sessions: int = 6
    failover_turns: int = 16
    failover_gap_ms: int = 500
    failover_at_ms: int = 1500
    """When, in the failover replay, the leader picker is stopped."""


SHORT = Shape(
    sessions=8,
    turns=28,
    turn_gap_ms=600,
    # A burst from every session: the new sessions' hit rate (report.new_session_requests) is
    # over 5 new sessions and these 32 sub-agents, enough requests that chance placement (the
    # baseline's, or a config whose prefix routing sees nothing) does not come near the rendered
    # config's by luck.
    bursts=8,
    burst_size=4,
    batch=12,
    prompt_words=1500,
    turn_words=120,
    max_tokens=16,
)
LONG = Shape(
    sessions=24,
    turns=30,
    turn_gap_ms=800,
    bursts=6,
    burst_size=6,
    batch=60,
    prompt_words=3000,
    turn_words=200,
    max_tokens=32,
    overload_sessions=8,
    overload_turns=12,
    failover_turns=30,
)


@dataclass(frozen=True)
class Flood:
    """The overload's batch wave: `count` requests over `spread_ms`, each decoding `max_tokens`."""

    count: int
    spread_ms: int
    max_tokens: int


def flood(decode_seqs: int, saturating_waiting: int, itl_ms: float, spread_ms: int = 1000) -> Flood:
    """The batch wave from the rendered thresholds: the decode ranks run `decode_seqs` requests at
    once and the saturation detector reads 1.0 (every band's dispatch gate) once
    `saturating_waiting` more wait in the engines' queues. Twice their sum arrives within
    `spread_ms`, and each request decodes for six times that long (`ignore_eos`: the simulator
    then decodes all of `max_tokens` instead of a random length), so the first half of the wave
    is still in the engines when the picker has dispatched it even at a sixth of the arrival
    rate: the pool saturates whatever the picker's speed, and what it cannot hold is the
    sheddable band's to yield (held by flow control, rejected by the admitter)."""
    count = 2 * (decode_seqs + saturating_waiting)
    max_tokens = max(16, round(6 * spread_ms / itl_ms)) if itl_ms > 0 else 256
    return Flood(count, spread_ms, max_tokens)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _entry(
    id_: str,
    at_ms: int,
    phase: str,
    session: str,
    turn: int,
    band: str,
    program: str,
    headers: dict[str, str],
    messages: list[dict[str, str]],
    model: str,
    max_tokens: int,
) -> dict[str, Any]:
    # include_usage: the engine's last event carries its usage, with the prompt tokens it found
    # in its prefix cache (usage.prompt_tokens_details.cached_tokens), which the gateway stand-in
    # records per request (llm-d-inference-sim v0.10.2 pkg/api/response.go, Usage).
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return {
        "id": id_,
        "at_ms": at_ms,
        "phase": phase,
        "session": session,
        "turn": turn,
        "band": band,
        "program": program,
        "headers": {OBJECTIVE_HEADER: band, FAIRNESS_HEADER: program, **headers},
        "body": body,
    }


def generate(shape: Shape, model: str, bands: dict[str, str], seed: int = 7) -> list[dict[str, Any]]:
    """The steady replay. `bands` maps the roles interactive/subagent/batch to the rendered
    objectives' names."""
    rng = random.Random(seed)
    programs = [f"program-{i}" for i in range(3)]
    systems = {p: _text(rng, shape.prompt_words) for p in programs}
    out: list[dict[str, Any]] = []
    clients = list(CLIENTS)
    for s in range(shape.sessions):
        program = programs[s % len(programs)]
        client = clients[s % len(clients)]
        session = f"{client}-{s:03d}"
        messages = [{"role": "system", "content": systems[program]}]
        start = s * 150
        for turn in range(shape.turns):
            messages = [*messages, {"role": "user", "content": _text(rng, shape.turn_words)}]
            out.append(
                _entry(
                    f"{session}-t{turn}",
                    start + turn * shape.turn_gap_ms,
                    "agent",
                    session,
                    turn,
                    bands["interactive"],
                    program,
                    {CLIENTS[client]: session},
                    messages,
                    model,
                    shape.max_tokens,
                )
            )
            messages = [*messages, {"role": "assistant", "content": _text(rng, shape.max_tokens)}]
            if turn == 2 and s < shape.bursts:
                for b in range(shape.burst_size):
                    sub = f"{session}-sub{b}"
                    task = [*messages, {"role": "user", "content": f"sub-task {b}: " + _text(rng, 40)}]
                    out.append(
                        _entry(
                            f"{sub}-t0",
                            start + turn * shape.turn_gap_ms + 50,
                            "subagent",
                            sub,
                            0,
                            bands["subagent"],
                            program,
                            {CLIENTS[client]: sub},
                            task,
                            model,
                            shape.max_tokens,
                        )
                    )
    for i in range(shape.batch):
        program = f"batch-{i % 2}"
        out.append(
            _entry(
                f"batch-{i:03d}",
                200 + i * 300,
                "batch",
                f"batch-{i:03d}",
                0,
                bands["batch"],
                program,
                {},
                [{"role": "user", "content": _text(rng, shape.batch_words)}],
                model,
                shape.max_tokens,
            )
        )
    return sorted(out, key=lambda e: (e["at_ms"], e["id"]))


def overload(
    shape: Shape, wave: Flood, model: str, bands: dict[str, str], seed: int = 11
) -> list[dict[str, Any]]:
    """The overload replay: the batch wave from t=0 (two batch programs), interactive agent
    sessions of their own starting as it lands (one turn a second, growing their prefix) and a
    sub-agent burst, all meeting the saturated pool."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(wave.count):
        out.append(
            _entry(
                f"overload-{i:03d}",
                i * wave.spread_ms // wave.count,
                "overload",
                f"overload-{i:03d}",
                0,
                bands["batch"],
                f"batch-{i % 2}",
                {},
                [{"role": "user", "content": _text(rng, shape.overload_words)}],
                model,
                wave.max_tokens,
            )
        )
        out[-1]["body"]["ignore_eos"] = True
    clients = list(CLIENTS)
    for s in range(shape.overload_sessions):
        program = f"program-{s % 3}"
        client = clients[s % len(clients)]
        session = f"{client}-busy-{s:03d}"
        messages = [{"role": "system", "content": _text(rng, shape.turn_words * 2)}]
        for turn in range(shape.overload_turns):
            messages = [*messages, {"role": "user", "content": _text(rng, shape.turn_words // 2)}]
            out.append(
                _entry(
                    f"{session}-t{turn}",
                    wave.spread_ms // 2 + s * 100 + turn * 1000,
                    "agent",
                    session,
                    turn,
                    bands["interactive"],
                    program,
                    {CLIENTS[client]: session},
                    messages,
                    model,
                    shape.max_tokens,
                )
            )
            messages = [*messages, {"role": "assistant", "content": _text(rng, shape.max_tokens)}]
    for b in range(3):
        sub = f"busy-sub{b}"
        out.append(
            _entry(
                f"{sub}-t0",
                wave.spread_ms + 50 * b,
                "subagent",
                sub,
                0,
                bands["subagent"],
                "program-0",
                {CLIENTS["claude-code"]: sub},
                [{"role": "user", "content": f"sub-task {b}: " + _text(rng, 40)}],
                model,
                shape.max_tokens,
            )
        )
    return sorted(out, key=lambda e: (e["at_ms"], e["id"]))


def failover(shape: Shape, model: str, bands: dict[str, str], seed: int = 13) -> list[dict[str, Any]]:
    """The failover replay: agent sessions taking a turn every `failover_gap_ms`, before and after
    the leader picker is stopped at `failover_at_ms`."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    clients = list(CLIENTS)
    for s in range(shape.failover_sessions):
        client = clients[s % len(clients)]
        session = f"{client}-fo-{s:03d}"
        messages = [{"role": "system", "content": _text(rng, shape.turn_words * 2)}]
        for turn in range(shape.failover_turns):
            messages = [*messages, {"role": "user", "content": _text(rng, shape.turn_words // 2)}]
            out.append(
                _entry(
                    f"{session}-t{turn}",
                    s * shape.failover_gap_ms // shape.failover_sessions + turn * shape.failover_gap_ms,
                    "agent",
                    session,
                    turn,
                    bands["interactive"],
                    f"program-{s % 3}",
                    {CLIENTS[client]: session},
                    messages,
                    model,
                    shape.max_tokens,
                )
            )
            messages = [*messages, {"role": "assistant", "content": _text(rng, shape.max_tokens)}]
    return sorted(out, key=lambda e: (e["at_ms"], e["id"]))


def fit(shape: Shape, non_cached_tokens: int | None) -> Shape:
    """The replay's lengths against the rendered P/D decider's threshold (a word of the replay
    is one token of the simulator's dummy tokenizer, give or take separators): a batch
    document is twice the threshold, so it is prefilled on a prefill endpoint; what a later
    agent turn adds is a quarter of it (plus the previous answer), so a turn whose prefix is
    cached stays on decode; the shared system prompt is above it, so a session's first turn
    on an endpoint without its program's prefix is disaggregated."""
    if not non_cached_tokens:
        return shape
    return replace(
        shape,
        batch_words=2 * non_cached_tokens,
        turn_words=min(shape.turn_words, non_cached_tokens // 4),
        prompt_words=max(shape.prompt_words, 2 * non_cached_tokens),
    )


def bands_of(objectives: list[dict[str, Any]]) -> dict[str, str]:
    """interactive/subagent/batch from the rendered InferenceObjectives, by priority."""
    ranked = sorted(objectives, key=lambda o: -int(o["spec"].get("priority", 0)))
    names = [o["metadata"]["name"] for o in ranked]
    if len(names) < 3:
        raise ValueError(f"the replay needs three objectives (bands), the rendering has {names}")
    return {"interactive": names[0], "subagent": names[1], "batch": names[-1]}


def write(entries: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
