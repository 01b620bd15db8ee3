"""`make e2e`: bring the twin up, put a stack into it, and assert by reading the API server.

    python -m devtools.twin e2e [STACK] [--apiserver-only] [--keep] [--no-engine]

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
   back until after step 4 and then checked by devtools/twin/lws_checks.py: pods by the
   controller, a decode rollout, node loss, External scaling), else by the twin's stand-in (one
   per worker index of every group, from the role's template); the controller manager makes
   their ResourceClaims, the scheduler allocates them against the fake nodes' ResourceSlices
   and binds the pods, kwok marks them Ready. Read back: pods bound, claims allocated, each GPU
   paired with the NIC on its pcieRoot, one pod per node.
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
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.twin import build, cluster, lws_checks, nodes
from devtools.twin.kube import ApiError, Kube, wait_for, walk_paths

PROJECT_ROOT = cluster.PROJECT_ROOT
CRD_DIR = PROJECT_ROOT / "schemas" / "crds"
# What the server and controllers set on every object (uid, resourceVersion, managedFields,
# controller annotations, status): not counted as defaults.
BOOKKEEPING = ("metadata.", "status")
POD_TIMEOUT_S = 600


@dataclass
class Report:
    figures: list[tuple[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """Figure lines printed as they are, each starting with its word (devtools/twin/lws_checks.py,
    and the `engine:` steps)."""

    def figure(self, name: str, value: str) -> None:
        self.figures.append((name, value))
        print(f"  {name}: {value}", flush=True)

    def line(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)
            print(f"  FAIL {message}", flush=True)


def load_documents(paths: Sequence[Path]) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind"):
                docs.append(doc)
    return docs


def vendored_crds(directory: Path = CRD_DIR) -> list[dict[str, Any]]:
    crds = load_documents(sorted(directory.rglob("*.yaml")))
    return [d for d in crds if d["kind"] == "CustomResourceDefinition"]


def apply_order(objects: Sequence[dict[str, Any]], namespaced: dict[str, bool]) -> list[dict[str, Any]]:
    """Namespaces first, then cluster-scoped objects, then ServiceAccounts, then the other
    namespaced objects (stable within each).

    ServiceAccounts go before the rest as the program's `depends_on` orders them: the token
    controller deletes a `kubernetes.io/service-account-token` Secret whose account does not exist
    yet, so a Secret applied first can vanish before it is read back."""

    def rank(obj: dict[str, Any]) -> int:
        if obj["kind"] == "Namespace":
            return 0
        if obj["kind"] == "CustomResourceDefinition":
            return 1
        if not namespaced.get(f"{obj['apiVersion']}/{obj['kind']}", True):
            return 2
        return 3 if obj["kind"] == "ServiceAccount" else 4

    return sorted(objects, key=rank)


def server_added(rendered: dict[str, Any], stored: dict[str, Any]) -> set[str]:
    """Leaf paths the server added to an object (defaults), bookkeeping left out."""
    mine = set(walk_paths(rendered))
    theirs = set(walk_paths(stored))
    added = set()
    for path in theirs - mine:
        if path.startswith(BOOKKEEPING):
            continue
        added.add(path)
    return added


def cel_rules(schema: Any) -> int:
    """Number of x-kubernetes-validations rules in an OpenAPI schema."""
    if isinstance(schema, dict):
        own = len(schema.get("x-kubernetes-validations", []))
        return own + sum(cel_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return sum(cel_rules(v) for v in schema)
    return 0


def render(stack: str, out: Path) -> list[dict[str, Any]]:
    command = [
        sys.executable,
        "-c",
        "from llmd_fleet.cli.main import main; main()",
        "render",
        stack,
        "--out",
        str(out),
    ]
    subprocess.run(command, cwd=PROJECT_ROOT, check=True, stdout=subprocess.DEVNULL)
    return load_documents(sorted((out / "manifests").rglob("*.yaml")))


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


def lws_pods(ds: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the LWS controller creates for a DisaggregatedSet: per role, `replicas` groups of
    `size` pods from the role's worker template (no leader template: leader and workers share it),
    named <set>-<role>-<group>-<index>. Stand-in for the controller, which the twin cannot build."""
    pods = []
    meta = ds["metadata"]
    for role in ds["spec"]["roles"]:
        spec = role["spec"]
        template = spec["leaderWorkerTemplate"]
        worker = template.get("leaderTemplate") or template["workerTemplate"]
        for group in range(spec.get("replicas", 1)):
            for index in range(template.get("size", 1)):
                source = worker if index == 0 else template["workerTemplate"]
                labels = dict(source.get("metadata", {}).get("labels", {}))
                labels.update(
                    {
                        # As the LWS controller labels its pods (what `llmd-fleet status` groups by).
                        lws_checks.LWS_NAME: f"{meta['name']}-{role['name']}",
                        lws_checks.GROUP_INDEX: str(group),
                        # As the DisaggregatedSet controller labels them (the roles' budgets select these).
                        lws_checks.DS_NAME: meta["name"],
                        lws_checks.DS_ROLE: role["name"],
                        "llmd-fleet.io/twin-set": meta["name"],
                        "llmd-fleet.io/twin-group": str(group),
                        "llmd-fleet.io/twin-worker-index": str(index),
                    }
                )
                pods.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{meta['name']}-{role['name']}-{group}-{index}",
                            "namespace": meta["namespace"],
                            "labels": labels,
                            "annotations": dict(source.get("metadata", {}).get("annotations", {})),
                        },
                        "spec": copy.deepcopy(source["spec"]),
                    }
                )
    return pods


