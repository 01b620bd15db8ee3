"""Run the router checker on every rendered EndpointPickerConfig.

    python -m devtools.router_check [STACK...]     (render first; `make check-router`)

For each stack it reads the EPP config ConfigMap under build/<stack>/manifests and hands it to the
checker binary (build.py), which runs the pinned router's own code:

1. the config loader's `LoadRawConfig`: strict decoding of the whole file at its apiVersion, and
   the feature gates;
2. the factories of the llm-d 1.0 plugins the file declares (agent-identity, session-id-producer,
   session-affinity-scorer, probabilistic-admitter, program-aware-fairness), each decoding its
   parameters strictly;
3. the session path on sample multi-turn conversations carrying the coding agents' real session
   headers: agent-identity's RequestHeader, the producers, each session scorer's Score,
   PreRequest (binding) and ResponseHeader (the returned token);
4. with a disaggregatedset-rollout-screener, a DisaggregatedSet rollout step by step (`ROLLOUT`:
   the pods of revisions A and B as the controller labels them, Ready or not) fed to the
   screener's own pod-notification extractor, and its Screen on `ROLLOUT_REQUESTS` requests per
   step: no request may see two revisions, a step where no revision has every role Ready fails
   closed, and a step where both have serves both.

A stack passes when the loader accepts the file, every such plugin builds, in every
conversation that carries a session key each later turn is scored to the endpoint its first turn
was routed to while a new conversation starts unbound, and the rollout screener (on every P/D
stack) never lets a request pair revisions. Stack files and the checker's output
are the only inputs; no cluster is needed.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devtools.router_check.build import BuildError, SourceMissing, ensure, router_tag
from llmd_fleet.cli.stack_file import stack_names
from llmd_fleet.layers.router.epp_config import SESSION_SCORER, SESSION_TOKEN_SCORER

# Session ids in the shapes each agent sends them: Claude Code a UUID, Codex a UUIDv7, OpenCode a
# `ses_` id. Every turn of a conversation repeats its agent's header, as the agents do.
AGENT_CONVERSATIONS: dict[str, dict[str, str]] = {
    "claude-code": {"x-claude-code-session-id": "7f2c9b1e-3d4a-4c8e-9b21-5a6f0e8d1c42"},
    "codex": {"session-id": "019a3c1e-7b52-7d10-a3f4-2e9c8b6d5a01"},
    "codex-legacy": {"session_id": "019a3c1e-7b52-7d10-a3f4-2e9c8b6d5a02"},
    "opencode": {"x-session-affinity": "ses_4b1f9c2a7e3dq8Zk"},
}
TURNS = 4
ROLLOUT_REQUESTS = 200
# A rollout of a set with one prefill and one decode instance, as the DisaggregatedSet controller
# plans it (LWS v0.10.0 hack/plan-steps for 1P1D): old and new revisions' pods by step, with
# whether each is Ready. Each entry: step name, [(pod, role, revision, ready)], and what the
# screener must do (the revisions that may serve; empty: fail closed).
ROLLOUT: list[tuple[str, list[tuple[str, str, str, bool]], set[str]]] = [
    ("steady", [("p-a", "prefill", "a", True), ("d-a", "decode", "a", True)], {"a"}),
    (
        "new decode loading",
        [("p-a", "prefill", "a", True), ("d-a", "decode", "a", True), ("d-b", "decode", "b", False)],
        {"a"},
    ),
    ("old decode gone", [("p-a", "prefill", "a", True), ("d-b", "decode", "b", True)], set()),
    (
        "both covered",
        [
            ("p-a", "prefill", "a", True),
            ("d-a", "decode", "a", True),
            ("p-b", "prefill", "b", True),
            ("d-b", "decode", "b", True),
        ],
        {"a", "b"},
    ),
    ("new only", [("p-b", "prefill", "b", True), ("d-b", "decode", "b", True)], {"b"}),
]


@dataclass(frozen=True)
class Conversation:
    name: str
    headers: dict[str, str]
    keyed: bool
    """Whether the rendered config makes these headers a session key."""


def rendered_epp_configs(manifests: Path) -> list[tuple[str, dict[str, Any]]]:
    """(text, parsed) of every EndpointPickerConfig among the rendered ConfigMaps: one per pool
    (several with `llmd-fleet:models`)."""
    found = []
    for path in sorted(manifests.rglob("configmap-*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        for text in (document.get("data") or {}).values():
            try:
                parsed = yaml.safe_load(text) if isinstance(text, str) else None
            except yaml.YAMLError:  # a script or a dashboard's JSON that is no YAML document
                continue
            if isinstance(parsed, dict) and parsed.get("kind") == "EndpointPickerConfig":
                found.append((text, parsed))
    return found


def rendered_epp_config(manifests: Path) -> tuple[str, dict[str, Any]] | None:
    """The first EndpointPickerConfig among the rendered ConfigMaps, if any."""
    found = rendered_epp_configs(manifests)
    return found[0] if found else None


def conversations(config: dict[str, Any]) -> list[Conversation]:
    """The sample conversations for a config: every agent's, one per configured header source and
    cookie, and one without any session key."""
    plugins = {p.get("name") or p["type"]: p for p in config.get("plugins") or []}
    scorer = plugins.get(SESSION_SCORER, {})
    sources = ((scorer.get("parameters") or {}).get("sessionIdConfig") or {}).get("sources") or []
    agent_keyed = any(s.get("attribute") == "agent-identity" for s in sources) and any(
        p["type"] == "agent-identity" for p in plugins.values()
    )
    out = [Conversation(name, headers, agent_keyed) for name, headers in AGENT_CONVERSATIONS.items()]
    for source in sources:
        if "header" in source:
            out.append(Conversation(f"header-{source['header']}", {source["header"]: "chat-42"}, True))
    cookie_producers = [p for p in plugins.values() if p["type"] == "session-id-producer"]
    for producer in cookie_producers:
        cookie = (producer.get("parameters") or {}).get("cookieName")
        if cookie:
            out.append(Conversation(f"cookie-{cookie}", {"cookie": f"theme=dark; {cookie}=sess-77"}, True))
    out.append(Conversation("no-session", {}, False))
    return out


def screener_scope(config: dict[str, Any]) -> dict[str, str] | None:
    """The pod labels the rendered rollout screener's scope selects (`key=value[,...]`), None
    without a screener."""
    for plugin in config.get("plugins") or []:
        if plugin.get("type") == "disaggregatedset-rollout-screener":
            selector = ((plugin.get("parameters") or {}).get("scope") or {}).get("labelSelector", "")
            return dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
    return None


def rollout_input(scope: dict[str, str]) -> list[dict[str, Any]]:
    """`ROLLOUT` as the checker's pods, labelled as the DisaggregatedSet controller labels them."""
    return [
        {
            "name": name,
            "pods": [
                {
                    "name": pod,
                    "ready": ready,
                    "labels": {
                        **scope,
                        "disaggregatedset.x-k8s.io/role": role,
                        "disaggregatedset.x-k8s.io/revision": revision,
                    },
                }
                for pod, role, revision, ready in pods
            ],
        }
        for name, pods, _ in ROLLOUT
    ]


