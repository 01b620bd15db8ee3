"""The faults phase of the day-two replay (docs/day-two.md, "Faults under traffic"): the pickers
restarted with the rendered config (rollout screener on), one gateway stand-in and one steady
traffic stream through every fault scenario in turn. Each scenario is one function that injects
its fault, waits for the recovery and returns its window on the gateway's clock (`Window`):

- `failover_fault`: the leader endpoint picker stopped; the `failover:` line;
- `node_loss_fault`: a decode worker's node lost; the `node loss:` line, and e2e's `node loss:`
  line with a spare node (`node_loss_contract`, contract.py);
- `gpu_loss_fault`: a decode node drained in place of a GPU device taint (a DeviceTaintRule evicts
  through ResourceClaims, which this stack's pods do not hold); the `gpu loss:` line.

`run_phase` runs them in that order and returns the lines and the failures.
"""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devtools.dataplane import report as replay_report
from devtools.dataplane import run as dataplane
from devtools.dataplane import topology
from devtools.daytwo import contract, figures
from devtools.daytwo.serving import (
    RECOVERY_TIMEOUT_S,
    read_results,
    replay_gateway,
    serving_nodes,
    serving_pods,
)
from devtools.twin import cluster, lws_checks
from devtools.twin.kube import ApiError, wait_for

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# Faults under traffic: steady traffic before the first fault and between two (each fault's
# window ends when its scenario has recovered), how long the failover window runs, and how long the
# fault replay's steady traffic is written for (it is stopped after the last fault).
FAULT_GAP_S = 5.0
FAILOVER_WINDOW_S = 15.0
FAULT_TRAFFIC_S = 900.0


@dataclass(frozen=True)
class Window:
    """One fault on the fault replay's clock (ms from the gateway stand-in's start)."""

    what: str
    """The stopped picker's address, or the lost node."""
    at_ms: float
    until_ms: float
    addresses: frozenset[str]
    """The lost group's pod addresses (node loss)."""
    recovered_s: float


def failover_figures(results: list[dict[str, Any]], w: Window) -> dict[str, Any]:
    """The data-plane twin's failover figures (devtools/dataplane/report.py `failover`) over the
    requests started in the failover window only (later faults are not its)."""
    inside = [r for r in results if r["start_ms"] <= w.until_ms]
    return replay_report.failover(inside, w.at_ms, w.what)


def groups_on(pods: list[dict[str, Any]], node: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every live group with a pod on `node`, with all its members (a lost node takes each whole
    group down: `RecreateGroupOnPodRestart`). Pure."""
    by_group = lws_checks.groups(pods)
    return {
        k: members
        for k, members in by_group.items()
        if any(p["spec"].get("nodeName") == node for p in members)
    }


def not_ready_status() -> dict[str, Any]:
    """A Node status whose Ready condition is Unknown, as the node lifecycle controller marks a
    node whose kubelet stopped posting (`NodeStatusUnknown`)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ]
        }
    }


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """The pickers restart with the rendered config (rollout screener on); steady traffic
    runs through every fault scenario in turn. Returns (contract lines, failures)."""
    assert run.kubelet is not None
    pickers = run.pickers(run.topo.picker.config, "faults")
    entries = figures.steady(run.model(), run.bands(), FAULT_TRAFFIC_S)
    argv, out = replay_gateway(run, "faults", pickers, entries)
    run.procs.start("gateway-faults", argv, run.logs)
    clock = out / "start_unix_ms"
    wait_for("the fault replay's clock", clock.exists, 30, 0.1)
    start_ms = float(clock.read_text())

    def now_ms() -> float:
        return time.time() * 1000 - start_ms

    time.sleep(FAULT_GAP_S)
    failover = failover_fault(run, pickers, now_ms)
    time.sleep(FAULT_GAP_S)
    before_loss = serving_pods(run.kube, run.topo.namespace, run.set_name)
    node = node_loss_fault(run, now_ms)
    spare_lines = node_loss_contract(run, before_loss, node)
    time.sleep(FAULT_GAP_S)
    gpu = gpu_loss_fault(run, now_ms)
    time.sleep(FAULT_GAP_S)
    run.procs.stop("gateway-faults")
    results = read_results(out)
    (run.run_dir / "faults-endpoints.json").write_text(
        json.dumps({ip: vars(e) for ip, e in run.kubelet.endpoints.items()}, indent=2) + "\n"
    )
    lines: list[str] = []
    failures: list[str] = []
    fo = failover_figures(results, failover)
    lines.append(figures.failover_line(fo))
    failures += figures.failover_failures(fo)
    lost = figures.loss(node.what, node.at_ms, node.until_ms, results, node.addresses, node.recovered_s)
    lines.append(figures.node_loss_line(lost))
    lines.append(figures.loss_detail("node loss", lost))
    lines += spare_lines
    failures += figures.loss_failures("node loss", lost)
    moved = figures.loss(gpu.what, gpu.at_ms, gpu.until_ms, results, gpu.addresses, gpu.recovered_s)
    lines.append(figures.gpu_loss_line(moved))
    lines.append(figures.loss_detail("gpu loss", moved))
    lines.append(
        f"day-two: gpu loss: not a DeviceTaintRule: the {run.stack} stack's pods hold no "
        "ResourceClaim (acceleratorAllocation none, no ResourceSlice), and the device-taint "
        f"eviction controller evicts only pods whose claims hold a tainted device, so {gpu.what}'s "
        "decode pod was drained instead (cordon, then the Eviction API)"
    )
    failures += figures.loss_failures("gpu loss", moved)
    return lines, failures


