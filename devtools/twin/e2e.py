"""`make e2e`: bring the twin up, put a stack into it, and assert by reading the API server.

    python -m devtools.twin e2e [STACK] [--apiserver-only] [--keep] [--no-engine]
                                [--without-day-two-checks]

1. `twin up` (built binaries from the cache; nodes from the stack when the node side is there);
2. every vendored CRD (schemas/crds/) applied server-side and Established;
3. the stack rendered offline (`llmd-fleet render STACK --out build/twin/rendered/STACK`) and
   every rendered Kubernetes object applied server-side: namespaces, then cluster-scoped
   objects, then the rest. Each one is read back: stored, and what the server added (defaults)
   is counted. CEL: the CRD validation rules over our objects passed (counted), and negative
   controls (a DisaggregatedSet breaking its replicas rule, an InferencePool with a duplicate
   target port, a DeviceClass whose CEL selector does not compile) are refused (dry run);
4. with the node side, first the fabric preflight Job (`serving.preflight`), as `pulumi up` runs
   it before serving: the Job controller creates its two pods, the scheduler allocates their
   claims (the serving claim template) and binds them to two different nodes, kwok completes
   them (its pod-complete stage, for pods a Job owns). Read back: the Job Complete, both pods
   Succeeded on two GPU nodes with the Indexed hostnames, and their claims released again (the
   resourceclaim controller deletes a done pod's claims), so serving gets every node;
5. with the node side: the DisaggregatedSet's pods, made by the real LWS controller when its
   source snapshot is there (devtools/twin/lws.py; started after step 2, the DisaggregatedSet held
   back until after step 4 and then checked by devtools/twin/lws_steps.py: pods by the
   controller, a decode rollout, node loss, External scaling), else by the twin's stand-in (one
   per worker index of every group, from the role's template); the controller manager makes
   their ResourceClaims, the scheduler allocates them against the fake nodes' ResourceSlices
   and binds the pods, kwok marks them Ready. Read back: pods bound, claims allocated, each GPU
   paired with the NIC on its pcieRoot, one pod per node. With --without-day-two-checks (CI) the
   decode rollout, the node loss with a spare node and the External scaling are left out: `make
   day-two` runs them under traffic with the same controller (the scaling by the HPA controller)
   and prints their `rollout:`, `node loss:` and `scale:` lines in this format; the disruption
   and the node loss without a spare node stay here.
6. with the node side, the stack's objects deleted again and the program deployed by the Pulumi
   engine into the same twin (engine_e2e.py, engine.py), the program and the policy pack run by
   the real Python language host: a type error refused before any resource, preview, up with the
   policy pack, the checks of 4 and 5 and the Deployments on what the engine created, a second up
   with no changes, an in-place update, destroy leaving nothing (skipped with --no-engine);
7. `twin down` (unless --keep).

Helm releases and remote manifests are not applied (their charts and URLs need the network);
the vendored CRDs stand in for the remote CRD bundles. Exit status 1 when an assertion fails.
"""

import copy
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from devtools.twin import build, cluster, engine_e2e, lws_checks, lws_steps, nodes, pods
from devtools.twin.kube import ApiError, Kube, wait_for
from devtools.twin.manifests import (
    PROJECT_ROOT,
    Report,
    apply_order,
    cel_rules,
    render,
    server_added,
    vendored_crds,
)


def _crds(kube: Kube, report: Report) -> dict[str, int]:
    """Apply the vendored CRDs; return CEL rule counts by group/kind of served versions."""
    crds = vendored_crds()
    started = time.monotonic()
    for crd in crds:
        kube.apply(crd)

    def established() -> bool:
        for crd in crds:
            stored = kube.read(crd)
            conditions = {c["type"]: c["status"] for c in stored.get("status", {}).get("conditions", [])}
            if conditions.get("Established") != "True":
                return False
        return True

    wait_for("CRDs Established", established, timeout=60)
    report.figure(
        "CRDs applied and Established", f"{len(crds)}/{len(crds)} ({time.monotonic() - started:.1f} s)"
    )
    rules: dict[str, int] = {}
    for crd in crds:
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            gv = f"{crd['spec']['group']}/{version['name']}"
            rules[f"{gv}/{kind}"] = cel_rules(version.get("schema", {}))
    return rules