def checker_input(
    text: str, convs: list[Conversation], scope: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "config": text,
        "conversations": [{"name": c.name, "turns": [{"headers": c.headers}] * TURNS} for c in convs],
        "rollout": rollout_input(scope) if scope is not None else [],
        "requests": ROLLOUT_REQUESTS,
    }


def rollout_problems(stack: str, result: dict[str, Any]) -> list[str]:
    """What the screener did against what `ROLLOUT` requires of each step."""
    steps = result.get("rollout") or []
    if len(steps) != len(ROLLOUT):
        return [f"{stack}: rollout screener: {len(steps)} rollout steps checked, expected {len(ROLLOUT)}"]
    problems = []
    for step, (name, _, allowed) in zip(steps, ROLLOUT, strict=True):
        served = {rev for rev, count in (step.get("revisions") or {}).items() if count}
        if step.get("mixed"):
            problems.append(f"{stack}: rollout screener: {name}: {step['mixed']} requests saw two revisions")
        if not allowed and step.get("failClosed") != ROLLOUT_REQUESTS:
            problems.append(
                f"{stack}: rollout screener: {name}: no revision has every role, but it did not fail closed"
            )
        if allowed and (step.get("failClosed") or served != allowed):
            problems.append(
                f"{stack}: rollout screener: {name}: served revisions {sorted(served)} "
                f"({step.get('failClosed')} failed closed), expected {sorted(allowed)}"
            )
    return problems


def evaluate(
    stack: str, config: dict[str, Any], convs: list[Conversation], result: dict[str, Any]
) -> list[str]:
    """Problems in the checker's result for one stack ([] when it passes)."""
    if result.get("loaderError"):
        return [f"{stack}: the router's config loader refuses the config: {result['loaderError']}"]
    problems: list[str] = []
    if result.get("apiVersion") != config.get("apiVersion"):
        problems.append(
            f"{stack}: loaded apiVersion {result.get('apiVersion')!r}, rendered {config.get('apiVersion')!r}"
        )
    for plugin in result.get("plugins") or []:
        if plugin.get("error"):
            problems.append(f"{stack}: plugin {plugin['name']} ({plugin['type']}): {plugin['error']}")
    built = {p["name"] for p in result.get("plugins") or [] if not p.get("error")}
    if screener_scope(config) is not None:
        problems += rollout_problems(stack, result)
    session_on = SESSION_SCORER in built
    token_on = SESSION_TOKEN_SCORER in built
    for conv in convs:
        turns = result.get("conversations", {}).get(conv.name) or []
        if len(turns) != TURNS:
            problems.append(f"{stack}: {conv.name}: {len(turns)} turns checked, expected {TURNS}")
            continue
        first = turns[0]
        if session_on and first["preferred"].get(SESSION_SCORER):
            problems.append(f"{stack}: {conv.name}: a new conversation is already bound")
        if token_on and not first["responseHeaders"]:
            problems.append(f"{stack}: {conv.name}: no session token returned to the client")
        if not (session_on and conv.keyed):
            continue
        later = [t["preferred"].get(SESSION_SCORER, "") for t in turns[1:]]
        if any(e != first["routed"] for e in later):
            problems.append(
                f"{stack}: {conv.name}: turns are not kept on {first['routed']} by the session key "
                f"(session scorer preferred {later})"
            )
    return problems


