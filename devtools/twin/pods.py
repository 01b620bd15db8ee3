"""The stack's pods in the twin: the stand-in for the LWS controller's pods, scheduling and the
read-back of bound pods and allocated claims, the fabric preflight Job, the Deployments and their
disruption budgets. Shared by `make e2e` (e2e.py), the engine run (engine_e2e.py), the quickstart
walk and doctor-twin; above manifests.py and lws_checks.py, below all of those.
"""

import copy
import time
from collections.abc import Sequence
from typing import Any

from devtools.twin import lws_checks, nodes
from devtools.twin.kube import ApiError, Kube, wait_for
from devtools.twin.manifests import Report

POD_TIMEOUT_S = 600


def _exists(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except ApiError:
        return False
    return True


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


def schedule(
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


def job_complete(job: dict[str, Any]) -> str | None:
    """`Complete` or `Failed` once the Job controller has decided, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return None


def preflight(kube: Kube, objects: list[dict[str, Any]], report: Report) -> None:
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
        wait_for(f"Job {name} finished", lambda: job_complete(kube.read(job)) is not None, timeout=300)
    except TimeoutError as error:
        report.check(False, str(error))
    outcome = job_complete(kube.read(job))
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


def deployments(kube: Kube, objects: list[dict[str, Any]], report: Report) -> None:
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
