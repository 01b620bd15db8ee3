"""What the engine run reports, read without running anything (devtools/twin/engine.py runs it).

- the step lines: one `engine:` line per step (`step_line`), read back by `parse_step_line` and
  judged by `step_failures` (a second up that changed something, an update that replaced
  something, a destroy that left objects, a missing step);
- the policy packs: from the engine's events (`--event-log` lines or the Automation API's
  events), the packs that ran in `pulumi up` and their violations by enforcement level, and the
  `policy:` line;
- the state: the resources it protects and the Kubernetes objects it holds (what destroy must
  leave none of).

The Python language host's walk of docs/quickstart.md (devtools/twin/quickstart.py) and the
day-two deployment (devtools/daytwo/deploy.py) read the same lines and events.
"""

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Operation names of Pulumi's change summaries that replace a resource.
REPLACING = ("replace", "create-replacement", "delete-replaced", "import-replacement", "discard-replaced")


# --- step lines (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One engine step and what it changed."""

    name: str
    """preview, up, second up, update or destroy."""
    counts: Mapping[str, int]
    """Pulumi's change summary (operation -> resources), `same` included."""
    seconds: float
    left: int = 0
    """destroy: objects of ours still in the twin afterwards."""

    @property
    def changed(self) -> int:
        return sum(n for op, n in self.counts.items() if op != "same")

    @property
    def replaced(self) -> int:
        return sum(self.counts.get(op, 0) for op in REPLACING)


def step_line(step: Step) -> str:
    """The one line a step prints, e.g. `engine: up 61 created (48.0 s)`."""
    c, s = step.counts, f"({step.seconds:.1f} s)"
    if step.name == "preview":
        return f"engine: preview {c.get('create', 0)} to create {s}"
    if step.name == "up":
        return f"engine: up {c.get('create', 0)} created {s}"
    if step.name == "second up":
        return f"engine: second up {step.changed} changes {s}"
    if step.name == "update":
        return f"engine: update {c.get('update', 0)} updated, {step.replaced} replaced {s}"
    if step.name == "destroy":
        return f"engine: destroy {c.get('delete', 0)} deleted, {step.left} left {s}"
    raise ValueError(f"unknown engine step {step.name!r}")


_LINE = re.compile(
    r"^engine: (?:"
    r"preview (?P<preview>\d+) to create"
    r"|up (?P<up>\d+) created"
    r"|second up (?P<second>\d+) changes"
    r"|update (?P<updated>\d+) updated, (?P<replaced>\d+) replaced"
    r"|destroy (?P<deleted>\d+) deleted, (?P<left>\d+) left"
    r") \((?P<seconds>\d+(?:\.\d+)?) s\)$"
)


def parse_step_line(line: str) -> dict[str, float]:
    """The figures of an `engine:` line (keys: preview, up, second, updated, replaced, deleted,
    left, seconds). Raises ValueError for any other line."""
    match = _LINE.match(line.strip())
    if not match:
        raise ValueError(f"not an engine step line: {line!r}")
    return {k: float(v) for k, v in match.groupdict().items() if v is not None}


def step_failures(lines: Sequence[str]) -> list[str]:
    """What the engine lines say went wrong: a second up that changed something, an update that
    replaced something or updated nothing, a destroy that left something, a missing step."""
    problems = []
    seen: dict[str, dict[str, float]] = {}
    for line in lines:
        figures = parse_step_line(line)
        seen[next(k for k in ("preview", "up", "second", "updated", "deleted") if k in figures)] = figures
    labels = {
        "preview": "preview",
        "up": "up",
        "second": "second up",
        "updated": "update",
        "deleted": "destroy",
    }
    for step, label in labels.items():
        if step not in seen:
            problems.append(f"engine: no {label} step")
    if seen.get("up", {}).get("up", 1) == 0:
        problems.append("engine: up created nothing")
    if seen.get("second", {}).get("second", 0):
        problems.append(f"engine: the second up changed {seen['second']['second']:.0f} resources")
    if "updated" in seen:
        if seen["updated"]["replaced"]:
            problems.append(f"engine: the update replaced {seen['updated']['replaced']:.0f} resources")
        if not seen["updated"]["updated"]:
            problems.append("engine: the update changed nothing in place")
    if seen.get("deleted", {}).get("left", 0):
        problems.append(f"engine: destroy left {seen['deleted']['left']:.0f} objects in the twin")
    return problems


