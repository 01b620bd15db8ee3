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
   PreRequest (binding) and ResponseHeader (the returned token).

A stack passes when the loader accepts the file, every such plugin builds, and in every
conversation that carries a session key each later turn is scored to the endpoint its first turn
was routed to, while a new conversation starts unbound. Stack files and the checker's output
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


@dataclass(frozen=True)
class Conversation:
    name: str
    headers: dict[str, str]
    keyed: bool
    """Whether the rendered config makes these headers a session key."""


def rendered_epp_config(manifests: Path) -> tuple[str, dict[str, Any]] | None:
    """(text, parsed) of the EndpointPickerConfig among the rendered ConfigMaps, if any."""
    for path in sorted(manifests.rglob("configmap-*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        for text in (document.get("data") or {}).values():
            parsed = yaml.safe_load(text) if isinstance(text, str) else None
            if isinstance(parsed, dict) and parsed.get("kind") == "EndpointPickerConfig":
                return text, parsed
    return None


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


def checker_input(text: str, convs: list[Conversation]) -> dict[str, Any]:
    return {
        "config": text,
        "conversations": [{"name": c.name, "turns": [{"headers": c.headers}] * TURNS} for c in convs],
    }


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


def check_stack(binary: Path, root: Path, stack: str) -> tuple[str, list[str]]:
    manifests = root / "build" / stack / "manifests"
    if not manifests.is_dir():
        return "", [f"{stack}: {manifests} is missing: run `llmd-fleet render {stack}` first"]
    found = rendered_epp_config(manifests)
    if found is None:
        return "", [f"{stack}: no EndpointPickerConfig among the rendered ConfigMaps"]
    text, config = found
    convs = conversations(config)
    run = subprocess.run(
        [str(binary)],
        input=json.dumps(checker_input(text, convs)),
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
    for problem in problems:
        print(f"FAILED {problem}")
    print(
        f"router check: {len(stacks)} stacks, {'all pass' if not problems else f'{len(problems)} problem(s)'}"
    )
    return 1 if problems else 0