def without_gating(text: str) -> str:
    """The config with the rollout screener's revision gating off (`mode: disabled`)."""
    config = yaml.safe_load(text)
    for plugin in config.get("plugins") or []:
        if plugin.get("type") == "disaggregatedset-rollout-screener":
            plugin["parameters"]["revisionGating"] = {"mode": "disabled"}
    return str(yaml.safe_dump(config, sort_keys=False))


def negative_control(binary: Path, root: Path, stack: str) -> tuple[str, int]:
    """The rollout check on `stack` with revision gating off must find mixed revisions and a
    step that does not fail closed: a line saying what it found, and how many problems (0 when
    it could not run)."""
    found = rendered_epp_config(root / "build" / stack / "manifests")
    if found is None or (scope := screener_scope(found[1])) is None:
        return f"router check (negative control): {stack}: no rollout screener rendered", 0
    run = subprocess.run(
        [str(binary)],
        input=json.dumps(checker_input(without_gating(found[0]), [], scope)),
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        return f"router check (negative control): {stack}: the checker failed (exit {run.returncode})", 0
    problems = rollout_problems(stack, json.loads(run.stdout))
    return (
        f"router check (negative control): {stack} with revision gating disabled: "
        f"{len(problems)} rollout problem(s)",
        len(problems),
    )


def check_stack(binary: Path, root: Path, stack: str) -> tuple[str, list[str]]:
    manifests = root / "build" / stack / "manifests"
    if not manifests.is_dir():
        return "", [f"{stack}: {manifests} is missing: run `llmd-fleet render {stack}` first"]
    found = rendered_epp_configs(manifests)
    if not found:
        return "", [f"{stack}: no EndpointPickerConfig among the rendered ConfigMaps"]
    summaries, problems = [], []
    for text, config in found:
        summary, found_problems = _check_config(binary, stack, text, config)
        summaries.append(summary)
        problems += found_problems
    return "\n".join(s for s in summaries if s), problems


def _check_config(binary: Path, stack: str, text: str, config: dict[str, Any]) -> tuple[str, list[str]]:
    """One EndpointPickerConfig through the checker: its summary line and its problems."""
    convs = conversations(config)
    scope = screener_scope(config)
    run = subprocess.run(
        [str(binary)],
        input=json.dumps(checker_input(text, convs, scope)),
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        return "", [f"{stack}: the checker failed (exit {run.returncode}): {run.stderr.strip()}"]
    result = json.loads(run.stdout)
    keyed = sum(c.keyed for c in convs)
    summary = (
        f"{stack}: {config.get('apiVersion')} loaded; plugins built: "
        f"{', '.join(p['name'] for p in result.get('plugins') or []) or 'none'}; "
        f"{len(convs)} conversations x {TURNS} turns ({keyed} with a session key)"
        + (
            f"; rollout screener: {len(ROLLOUT)} rollout steps x {ROLLOUT_REQUESTS} requests"
            if scope is not None
            else ""
        )
    )
    return summary, evaluate(stack, config, convs, result)


def main(argv: list[str]) -> int:
    root = Path.cwd()
    stacks = argv or stack_names(root / "stacks")
    try:
        binary = ensure()
    except SourceMissing as exc:
        # Without the router's source nothing can be checked; say so plainly, and do not fail
        # the runs (a fresh clone) that cannot have it.
        print(f"router check: not run: {exc}")
        return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"router checker: llm-d-router {router_tag()} ({binary})")
    problems: list[str] = []
    for stack in stacks:
        summary, found = check_stack(binary, root, stack)
        if summary:
            print(summary)
        problems += found
    # The rollout check must be able to fail: the same steps with gating off on one P/D stack.
    control_stack = next((s for s in stacks if s != "local-sim"), None)
    if control_stack is not None:
        line, caught = negative_control(binary, root, control_stack)
        print(line)
        if not caught:
            problems.append(f"{control_stack}: the rollout check did not fail with revision gating disabled")
    for problem in problems:
        print(f"FAILED {problem}")
    print(
        f"router check: {len(stacks)} stacks, {'all pass' if not problems else f'{len(problems)} problem(s)'}"
    )
    return 1 if problems else 0