def _schedule(
    kube: Kube, objects: list[dict[str, Any]], report: lws_checks.Reporter, keep: bool = False
) -> None:
    """The stand-in for the LWS controller: the DisaggregatedSet's pods created, then read back
    (bound, Ready, claims allocated, GPU/NIC pairing, one pod per node) and deleted again, unless
    `keep` (the quickstart walk leaves them for `llmd-fleet status` and `pulumi destroy`)."""
    ds = next((o for o in objects if o["kind"] == "DisaggregatedSet"), None)
    if ds is None:
        report.figure("pods", "no DisaggregatedSet in the stack")
        return
    pods = lws_pods(ds)
    namespace = ds["metadata"]["namespace"]
    wait_for(
        f"ServiceAccount {namespace}/default",
        lambda: _exists(kube, f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        timeout=60,
    )
    started = time.monotonic()
    for pod in pods:
        kube.apply(pod)
    names = {p["metadata"]["name"] for p in pods}

    def snapshot() -> tuple[int, int, list[dict[str, Any]]]:
        live = [p for p in kube.list("v1", "Pod", namespace) if p["metadata"]["name"] in names]
        bound = sum(1 for p in live if p["spec"].get("nodeName"))
        ready = sum(
            1
            for p in live
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        )
        return bound, ready, live

    try:
        wait_for(
            f"{len(pods)} pods Ready", lambda: snapshot()[1] >= len(pods), timeout=POD_TIMEOUT_S, interval=3
        )
    except TimeoutError as error:
        report.check(False, str(error))
    seconds = time.monotonic() - started
    bound, ready, live = snapshot()
    claims = kube.list("resource.k8s.io/v1", "ResourceClaim", namespace)
    allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
    slices = kube.list("resource.k8s.io/v1", "ResourceSlice")
    violations = nodes.pairing_violations(allocated, slices)
    used_nodes = {p["spec"].get("nodeName") for p in live if p["spec"].get("nodeName")}
    gpu_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node") if n.get("spec", {}).get("taints")}
    report.figure("pods bound / pods", f"{bound}/{len(pods)} ({seconds:.0f} s to all Ready)")
    report.figure("pods Ready (kwok) / pods", f"{ready}/{len(pods)}")
    report.figure("claims allocated / claims", f"{len(allocated)}/{len(claims)}")
    pairs = sum(
        1
        for claim in allocated
        for result in claim["status"]["allocation"]["devices"]["results"]
        if result["request"].startswith("gpu-")
    )
    report.figure("GPU/NIC pairs checked", str(pairs))
    report.figure("GPU/NIC pairing violations", str(len(violations)))
    report.figure(
        "GPU nodes in use",
        f"{len(used_nodes & gpu_nodes)}/{len(gpu_nodes)} (one pod per node: {len(used_nodes) == bound})",
    )
    for problem in violations[:5]:
        print(f"    {problem}")
    report.check(bound == len(pods), f"{len(pods) - bound} pods not bound")
    report.check(
        len(allocated) == len(pods) and len(claims) == len(pods), "not every pod's claim is allocated"
    )
    report.check(not violations, f"{len(violations)} pairing violations")
    report.check(len(used_nodes) == bound, "two pods share a node")
    report.check(used_nodes <= gpu_nodes, "a serving pod landed on a node without GPUs")
    if not keep:
        for pod in pods:
            kube.delete(pod)


PREFLIGHT_COMPONENT = ("app.kubernetes.io/component", "preflight")


def _job_complete(job: dict[str, Any]) -> str | None:
    """`Complete` or `Failed` once the Job controller has decided, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return None


def _preflight(kube: Kube, objects: list[dict[str, Any]], report: Report) -> None:
    """The preflight Job runs to completion before any serving pod exists (step 4)."""
    key, value = PREFLIGHT_COMPONENT
    jobs = [o for o in objects if o["kind"] == "Job" and o["metadata"].get("labels", {}).get(key) == value]
    if not jobs:
        report.figure("preflight", "not rendered (serving.preflight.enabled false)")
    for job in jobs:
        _preflight_job(kube, job, report)


def _preflight_job(kube: Kube, job: dict[str, Any], report: Report) -> None:
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    started = time.monotonic()
    try:
        wait_for(f"Job {name} finished", lambda: _job_complete(kube.read(job)) is not None, timeout=300)
    except TimeoutError as error:
        report.check(False, str(error))
    outcome = _job_complete(kube.read(job))
    selector = job["spec"]["template"]["metadata"]["labels"]
    pods = [
        p
        for p in kube.list("v1", "Pod", namespace)
        if selector.items() <= p["metadata"].get("labels", {}).items()
    ]
    succeeded = [p for p in pods if p.get("status", {}).get("phase") == "Succeeded"]
    placed = {p["spec"].get("nodeName") for p in succeeded}
    hostnames = sorted(p["spec"].get("hostname", "") for p in succeeded)
    gpu_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node") if n.get("spec", {}).get("taints")}
    wanted = job["spec"]["completions"]
    report.figure(
        f"preflight Job {name}",
        f"{outcome} in {time.monotonic() - started:.0f} s; pods Succeeded {len(succeeded)}/{wanted} "
        f"on {len(placed & gpu_nodes)} GPU nodes ({', '.join(hostnames)})",
    )
    report.check(outcome == "Complete", f"preflight Job {name}: {outcome or 'not finished'}")
    report.check(len(succeeded) == wanted, f"preflight Job {name}: {len(succeeded)} pods Succeeded")
    report.check(
        len(placed) == wanted and placed <= gpu_nodes, f"preflight Job {name}: pods not on distinct GPU nodes"
    )
    report.check(
        hostnames == [f"{name}-{i}" for i in range(wanted)],
        f"preflight Job {name}: hostnames {hostnames}, the initiator looks for {name}-0",
    )
    templates = sorted(
        {r["resourceClaimTemplateName"] for p in pods for r in p["spec"].get("resourceClaims", [])}
    )
    uids = {p["metadata"]["uid"] for p in pods}

    def held() -> int:
        return sum(
            1
            for c in kube.list("resource.k8s.io/v1", "ResourceClaim", namespace)
            if {o.get("uid") for o in c["metadata"].get("ownerReferences", [])} & uids
        )

    try:
        wait_for(f"claims of Job {name} released", lambda: held() == 0, timeout=120)
    except TimeoutError as error:
        report.check(False, str(error))
    report.figure(f"preflight claims ({', '.join(templates)}) held after completion", str(held()))


def deployment_budgets(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PodDisruptionBudgets whose selector matches a Deployment's pod template. The serving
    roles' budgets select the pods the LWS controller labels (checked by lws_checks.disruption
    with the controller; the stand-in's pods have no controller a budget could count)."""
    templates = [
        (o["metadata"].get("namespace"), (o["spec"]["template"].get("metadata") or {}).get("labels") or {})
        for o in objects
        if o["kind"] == "Deployment"
    ]
    out = []
    for pdb in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
        wanted = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        namespace = pdb["metadata"].get("namespace")
        if any(
            ns == namespace and all(labels.get(k) == v for k, v in wanted.items()) for ns, labels in templates
        ):
            out.append(pdb)
    return out


def _deployments(kube: Kube, objects: list[dict[str, Any]], report: Report) -> None:
    """Every Deployment of the stack rolls out to all replicas Available, and every PDB of a
    Deployment reports its pods healthy (the disruption controller computed it)."""
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    wanted = sum(d["spec"].get("replicas", 1) for d in deployments)

    def available() -> tuple[int, int]:
        done = ready = 0
        for d in deployments:
            status = kube.read(d).get("status", {})
            ready += status.get("availableReplicas", 0)
            done += status.get("availableReplicas", 0) == d["spec"].get("replicas", 1)
        return done, ready

    started = time.monotonic()
    try:
        wait_for("Deployments Available", lambda: available()[0] == len(deployments), timeout=180, interval=2)
    except TimeoutError as error:
        report.check(False, str(error))
    done, ready = available()
    report.figure(
        "Deployments available",
        f"{done}/{len(deployments)} "
        f"(replicas available {ready}/{wanted}, {time.monotonic() - started:.0f} s)",
    )
    report.check(done == len(deployments), "not every Deployment is Available")
    for pdb in deployment_budgets(objects):
        status = kube.read(pdb).get("status", {})
        healthy, expected = status.get("currentHealthy", 0), status.get("expectedPods", 0)
        allowed = status.get("disruptionsAllowed", 0)
        report.figure(
            f"PDB {pdb['metadata']['name']}", f"healthy {healthy}/{expected}, disruptions allowed {allowed}"
        )
        report.check(expected > 0 and healthy == expected, f"PDB {pdb['metadata']['name']} not healthy")


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


def _exists(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except ApiError:
        return False
    return True


def run(stack: str, apiserver_only: bool, keep: bool, engine: bool = True) -> Report:
    report = Report()
    if cluster.state_path().is_file():
        cluster.down()
    started = time.monotonic()
    if engine and not apiserver_only:
        from devtools.twin import engine_e2e

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
        held = lws_checks.held_back(objects) if controller else []
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
            _preflight(kube, objects, report)
            fleet = lws_checks.serving(kube, held, rules, stack, report) if controller else None
            if not controller:
                print("e2e: the twin's stand-in for the LWS controller creates the DisaggregatedSet's pods")
                _schedule(kube, objects, report)
            print("e2e: Deployments and PodDisruptionBudgets (controller manager, scheduler, kwok)")
            _deployments(kube, objects, report)
            _status(stack, report, groups=controller is not None)
            if fleet is not None:
                lws_checks.scale_stack(kube, fleet, report)
            if engine:
                from devtools.twin import engine_e2e

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
    stack = positional[0] if positional else cluster.DEFAULT_STACK
    from llmd_fleet.cli.stack_file import read_stack_file
    from llmd_fleet.core.problems import ConfigError

    try:
        read_stack_file(PROJECT_ROOT / "stacks", stack)
    except ConfigError as error:
        print(f"e2e: {error}", file=sys.stderr)
        return 2
    try:
        report = run(stack, "--apiserver-only" in argv, "--keep" in argv, "--no-engine" not in argv)
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