def _apply_stack(kube: Kube, objects: list[dict[str, Any]], rules: dict[str, int], report: Report) -> None:
    namespaced = {}
    for obj in objects:
        key = f"{obj['apiVersion']}/{obj['kind']}"
        if key not in namespaced:
            namespaced[key] = kube.resource(obj["apiVersion"], obj["kind"]).namespaced
    ordered = apply_order(objects, namespaced)
    stored_count = 0
    refused = []
    defaulted_objects = 0
    defaulted_fields = 0
    by_kind: Counter[str] = Counter()
    rules_checked = 0
    started = time.monotonic()
    for obj in ordered:
        name = f"{obj['kind']} {obj['metadata'].get('namespace', '-')}/{obj['metadata']['name']}"
        try:
            kube.apply(obj)
        except ApiError as error:
            refused.append(f"{name}: {error}")
            continue
        stored = kube.read(obj)
        if stored["metadata"].get("uid"):
            stored_count += 1
        added = server_added(obj, stored)
        if added:
            defaulted_objects += 1
            defaulted_fields += len(added)
        by_kind[obj["kind"]] += 1
        rules_checked += rules.get(f"{obj['apiVersion']}/{obj['kind']}", 0)
    seconds = time.monotonic() - started
    for problem in refused:
        report.check(False, f"refused: {problem}")
    report.figure(
        "rendered objects stored (server-side apply, read back)",
        f"{stored_count}/{len(objects)} in {seconds:.1f} s "
        f"({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items()))})",
    )
    report.check(stored_count == len(objects), f"only {stored_count} of {len(objects)} objects stored")
    report.figure(
        "objects the server defaulted", f"{defaulted_objects}/{stored_count}, {defaulted_fields} fields added"
    )
    report.figure("CRD CEL rules over our custom objects (all passed)", str(rules_checked))
    report.check(defaulted_objects > 0, "no object received a server default")


def _negative_controls(kube: Kube, objects: list[dict[str, Any]], report: Report) -> None:
    """Objects that break a rule must be refused: CEL is enforced, not merely present."""
    controls: list[tuple[str, dict[str, Any]]] = []
    ds = next((o for o in objects if o["kind"] == "DisaggregatedSet"), None)
    if ds is not None and len(ds["spec"]["roles"]) > 1:
        bad = copy.deepcopy(ds)
        bad["spec"]["roles"][0]["spec"]["replicas"] = 0
        controls.append(("DisaggregatedSet with one role at 0 replicas", bad))
    pool = next((o for o in objects if o["kind"] == "InferencePool"), None)
    if pool is not None and pool["spec"].get("targetPorts"):
        bad = copy.deepcopy(pool)
        bad["spec"]["targetPorts"].append(dict(bad["spec"]["targetPorts"][0]))
        controls.append(("InferencePool with a duplicate target port", bad))
    bad_class = nodes.gpu_device_class()
    bad_class["metadata"]["name"] = "twin-negative-control"
    bad_class["spec"]["selectors"][0]["cel"]["expression"] = "device.driver =="
    controls.append(("DeviceClass whose CEL selector does not compile", bad_class))
    refused = 0
    for what, obj in controls:
        try:
            kube.apply(obj, dry_run=True)
            report.check(False, f"negative control accepted: {what}")
        except ApiError as error:
            ok = error.code == 422
            refused += ok
            report.check(ok, f"negative control {what}: expected 422, got {error.code}")
    report.figure("negative controls refused (422, dry run)", f"{refused}/{len(controls)}")