# --- policy packs: what the engine reports of them (pure) ------------------------------------------


@dataclass(frozen=True)
class PolicyResults:
    """What the engine reported of the policy packs of one `pulumi up`."""

    packs: tuple[str, ...]
    """Packs the update ran (its summary's `PolicyPacks`, and any pack an analyzer event names)."""
    mandatory: int
    """Violations reported at the mandatory enforcement level."""
    advisory: int


def policy_results(events: Iterable[Mapping[str, Any]]) -> PolicyResults:
    """From the engine's events as JSON objects (`--event-log`: one per line): the packs that ran
    and the violations (`policyEvent`) by enforcement level, of the update only: a `pulumi up`
    without `--skip-preview` logs its preview first, which ends with a summary marked
    `isPreview`, and what came before that is left out."""
    packs: list[str] = []
    levels: dict[str, int] = {}

    def ran(name: object) -> None:
        # The update's summary keys a local pack as `<name>|local|<directory>`.
        if isinstance(name, str) and name and name.split("|", 1)[0] not in packs:
            packs.append(name.split("|", 1)[0])

    for event in events:
        summary = event.get("summaryEvent")
        if isinstance(summary, Mapping) and summary.get("isPreview"):
            packs.clear()
            levels.clear()
            continue
        if isinstance(summary, Mapping):
            for name in summary.get("PolicyPacks") or {}:
                ran(name)
        for kind in ("policyAnalyzeSummaryEvent", "policyAnalyzeStackSummaryEvent"):
            analyzed = event.get(kind)
            if isinstance(analyzed, Mapping):
                ran(analyzed.get("policyPackName"))
        violation = event.get("policyEvent")
        if isinstance(violation, Mapping):
            ran(violation.get("policyPackName"))
            level = str(violation.get("enforcementLevel", ""))
            levels[level] = levels.get(level, 0) + 1
    return PolicyResults(tuple(packs), levels.get("mandatory", 0), levels.get("advisory", 0))


def event_log(text: str) -> list[dict[str, Any]]:
    """The events of an `--event-log` file (one JSON object per line; a line cut short by the
    CLI's exit is left out)."""
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def sdk_event(event: Any) -> dict[str, Any]:
    """An Automation API EngineEvent as the JSON fields `policy_results` reads."""
    found: dict[str, Any] = {}
    if event.summary_event is not None:
        found["summaryEvent"] = {"PolicyPacks": dict(event.summary_event.policy_packs or {})}
    if event.policy_event is not None:
        found["policyEvent"] = {
            "policyPackName": event.policy_event.policy_pack_name,
            "enforcementLevel": event.policy_event.enforcement_level,
        }
    return found


def policy_line(results: PolicyResults) -> str:
    """`policy: <pack> ran in pulumi up: <M> mandatory, <A> advisory`."""
    packs = ", ".join(results.packs) or "no pack"
    return f"policy: {packs} ran in pulumi up: {results.mandatory} mandatory, {results.advisory} advisory"


def policy_problems(results: PolicyResults) -> list[str]:
    """A run fails unless a pack ran and reported no mandatory violation."""
    problems = []
    if not results.packs:
        problems.append("policy: no policy pack ran in pulumi up (the engine reported none)")
    if results.mandatory:
        problems.append(f"policy: {results.mandatory} mandatory violations in pulumi up")
    return problems


# --- the state: protected resources and the objects of the stack (pure) ----------------------------


def protected_urns(deployment: Mapping[str, Any]) -> list[str]:
    """URNs of the resources a state marks `protect`."""
    return [r["urn"] for r in deployment.get("resources", []) if r.get("protect")]


def kubernetes_objects(deployment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """apiVersion/kind/metadata (name, namespace) of every Kubernetes object a state holds."""
    found = []
    for resource in deployment.get("resources", []):
        kind = resource.get("type", "")
        outputs = resource.get("outputs") or {}
        if (
            not kind.startswith("kubernetes:")
            or kind.startswith("kubernetes:helm")
            or "apiVersion" not in outputs
        ):
            continue
        meta = outputs.get("metadata") or {}
        obj = {
            "apiVersion": outputs["apiVersion"],
            "kind": outputs["kind"],
            "metadata": {"name": meta.get("name")},
        }
        if meta.get("namespace"):
            obj["metadata"]["namespace"] = meta["namespace"]
        found.append(obj)
    return found
