"""The canary steps of the engine run (engine.py, docs/twin.md "The engine run"): after the
serving-only update, six `pulumi up`s of the same stack with `serving.canary` (docs/day-two.md):

1. canary at 0% (a canary starts without traffic: the new revision loads first);
2. shifted to 25% (the route only);
3. rolled back (the section removed: the canary's objects deleted, the route back to one pool);
4. a canary at 100%;
5. promoted: `model.revision` set to the canary's, the stable DisaggregatedSet updated in place
   while the canary takes every request;
6. the canary removed (promotion done).

After each, the twin is read back: the HTTPRoute's backends and weights, whether the canary's
DisaggregatedSet and InferencePool exist, and the stable DisaggregatedSet's uid and generation
(untouched by steps 1-4 and 6, updated in place by 5). Each step prints one `canary:` line.

The canary needs nodes beside the stable roles; the twin's stacks use every node of their group,
so each canary step raises the group's `count` in the config by the canary's nodes. The twin's
simulated nodes stay as the twin started them: the canary's serving pods that find no room stay
Pending there, which the program does not wait for (it awaits no DisaggregatedSet), so these
steps check what the engine declares, not serving. The canary's endpoint picker and tokenizer
are Deployments the engine awaits: the canary runs one picker replica (`routerReplicas: 1`).
"""

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

PROJECT = "llmd-fleet"
CANARY_REVISION = "canary-twin"
"""The canary's `model.revision` (a branch name; the twin downloads nothing)."""
POOL_API = "inference.networking.k8s.io/v1"
DS_API = "disaggregatedset.x-k8s.io/v1"
ROUTE_API = "gateway.networking.k8s.io/v1"


@dataclass(frozen=True)
class CanaryStep:
    """One `pulumi up` of the sequence and what the twin must show after it."""

    name: str
    config: dict[str, Any]
    weights: tuple[int, ...] | None
    """The route's backend weights (stable, canary); None: the stable backend alone (rendered
    without a weight, read back with the CRD's default 1)."""
    stable_updated: bool = False
    """The stable DisaggregatedSet is updated in place (generation up, same uid)."""


def _serving(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get(f"{PROJECT}:serving") or {})


def names(config: Mapping[str, Any]) -> tuple[str, str]:
    """(serving name, namespace) with ServingConfig's defaults."""
    serving = _serving(config)
    return str(serving.get("name", "llmd")), str(serving.get("namespace", "llm-d"))


def with_canary(
    config: Mapping[str, Any], canary: Mapping[str, Any] | None, revision: str | None = None
) -> dict[str, Any]:
    """`config` with `serving.canary` set (None: removed), each node group's count raised by the
    canary's nodes (one instance of each role), and `model.revision` set when given."""
    changed = copy.deepcopy(dict(config))
    serving = changed[f"{PROJECT}:serving"]
    serving.pop("canary", None)
    if canary is not None:
        serving["canary"] = dict(canary)
        groups = changed[f"{PROJECT}:fleet"]["nodeGroups"]
        for role in serving["roles"].values():
            groups[role["nodeGroup"]]["count"] = int(groups[role["nodeGroup"]]["count"]) + int(
                role["nodesPerInstance"]
            )
    if revision is not None:
        changed[f"{PROJECT}:model"]["revision"] = revision
    return changed


def steps(config: Mapping[str, Any]) -> list[CanaryStep]:
    """The six steps from `config` (the stack's config as the engine run left it)."""

    # The simulator's pods do not carry the model revision (only the tokenizer downloads it), so
    # there a promotion leaves the stable DisaggregatedSet as it is.
    vllm = _serving(config).get("engine", "vllm") == "vllm"

    # One endpoint-picker replica for the canary: the twin's three CPU nodes hold the stable
    # picker pair, the tokenizers and the agentic API, and have no CPU left for a second pair of
    # replicas the size of the stable ones (the engine awaits every Deployment).
    def canary(weight: int) -> dict[str, Any]:
        return {
            "weight": weight,
            "modelRevision": CANARY_REVISION,
            "instances": {"prefill": 1, "decode": 1},
            "routerReplicas": 1,
        }

    return [
        CanaryStep("canary 0%", with_canary(config, canary(0)), (100, 0)),
        CanaryStep("canary 25%", with_canary(config, canary(25)), (75, 25)),
        CanaryStep("rollback", with_canary(config, None), None),
        CanaryStep("canary 100%", with_canary(config, canary(100)), (0, 100)),
        CanaryStep(
            "promote", with_canary(config, canary(100), CANARY_REVISION), (0, 100), stable_updated=vllm
        ),
        CanaryStep("promoted", with_canary(config, None, CANARY_REVISION), None),
    ]