def _status(stack: str, report: Report, groups: bool) -> None:
    """`llmd-fleet status` against the twin's kubeconfig, once every group's pods are Ready: its
    compact line, and every group ready (kwok runs no endpoint picker, so no one holds the Lease)."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config
    from llmd_fleet.cli.status import read_status
    from llmd_fleet.cluster.client import load_client

    config = stack_config(read_stack_file(PROJECT_ROOT / "stacks", stack))
    with load_client(cluster.twin_dir() / "kubeconfig") as client:
        status = read_status(client.get, config)
    report.line(f"status: {status.one_line()}")
    if not groups:
        # `llmd-fleet status` groups pods by the LWS labels, which the stand-in sets itself (and
        # _schedule has deleted its pods again by now): a count would be the stand-in's, not the
        # controller's.
        report.line("status: groups not counted (no LWS controller: the stand-in made and labelled the pods)")
        return
    report.check(status.all_ready, f"status: not every group ready: {status.groups_text()}")


FLAGS = ("--apiserver-only", "--keep", "--no-engine", "--without-day-two-checks")


def run(
    stack: str, apiserver_only: bool, keep: bool, engine: bool = True, day_two_checks: bool = True
) -> Report:
    report = Report()
    if cluster.state_path().is_file():
        cluster.down()
    started = time.monotonic()
    if engine and not apiserver_only:
        engine = engine_e2e.prepare(stack, report)
    state = cluster.up(stack, apiserver_only)
    try:
        kube = cluster.client(state=state)
        print("e2e: CRDs")
        rules = _crds(kube, report)
        # The real LWS controller when its source is there (docs/twin.md), else None: the stand-in.
        controller = lws_checks.start_controller(state, kube, report)
        print(f"e2e: {stack} rendered and applied")
        out = cluster.twin_dir() / "rendered" / stack
        objects = render(stack, out)
        held = lws_steps.held_back(objects) if controller else []
        _apply_stack(kube, [o for o in objects if all(o is not h for h in held)], rules, report)
        _negative_controls(kube, objects, report)
        skipped_helm = len(list((out / "helm").glob("*.yaml"))) if (out / "helm").is_dir() else 0
        skipped_remote = len(list((out / "remote").glob("*.yaml"))) if (out / "remote").is_dir() else 0
        report.figure(
            "not applied (need the network)",
            f"{skipped_helm} Helm releases, {skipped_remote} remote manifests",
        )
        if "kwok" in state.components:
            report.figure("nodes Ready", f"{cluster.ready_nodes(kube)}/{len(kube.list('v1', 'Node'))}")
            print("e2e: the fabric preflight Job before serving (controller manager, scheduler, kwok)")
            pods.preflight(kube, objects, report)
            fleet = (
                lws_steps.serving(kube, held, rules, stack, report, day_two_checks) if controller else None
            )
            if not controller:
                print("e2e: the twin's stand-in for the LWS controller creates the DisaggregatedSet's pods")
                pods.schedule(kube, objects, report)
            print("e2e: Deployments and PodDisruptionBudgets (controller manager, scheduler, kwok)")
            pods.deployments(kube, objects, report)
            _status(stack, report, groups=controller is not None)
            if fleet is not None and day_two_checks:
                lws_steps.scale_stack(kube, fleet, report)
            elif fleet is not None:
                report.figure(*lws_checks.DAY_TWO_SCALE)
            if engine:
                engine_e2e.run(kube, stack, objects, report, stand_in=not controller)
        else:
            report.figure("scheduling", "skipped (API server only)")
    finally:
        if not keep:
            cluster.down()
    report.figure("e2e wall time", f"{time.monotonic() - started:.0f} s")
    return report


def main(argv: Sequence[str]) -> int:
    positional = [a for a in argv if not a.startswith("--")]
    unknown = [a for a in argv if a.startswith("--") and a not in FLAGS]
    if unknown:
        print(f"e2e: unknown flag {unknown[0]} (allowed: {', '.join(FLAGS)})", file=sys.stderr)
        return 2
    stack = positional[0] if positional else cluster.DEFAULT_STACK
    from llmd_fleet.cli.stack_file import read_stack_file
    from llmd_fleet.core.problems import ConfigError

    try:
        read_stack_file(PROJECT_ROOT / "stacks", stack)
    except ConfigError as error:
        print(f"e2e: {error}", file=sys.stderr)
        return 2
    try:
        report = run(
            stack,
            "--apiserver-only" in argv,
            "--keep" in argv,
            "--no-engine" not in argv,
            "--without-day-two-checks" not in argv,
        )
    except (cluster.TwinError, build.BuildError, TimeoutError) as error:
        print(f"e2e: failed: {error}", file=sys.stderr)
        return 1
    print("\ne2e figures")
    for name, value in report.figures:
        print(f"  {name}: {value}")
    for text in report.lines:
        print(text)
    if report.failures:
        print(f"\ne2e: {len(report.failures)} failure(s)", file=sys.stderr)
        for failure in report.failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print("\ne2e: passed")
    return 0
