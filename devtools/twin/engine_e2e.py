"""The engine part of `make e2e` (docs/twin.md): after the checks on the applied rendering, the
stack's objects are deleted again and the Pulumi engine deploys the program into the same twin
(engine.py: preview, up, second up, in-place update, destroy). Between the first and the second up,
the node-side read-back checks run against what the engine created: the preflight Job it awaited,
the DisaggregatedSet's pods (created by the twin as a stand-in for the LWS controller, from the
engine's DisaggregatedSet) with their claims and GPU/NIC pairing, the Deployments and PDBs.
"""

import json
import time
from collections.abc import Sequence
from typing import Any

from devtools.twin import build, pods
from devtools.twin.engine import (
    PROJECT,
    TWIN_KINDS,
    EngineError,
    ensure_tools,
    objects_left,
    run_engine,
)
from devtools.twin.kube import ApiError, Kube
from devtools.twin.manifests import PROJECT_ROOT, Report

WIPE_TIMEOUT_S = 180
ENGINE_PREFIX = "engine: "


class EngineReport(Report):
    """The e2e report, each figure named `engine: ...` so both passes stay apart."""

    def __init__(self, report: Report):
        super().__init__(figures=report.figures, failures=report.failures, lines=report.lines)

    def figure(self, name: str, value: str) -> None:
        super().figure(ENGINE_PREFIX + name, value)

    def check(self, ok: bool, message: str) -> None:
        super().check(ok, ENGINE_PREFIX + message)


def prepare(stack: str, report: Report) -> bool:
    """Build (or reuse) the engine's binaries before the twin starts; False (recorded as a failure)
    when they cannot be had, and the rest of e2e runs without the engine. A gke or eks stack
    creates cloud resources: no engine run for it (False, said as a figure)."""
    from llmd_fleet.cli.stack_file import read_stack_file

    values = read_stack_file(PROJECT_ROOT / "stacks", stack).values
    kind = json.loads(values.get(f"{PROJECT}:target", "{}")).get("kind")
    if kind not in TWIN_KINDS:
        report.figure(f"{ENGINE_PREFIX}run", f"skipped (kind {kind} creates cloud resources)")
        return False
    try:
        ensure_tools()
    except build.BuildError as error:
        report.check(False, f"{ENGINE_PREFIX}{error}")
        return False
    return True


def wipe(kube: Kube, objects: Sequence[dict[str, Any]], report: Report) -> None:
    """Delete the applied rendering (cluster-scoped objects and namespaces; the namespace controller
    deletes their contents) and wait until none of it is served."""
    started = time.monotonic()
    for obj in reversed(list(objects)):
        if obj["kind"] == "Namespace" or not kube.resource(obj["apiVersion"], obj["kind"]).namespaced:
            try:
                kube.delete(obj)
            except ApiError as error:
                report.check(False, f"wipe: {obj['kind']} {obj['metadata']['name']}: {error}")
    left = objects_left(kube, objects, grace_s=WIPE_TIMEOUT_S)
    report.figure(
        "applied rendering deleted before the engine run",
        f"{len(objects) - left}/{len(objects)} ({time.monotonic() - started:.0f} s)",
    )
    report.check(left == 0, f"{left} applied objects still present before the engine run")


def run(
    kube: Kube, stack: str, rendered: Sequence[dict[str, Any]], report: Report, stand_in: bool = True
) -> None:
    """Wipe, then the engine run with the node-side checks after its first up. With the real LWS
    controller running (`stand_in` False) it makes the DisaggregatedSet's pods itself, and the
    stand-in does not run."""
    wipe(kube, rendered, report)
    engine_report = EngineReport(report)

    def after_up(created: list[dict[str, Any]]) -> None:
        live = [kube.read(obj) for obj in created]
        print("e2e: [engine] the preflight Job the engine awaited")
        pods.preflight(kube, live, engine_report)
        if stand_in:
            print("e2e: [engine] the DisaggregatedSet's pods (stand-in for the LWS controller)")
            pods.schedule(kube, live, engine_report)
        else:
            engine_report.figure(
                "DisaggregatedSet pods", "made by the LWS controller (its checks: first pass)"
            )
        print("e2e: [engine] Deployments and PodDisruptionBudgets")
        pods.deployments(kube, live, engine_report)

    print(f"e2e: {stack} through the Pulumi engine (preview, up, second up, update, canary, destroy)")
    from pulumi.automation.errors import CommandError

    try:
        outcome = run_engine(stack, after_up=after_up)
    except (EngineError, build.BuildError, CommandError) as error:
        report.check(False, f"{ENGINE_PREFIX}{error}")
        return
    report.lines.extend(outcome.lines)
    for note in outcome.notes:
        report.figures.append((f"{ENGINE_PREFIX}note", note))
    for problem in outcome.problems:
        report.check(False, problem)