def step_line(name: str, counts: Mapping[str, int], seconds: float, seen: str) -> str:
    """`canary: <step> <n> created, <n> updated, <n> deleted, <n> replaced; <what the twin shows> (<s> s)`."""
    replaced = sum(counts.get(op, 0) for op in ("replace", "create-replacement", "delete-replaced"))
    return (
        f"canary: {name} {counts.get('create', 0)} created, {counts.get('update', 0)} updated, "
        f"{counts.get('delete', 0)} deleted, {replaced} replaced; {seen} ({seconds:.1f} s)"
    )


def _obj(api: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"namespace": namespace, "name": name}}


def _live(kube: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    from devtools.twin.kube import ApiError

    try:
        return dict(kube.read(obj))
    except ApiError as error:
        if error.code == 404:
            return None
        raise


def observe(kube: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """What the twin has: the route's (backend, weight) pairs, whether the canary's set and pool
    exist, the stable set's (uid, generation)."""
    name, namespace = names(config)
    route = _live(kube, _obj(ROUTE_API, "HTTPRoute", namespace, name)) or {}
    refs = [ref for rule in route.get("spec", {}).get("rules", []) for ref in rule.get("backendRefs", [])]
    stable = _live(kube, _obj(DS_API, "DisaggregatedSet", namespace, name)) or {"metadata": {}}
    canary = f"{name}-canary"
    return {
        # The HTTPRoute CRD defaults a backendRef's weight to 1 (Gateway API), so a route rendered
        # without weights reads back with 1.
        "backends": [(ref.get("name"), ref.get("weight", 1)) for ref in refs],
        "canary_set": _live(kube, _obj(DS_API, "DisaggregatedSet", namespace, canary)) is not None,
        "canary_pool": _live(kube, _obj(POOL_API, "InferencePool", namespace, canary)) is not None,
        "stable": (stable["metadata"].get("uid"), int(stable["metadata"].get("generation", 0))),
    }


def step_problems(
    step: CanaryStep, name: str, before: tuple[str | None, int], seen: Mapping[str, Any], replaced: int
) -> list[str]:
    """What is wrong with what the twin shows after `step` (pure)."""
    problems = []
    canary = f"{name}-canary"
    weights = step.weights
    expected = [(name, 1)] if weights is None else [(name, weights[0]), (canary, weights[1])]
    if seen["backends"] != expected:
        problems.append(f"canary: {step.name}: route backends {seen['backends']}, expected {expected}")
    present = step.weights is not None
    if (seen["canary_set"], seen["canary_pool"]) != (present, present):
        what = "present" if present else "gone"
        problems.append(
            f"canary: {step.name}: the canary's DisaggregatedSet/InferencePool should be {what} "
            f"(set {seen['canary_set']}, pool {seen['canary_pool']})"
        )
    uid, generation = seen["stable"]
    if uid != before[0]:
        problems.append(f"canary: {step.name}: the stable DisaggregatedSet was replaced")
    elif step.stable_updated and generation <= before[1]:
        problems.append(f"canary: {step.name}: the stable DisaggregatedSet was not updated")
    elif not step.stable_updated and generation != before[1]:
        problems.append(
            f"canary: {step.name}: the stable DisaggregatedSet changed ({before[1]} -> {generation})"
        )
    if replaced:
        problems.append(f"canary: {step.name}: {replaced} resources replaced")
    return problems


def seen_text(seen: Mapping[str, Any]) -> str:
    backends = ", ".join(f"{n} {w}" for n, w in seen["backends"]) or "none"
    return (
        f"route {backends}; canary set/pool {'present' if seen['canary_set'] else 'gone'}; "
        f"stable generation {seen['stable'][1]}"
    )


def run_steps(
    config: Mapping[str, Any],
    write: Callable[[Mapping[str, Any]], None],
    up: Callable[[str], Mapping[str, int]],
    kube: Any,
    say: Callable[[str], None],
) -> list[str]:
    """Each step: write its config, `pulumi up`, read the twin back; one line each, the problems."""
    problems: list[str] = []
    name, _ = names(config)
    before = observe(kube, config)["stable"]
    for step in steps(config):
        write(step.config)
        started = time.monotonic()
        counts = up(step.name)
        seconds = time.monotonic() - started
        seen = observe(kube, step.config)
        replaced = sum(counts.get(op, 0) for op in ("replace", "create-replacement", "delete-replaced"))
        say(step_line(step.name, counts, seconds, seen_text(seen)))
        problems += step_problems(step, name, before, seen, replaced)
        before = seen["stable"]
    return problems