def ready_decode_workers(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Ready decode pods among `pods` that are not a group's leader (worker index above 0):
    the node and GPU losses take one of them. Pure."""
    return [
        p
        for p in pods
        if p["metadata"]["labels"].get(topology.DS_ROLE) == "decode"
        and p["metadata"]["labels"].get(lws_checks.WORKER_INDEX, "0") != "0"
        and lws_checks.is_ready(p)
    ]


def failover_fault(run: "Replay", pickers: list[str], now_ms: Callable[[], float]) -> Window:
    """The leader endpoint picker is stopped (SIGTERM, as a rollout or an eviction stops it;
    devtools/dataplane/phases.py does the same in the data-plane twin); the standby takes over.
    The window runs FAILOVER_WINDOW_S; then the stopped picker starts again, as its Deployment
    recreates it, and stands by (the faults after it, and the scaling, run with both)."""
    who = dataplane.leader(run.kube, run.topo.namespace)
    index = next((i for i in range(run.topo.picker.replicas) if who == f"{run.topo.picker.name}-{i}"), None)
    if index is None:
        raise cluster.TwinError(f"failover: no picker holds the leader lease (holder {who!r})")
    at_ms = now_ms()
    stopping = threading.Thread(target=run.procs.stop, args=(f"picker-{index}-",), daemon=True)
    stopping.start()
    time.sleep(FAILOVER_WINDOW_S)
    until_ms = now_ms()
    stopping.join()
    run.restart_picker(index, "faults")
    return Window(pickers[index], at_ms, until_ms, frozenset(), FAILOVER_WINDOW_S)


def node_loss_fault(run: "Replay", now_ms: Callable[[], float]) -> Window:
    """A decode worker's node dies: the processes of every serving pod on it stop at once (the
    process kubelet no longer acts for it), the Node turns NotReady and is cordoned, and its
    pods are deleted as the node lifecycle controller's eviction does (here at once, not
    after the pods' 300 s unreachable toleration); once the LWS controller has restarted
    their groups the pods are force-deleted with the Node (no kubelet will ever finish them).
    The window ends when every group that had a pod there is back with new pods, all Ready."""
    assert run.kubelet is not None
    pods = serving_pods(run.kube, run.topo.namespace, run.set_name)
    decode = ready_decode_workers(pods)
    victim = sorted(decode, key=lambda p: p["metadata"]["name"])[-1]
    node = str(victim["spec"]["nodeName"])
    # Every serving pod on the node dies with it (with no GPUs the scheduler may put a
    # prefill pod beside the decode worker), and with each its whole group.
    on_node = [p for p in pods if p["spec"].get("nodeName") == node]
    members = groups_on(pods, node)
    keys = sorted(members)
    old = {p["metadata"]["uid"] for group in members.values() for p in group}
    addresses = frozenset(str(p["status"]["podIP"]) for group in members.values() for p in group)
    namespace = victim["metadata"]["namespace"]
    at_ms = now_ms()
    began = time.monotonic()
    run.kubelet.lose_node(node)
    merge = "application/merge-patch+json"
    run.kube.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}, merge)
    run.kube.request("PATCH", f"/api/v1/nodes/{node}/status", not_ready_status(), merge)
    for p in on_node:
        run.kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}")

    def leaders_going() -> bool:
        for k in keys:
            try:
                found = run.kube.get(f"/api/v1/namespaces/{namespace}/pods/{lws_checks.group_name(k)}")
            except ApiError as error:
                if error.code == 404:
                    continue
                raise
            if found["metadata"]["uid"] in old and not found["metadata"].get("deletionTimestamp"):
                return False
        return True

    names = ", ".join(lws_checks.group_name(k) for k in keys)
    wait_for(f"node loss: the LWS controller restarting {names}", leaders_going, 60, 0.2)
    for p in on_node:
        run.kube.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}",
            {"gracePeriodSeconds": 0, "preconditions": {"uid": p["metadata"]["uid"]}},
        )
    run.kube.request("DELETE", f"/api/v1/nodes/{node}")

    def back() -> bool:
        now = lws_checks.groups(serving_pods(run.kube, run.topo.namespace, run.set_name))
        return all(
            len(now.get(k, [])) == len(members[k])
            and not ({p["metadata"]["uid"] for p in now.get(k, [])} & old)
            and all(map(lws_checks.is_ready, now.get(k, [])))
            for k in keys
        )

    wait_for(f"node loss: {names} back and Ready", back, RECOVERY_TIMEOUT_S, 0.5)
    return Window(node, at_ms, now_ms(), addresses, time.monotonic() - began)


def node_loss_contract(run: "Replay", before: list[dict[str, Any]], w: Window) -> list[str]:
    """e2e's `node loss:` line with a spare node for each group the lost node took down: the
    spare nodes are those of the serving node groups that ran no pod of the set before."""
    used = {p["spec"].get("nodeName") for p in before}
    spare = {n for n in serving_nodes(run.root / "stacks", run.stack) if n not in used and n != w.what}
    after = serving_pods(run.kube, run.topo.namespace, run.set_name)
    return contract.node_loss_lines(w.what, before, after, spare, w.recovered_s)


def gpu_loss_fault(run: "Replay", now_ms: Callable[[], float]) -> Window:
    """A decode node's GPU goes bad. A DRA DeviceTaintRule acts only through ResourceClaims
    (Kubernetes v1.34 pkg/controller/devicetainteviction evicts pods whose allocated claims
    hold a tainted device; the scheduler skips tainted devices when it allocates a claim), and
    this stack's pods hold none (kind local: acceleratorAllocation none, no ResourceSlice;
    docs/day-two.md, "Faults under traffic"), so the node is drained as an operator does with
    a failed GPU: cordoned (the node.kubernetes.io/unschedulable taint),
    its decode pod evicted through the Eviction API (retried while the role's
    PodDisruptionBudget refuses). The window ends when the group is back with new pods, all
    Ready, none on that node."""
    pods = serving_pods(run.kube, run.topo.namespace, run.set_name)
    decode = ready_decode_workers(pods)
    victim = sorted(decode, key=lambda p: p["metadata"]["name"])[0]
    key = lws_checks.group_key(victim)
    members = lws_checks.groups(pods)[key]
    old = {p["metadata"]["uid"] for p in members}
    addresses = frozenset(str(p["status"]["podIP"]) for p in members)
    node = str(victim["spec"]["nodeName"])
    at_ms = now_ms()
    began = time.monotonic()
    merge = "application/merge-patch+json"
    run.kube.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}, merge)
    wait_for(
        f"gpu loss: {victim['metadata']['name']} evicted",
        lambda: lws_checks.eviction(run.kube, victim)[0] in (200, 201, 404),
        RECOVERY_TIMEOUT_S,
        1.0,
    )

    def back() -> bool:
        now = lws_checks.groups(serving_pods(run.kube, run.topo.namespace, run.set_name)).get(key, [])
        return (
            len(now) == len(members)
            and not ({p["metadata"]["uid"] for p in now} & old)
            and all(map(lws_checks.is_ready, now))
            and all(p["spec"].get("nodeName") != node for p in now)
        )

    wait_for(f"gpu loss: group {lws_checks.group_name(key)} moved and Ready", back, RECOVERY_TIMEOUT_S, 0.5)
    return Window(node, at_ms, now_ms(), addresses, time.monotonic() - began)
