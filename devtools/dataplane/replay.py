"""The agentic replay: a deterministic list of requests (pure; seeded), written as JSON lines for
the gateway stand-in.

- agent sessions (interactive band) whose turns grow one shared prefix: the program's system
  prompt, then every earlier turn; each session carries the session header its client sends
  (Claude Code `x-claude-code-session-id`, Codex `session-id`, OpenCode `x-session-affinity`,
  as the router's agent-identity plugin reads them: llm-d-router v0.10.0
  pkg/epp/framework/plugins/requestcontrol/requestheader/agentidentity/agent_identity.go);
- sub-agent bursts: several short sessions started at once from a parent's prefix (sub-agent band);
- batch requests from other programs (batch band);
- an overload phase: a wave of batch requests far beyond what the engines serve at once, while
  interactive sessions keep going.

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
    overload: int
    overload_at_ms: int
    prompt_words: int
    turn_words: int
    max_tokens: int
    batch_words: int = 400
    overload_words: int = 400
    failover_at_ms: int = 0
    """When the leader picker is stopped (after the overload, while sessions go on)."""


SHORT = Shape(
    sessions=8,
    turns=28,
    turn_gap_ms=600,
    bursts=2,
    burst_size=4,
    batch=12,
    overload=300,
    overload_at_ms=2500,
    prompt_words=1500,
    turn_words=120,
    max_tokens=16,
    failover_at_ms=8000,
)
LONG = Shape(
    sessions=24,
    turns=30,
    turn_gap_ms=800,
    bursts=6,
    burst_size=6,
    batch=60,
    overload=400,
    overload_at_ms=5000,
    prompt_words=3000,
    turn_words=200,
    max_tokens=32,
    failover_at_ms=16000,
)


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
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True}
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
    """`bands` maps the roles interactive/subagent/batch to the rendered objectives' names."""
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
    for i in range(shape.overload):
        program = f"batch-{i % 2}"
        out.append(
            _entry(
                f"overload-{i:03d}",
                shape.overload_at_ms + i * 5,
                "overload",
                f"overload-{i:03d}",
                0,
                bands["batch"],
                program,
                {},
                [{"role": "user", "content": _text(rng, shape.overload_words)}],
                model,
                shape.max_tokens * 8,
            )
        )
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
