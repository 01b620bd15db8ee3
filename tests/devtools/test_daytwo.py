"""The day-two replay's pure parts (docs/day-two.md): the process kubelet's probes and
status, kwok kept off the kubelet's nodes, the upgrade figures and lines, the revisions' stack
files and the rollout's settled state."""

import copy
import itertools
import threading
import types
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from devtools.dataplane import netns, topology
from devtools.daytwo import (
    alerts,
    faults_phase,
    figures,
    kubelet,
    models_phase,
    reference_phase,
    scale_phase,
    serving,
)
from devtools.daytwo import run as daytwo
from devtools.daytwo.kubelet import Endpoint
from devtools.twin import cluster, nodes
from devtools.twin.kube import Kube
from tests.support import STACKS_DIR

SIDECAR_SPEC: dict[str, Any] = {
    "initContainers": [
        {
            "name": "routing-proxy",
            "restartPolicy": "Always",
            "ports": [{"name": "http", "containerPort": 8000}],
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
        }
    ],
    "containers": [
        {
            "name": "simulator",
            "image": "sim:v1",
            "ports": [
                {"name": "vllm-rank0", "containerPort": 8200},
                {"name": "vllm-rank1", "containerPort": 8201},
            ],
            "readinessProbe": {"httpGet": {"path": "/health/ready", "port": "vllm-rank0"}},
            "startupProbe": {"httpGet": {"path": "/health", "port": "vllm-rank0"}},
        }
    ],
}


def test_the_kubelet_probes_every_readiness_probe_with_named_ports_resolved() -> None:
    assert kubelet.probe_targets(SIDECAR_SPEC) == [("/health", 8000), ("/health/ready", 8200)]
    bare = copy.deepcopy(SIDECAR_SPEC)
    del bare["containers"][0]["readinessProbe"]
    assert kubelet.probe_targets(bare) == [("/health", 8000)]


@pytest.mark.parametrize("ready", [False, True])
def test_the_kubelet_writes_a_running_pod_with_its_address_and_readiness(ready: bool) -> None:
    status = kubelet.running_status("10.244.0.12", "127.0.0.1", SIDECAR_SPEC, ready)["status"]
    assert status["phase"] == "Running"
    assert status["podIP"] == "10.244.0.12" and status["podIPs"] == [{"ip": "10.244.0.12"}]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    want = "True" if ready else "False"
    assert conditions == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": want,
        "Ready": want,
    }
    assert [c["ready"] for c in status["containerStatuses"]] == [ready]


KWOK_STAGES = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


def test_kwok_runs_no_pod_on_the_kubelets_nodes_but_keeps_managing_the_nodes() -> None:
    docs = list(yaml.safe_load_all(cluster.without_pods_on(KWOK_STAGES, ["kind-000", "kind-001"])))
    node, pod = docs
    assert node == yaml.safe_load(KWOK_STAGES.split("---")[0])
    assert pod["spec"]["selector"]["matchExpressions"] == [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
        {"key": ".spec.nodeName", "operator": "NotIn", "values": ["kind-000", "kind-001"]},
    ]
    assert pod["spec"]["next"] == {"delete": True}


def test_a_pod_namespace_added_later_gets_its_own_veth_on_the_bridge() -> None:
    flat = [" ".join(c) for c in netns.attach_commands("pod-a", "10.244.0.40", 1003)]
    assert flat[0] == f"ip netns add {netns.ns_name('pod-a')}"
    assert f"ip -n {netns.BRIDGE_NS} link set v1003 master br0 up" in flat
    assert f"ip -n {netns.ns_name('pod-a')} addr add 10.244.0.40/24 dev eth0" in flat
    # Its hardware address follows from its address: a namespace that takes over an address
    # another held answers neighbours that still cache the old one.
    assert f"ip -n {netns.ns_name('pod-a')} link set eth0 address 02:00:0a:f4:00:28" in flat
    assert flat.index(f"ip -n {netns.ns_name('pod-a')} link set eth0 address 02:00:0a:f4:00:28") < flat.index(
        f"ip -n {netns.ns_name('pod-a')} link set eth0 up"
    )
    assert len({netns.mac_address(f"10.244.0.{h}") for h in range(256)}) == 256
    # The run's first namespaces are wired by the same commands.
    assert netns.setup_commands([("pod-a", "10.244.0.40")])[3:] == netns.attach_commands(
        "pod-a", "10.244.0.40", 0
    )


ENDPOINTS = {
    "10.244.0.10": Endpoint("p-a", "prefill", "aaaa"),
    "10.244.0.11": Endpoint("d-a", "decode", "aaaa"),
    "10.244.0.20": Endpoint("p-b", "prefill", "bbbb"),
    "10.244.0.21": Endpoint("d-b", "decode", "bbbb"),
}


def _served(start_ms: float, decode: str, prefill: str = "") -> dict[str, Any]:
    return {"outcome": "served", "start_ms": start_ms, "destination": f"{decode}:8000", "prefill": prefill}


def test_an_upgrade_counts_failures_cross_revision_pairs_and_the_overlap() -> None:
    results = [
        _served(0, "10.244.0.11", "10.244.0.10:8000"),
        _served(10_000, "10.244.0.21", "10.244.0.20:8000"),  # b first serves
        _served(20_000, "10.244.0.11", "10.244.0.20:8001"),  # a cross-revision pair
        _served(45_000, "10.244.0.11"),  # a last serves
        {"outcome": "failed", "start_ms": 30_000, "destination": "", "prefill": ""},
        _served(50_000, "10.244.0.21"),
    ]
    u = figures.upgrade("day-two", "aaaa", "bbbb", results, ENDPOINTS, [2, 2, 1, 2], 2, 2, 61.24)
    assert (u.requests, u.failed, u.cross_pairs, u.disaggregated) == (6, 1, 1, 3)
    assert (u.overlap_s, u.overlap_requests, u.min_ready_decode, u.unknown) == (35.0, 4, 1, 0)
    assert figures.upgrade_line(u) == (
        "upgrade: day-two revision aaaa -> bbbb: 1 failed of 6 requests, 1 cross-revision pairs, "
        "ready decode >= 1/2 throughout (61.2 s)"
    )
    problems = figures.upgrade_failures(u)
    assert len(problems) == 4  # failed, cross pair, decode down, overlap too short
    assert figures.screener_off_line(u) == "upgrade (screener off): day-two: 1 cross-revision pairs"
    assert figures.screener_off_failures(u) == []


def test_a_clean_upgrade_passes_and_a_clean_screener_off_run_fails() -> None:
    results = [_served(t * 100.0, "10.244.0.11", "10.244.0.10:8000") for t in range(150)]
    results += [_served(t * 100.0 + 5_000, "10.244.0.21", "10.244.0.20:8000") for t in range(400)]
    short = figures.upgrade("day-two", "aaaa", "bbbb", results, ENDPOINTS, [2, 2], 2, 2, 80.0)
    assert (short.cross_pairs, short.overlap_s) == (0, 9.9)
    assert figures.upgrade_failures(short) == [
        "upgrade: two revisions served together for 9.9 s and 200 requests, less than 30 s and 200"
    ]
    both = figures.upgrade(
        "day-two", "aaaa", "bbbb", [*results, _served(45_000, "10.244.0.11")], ENDPOINTS, [2, 2], 2, 2, 80.0
    )
    assert both.cross_pairs == 0 and both.overlap_s == 40.0 and both.overlap_requests >= 200
    assert figures.upgrade_failures(both) == []
    assert figures.screener_off_failures(both) != []


def test_a_request_served_by_an_address_no_pod_had_fails_the_upgrade() -> None:
    u = figures.upgrade("s", "aaaa", "bbbb", [_served(0, "10.244.0.99")], ENDPOINTS, [2], 2, 2, 1.0)
    assert u.unknown == 1
    assert any("no pod had" in p for p in figures.upgrade_failures(u))


def test_the_steady_traffic_runs_in_segments_of_new_sessions() -> None:
    bands = {"interactive": "i", "subagent": "s", "batch": "b"}
    entries = figures.steady("m", bands, 13)
    assert len({e["id"] for e in entries}) == len(entries)
    segments = {e["session"].split("-", 1)[0] for e in entries}
    assert segments == {"s0", "s1"}
    assert max(e["at_ms"] for e in entries) > figures.SEGMENT_MS
    # Each session's header names the session itself (the picker's session key).
    agent = next(e for e in entries if e["session"].startswith("s1-") and e["phase"] == "agent")
    assert agent["session"] in agent["headers"].values()


def test_each_revision_is_the_stack_with_decode_max_num_seqs_changed() -> None:
    text = (STACKS_DIR / "Pulumi.day-two.yaml").read_text()
    changed = yaml.safe_load(daytwo.variant(text, 24))
    original = yaml.safe_load(text)
    assert changed["config"]["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] == 24
    changed["config"]["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] = original["config"][
        "llmd-fleet:serving"
    ]["roles"]["decode"]["maxNumSeqs"]
    assert changed == original


def test_each_revision_changes_decode_max_num_seqs() -> None:
    """Revisions b and c each change the pod template: neither repeats the stack's own decode
    `maxNumSeqs` (sized for the routing phase's overload wave) nor the revision before it."""
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.day-two.yaml").read_text())
    revisions = [
        doc["config"]["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"],
        *daytwo.NEXT_MAX_NUM_SEQS,
    ]
    assert all(a != b for a, b in itertools.pairwise(revisions))


def _pod(role: str, revision: str, ready: bool, group: str = "0", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "labels": {
            topology.DS_ROLE: role,
            topology.DS_REVISION: revision,
            topology.LWS_NAME: f"set-{revision}-{role}",
            topology.LWS_GROUP_INDEX: group,
        }
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_a_rollout_is_settled_only_with_one_revision_all_ready_and_nothing_terminating() -> None:
    want = {"prefill": 1, "decode": 2}
    pods = [_pod("prefill", "bbbb", True), _pod("decode", "bbbb", True), _pod("decode", "bbbb", True, "1")]
    assert serving.settled(pods, want) == "bbbb"
    assert serving.settled([*pods, _pod("decode", "aaaa", True, deleting=True)], want) is None
    assert serving.settled([*pods[:2], _pod("decode", "aaaa", True, "1")], want) is None
    assert serving.settled([*pods[:2], _pod("decode", "bbbb", False, "1")], want) is None
    assert serving.settled(pods[:2], want) is None


def test_ready_decode_counts_whole_groups_of_any_revision() -> None:
    pods = [
        _pod("decode", "aaaa", True, "0"),
        _pod("decode", "aaaa", True, "0"),
        _pod("decode", "bbbb", True, "0"),
        _pod("decode", "bbbb", False, "0"),
        _pod("prefill", "bbbb", True),
    ]
    assert daytwo.ready_decode(pods, 2) == 1
    assert daytwo.ready_decode(pods[:1], 2) == 0


def test_the_twin_puts_no_gpu_taint_on_a_node_group_without_gpus() -> None:
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    config = stack_config(read_stack_file(STACKS_DIR, "day-two"))
    created = [o for o in nodes.twin_objects(config.fleet.node_groups) if o["kind"] == "Node"]
    kind = [o for o in created if o["metadata"]["labels"][nodes.NODE_GROUP_LABEL] == "kind"]
    assert len(kind) == 13
    assert all(not o["spec"].get("taints") for o in kind)
    assert all(o["metadata"]["labels"]["llm-d.ai/day-two"] == "true" for o in kind)


class FakeKube:
    """The API calls the process kubelet makes, recorded; its pods listed as set."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str, Any]] = []

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return copy.deepcopy(self.pods)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        self.calls.append((method, path, body))
        return None


def test_the_kubelet_starts_readies_after_the_load_and_finalizes_a_deleted_pod(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from devtools.dataplane import run as dataplane

    events: list[str] = []
    monkeypatch.setattr(
        netns, "attach", lambda name, ip, index: events.append(f"attach {name} {ip} v{index}")
    )
    monkeypatch.setattr(netns, "detach", lambda name: events.append(f"detach {name}"))
    monkeypatch.setattr(netns, "fetch", lambda name, url, timeout=5.0: "ok")
    monkeypatch.setattr(
        dataplane,
        "start_pods",
        lambda procs, topo, bins, logs, **kw: events.append(f"start {topo.pods[0].name}"),
    )
    monkeypatch.setattr(kubelet, "SETTLE_S", 0.0)
    clock = [100.0]
    fake = FakeKube()
    kube = cast(Kube, fake)
    base = topology.Topology("llm-d", topology.Picker("epp", 1, (), ""), {}, [], [])
    said: list[str] = []
    k = kubelet.ProcessKubelet(
        lambda: kube,
        base,
        frozenset({"kind-000"}),
        {},
        tmp_path,
        40.0,
        say=said.append,
        clock=lambda: clock[0],
    )
    pod = {
        "metadata": {
            "name": "set-0-rev-decode-0",
            "namespace": "llm-d",
            "uid": "u1",
            "labels": {topology.DS_ROLE: "decode", topology.DS_REVISION: "rev"},
        },
        "spec": {**copy.deepcopy(SIDECAR_SPEC), "nodeName": "kind-000"},
    }
    elsewhere = copy.deepcopy(pod)
    elsewhere["metadata"] |= {"name": "other", "uid": "u2"}
    elsewhere["spec"]["nodeName"] = "system-000"
    fake.pods = [pod, elsewhere]
    k.sync(kube)
    assert events == [
        f"attach set-0-rev-decode-0 10.244.0.{topology.FIRST_POD_HOST} v1000",
        "start set-0-rev-decode-0",
    ]
    method, path, body = fake.calls[-1]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/llm-d/pods/set-0-rev-decode-0/status")
    assert body["status"]["podIP"] == f"10.244.0.{topology.FIRST_POD_HOST}"
    assert {c["type"]: c["status"] for c in body["status"]["conditions"]}["Ready"] == "False"
    assert k.endpoints[f"10.244.0.{topology.FIRST_POD_HOST}"] == Endpoint(
        "set-0-rev-decode-0", "decode", "rev"
    )
    clock[0] += 39.0
    k.sync(kube)
    assert len(fake.calls) == 1  # still loading
    clock[0] += 1.5
    # The load has passed, but the engine does not answer its readiness probe yet (nothing
    # listens, or the output-id stand-in's upstream refuses): not Ready.
    probed: list[str] = []
    monkeypatch.setattr(netns, "fetch", lambda name, url, timeout=5.0: probed.append(url))
    k.sync(kube)
    assert len(fake.calls) == 1
    assert probed == [f"http://10.244.0.{topology.FIRST_POD_HOST}:8000/health"]  # the first probe failed
    monkeypatch.setattr(netns, "fetch", lambda name, url, timeout=5.0: "ok")
    k.sync(kube)
    assert {c["type"]: c["status"] for c in fake.calls[-1][2]["status"]["conditions"]}["Ready"] == "True"
    assert said[-1] == "kubelet: set-0-rev-decode-0 Ready 40.5 s after start"
    fake.pods[0]["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    monkeypatch.setattr(k, "_idle", lambda state: True)
    k.sync(kube)
    for thread in k._threads:
        thread.join(timeout=10)
    assert events[-1] == "detach set-0-rev-decode-0"
    assert fake.calls[-1] == (
        "DELETE",
        "/api/v1/namespaces/llm-d/pods/set-0-rev-decode-0",
        {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}},
    )
    assert k.pods == {}


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--load-seconds=soon"], "--load-seconds: 'soon' is not a positive number of seconds"),
        (["--load-seconds=0"], "--load-seconds: '0' is not a positive number of seconds"),
        (["--load-seconds=nan"], "--load-seconds: 'nan' is not a positive number of seconds"),
        (["--load-seconds=inf"], "--load-seconds: 'inf' is not a positive number of seconds"),
        (
            ["--fast"],
            "unknown flag --fast (allowed: --load-seconds=S, --apply-manifests, --without-models, "
            "--only=PHASE,...)",
        ),
        (
            ["--only=routing,upgrade"],
            "--only: upgrade is not a phase (allowed: a comma-separated list of routing, responses, "
            "faults, models, reference)",
        ),
        (
            ["--only="],
            "--only: names no phase (allowed: a comma-separated list of routing, responses, "
            "faults, models, reference)",
        ),
        (["no-such-stack"], "no stack file stacks/Pulumi.no-such-stack.yaml"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert daytwo.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"day-two: {words}\n"


def test_the_kubelet_starts_no_pod_when_the_pod_network_is_used_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    attached: list[str] = []
    monkeypatch.setattr(netns, "attach", lambda name, ip, index: attached.append(name))
    fake = FakeKube()
    kube = cast(Kube, fake)
    base = topology.Topology("llm-d", topology.Picker("epp", 1, (), ""), {}, [], [])
    k = kubelet.ProcessKubelet(lambda: kube, base, frozenset({"kind-000"}), {}, tmp_path, 1.0, say=print)
    k._next_host = kubelet.LAST_POD_HOST + 1
    fake.pods = [
        {
            "metadata": {"name": "p", "namespace": "llm-d", "uid": "u", "labels": {}},
            "spec": {**copy.deepcopy(SIDECAR_SPEC), "nodeName": "kind-000"},
        }
    ]
    k.sync(kube)
    assert attached == [] and fake.calls == [] and k.pods == {}
    assert k.errors == ["kubelet: p not started: the run's pod network has no address left"]


def _request(
    rid: str,
    start_ms: float,
    outcome: str = "served",
    decode: str = "",
    total_ms: float = 1000.0,
    **more: Any,
) -> dict[str, Any]:
    return {
        "id": rid,
        "outcome": outcome,
        "start_ms": start_ms,
        "pick_ms": 10.0,
        "total_ms": total_ms,
        "destination": f"{decode}:8000" if decode else "",
        "prefill": "",
        "picker": more.pop("picker", "10.0.0.2:9002"),
        **more,
    }


def test_a_lost_group_counts_its_in_flight_requests_and_the_last_one_routed_to_it() -> None:
    lost = {"10.244.0.30", "10.244.0.31"}
    results = [
        _request("before", 1_000, decode="10.244.0.30"),  # done before the loss
        _request("flight", 9_500, "failed", decode="10.244.0.31"),  # on the group when it went
        _request("after-lost", 10_400, "failed", decode="10.244.0.30"),  # routed there 0.4 s after
        _request("after-ok", 11_000, decode="10.244.0.40"),
        _request("late", 90_000, decode="10.244.0.40"),  # after the window
    ]
    x = figures.loss("kind-007", 10_000, 60_000, results, lost, 52.34)
    assert (x.in_flight, x.routed_after, x.failed, x.requests) == (1, 1, 2, 3)
    assert x.stopped_routing_s == pytest.approx(0.41)
    assert figures.node_loss_line(x) == (
        "node loss: kind-007 under traffic: group recreated in 52.3 s, 2 failed of 3 requests, "
        "picker stopped routing to it in 0.4 s"
    )
    assert (
        figures.gpu_loss_line(x)
        == "gpu loss: kind-007 tainted: group moved in 52.3 s, 2 failed of 3 requests"
    )
    # Both failures were on the lost group: the one it held and the one handed it before the
    # picker could know.
    assert figures.loss_failures("node loss", x) == []
    assert figures.loss_detail("node loss", x) == (
        "day-two: node loss: 1 requests in flight on the lost group when it went, 1 routed to it "
        "before the picker dropped it, 0 failed elsewhere"
    )
    clean = figures.loss("kind-007", 10_000, 60_000, results[:2] + results[3:], lost, 52.34)
    assert (clean.failed, clean.in_flight, clean.stopped_routing_s) == (1, 1, 0.0)
    assert figures.loss_failures("node loss", clean) == []
    # A request that failed on a healthy pod is not the lost group's: the run fails.
    elsewhere = figures.loss(
        "kind-007",
        10_000,
        60_000,
        [*results, _request("bad", 12_000, "failed", decode="10.244.0.40")],
        lost,
        1.0,
    )
    assert figures.loss_failures("node loss", elsewhere) == [
        "node loss: 1 requests failed that were not on the lost group"
    ]


def test_failover_reads_only_its_own_window_and_names_the_upstream_limit() -> None:
    killed = "10.0.0.1:9002"
    results = [
        _request("ok", 1_000, decode="10.244.0.40", picker=killed),
        _request("refused", 5_200, "rejected", picker=killed, reason="rejected-shutting-down"),
        _request("standby", 6_000, decode="10.244.0.40"),
        _request("node-loss", 40_000, "failed", decode="10.244.0.30"),  # a later fault's
    ]
    w = faults_phase.Window(killed, 5_000, 25_000, frozenset(), 20.0)
    fo = faults_phase.failover_figures(results, w)
    assert (fo["failed"], fo["causes"]) == (1, {"shutting-down": 1})
    assert fo["resume_s"] == pytest.approx(1.01)
    line = figures.failover_line(fo)
    assert line.startswith("failover: 1 failed, 1.0 s (limit: upstream llm-d-router ")
    assert line.endswith(
        "pkg/epp/requestcontrol/admission.go: flow control stops at SIGTERM while the picker drains)"
    )
    assert figures.failover_failures(fo) == []
    assert (
        figures.failover_line(faults_phase.failover_figures(results[:1] + results[2:3], w))
        == "failover: 0 failed, 1.0 s"
    )
    endpoint = {"failed": 1, "resume_s": 1.0, "causes": {"endpoint": 1}}
    assert figures.failover_failures(endpoint) == [
        "failover: 1 requests failed at their endpoint, not at the picker hand-over"
    ]
    assert figures.failover_failures({"failed": 0, "resume_s": None}) == [
        "failover: no request was routed by the standby picker after the leader stopped"
    ]


def test_a_lost_node_kills_its_pods_at_once_and_the_kubelet_leaves_them_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from devtools.dataplane import run as dataplane

    events: list[str] = []
    monkeypatch.setattr(netns, "attach", lambda name, ip, index: None)
    monkeypatch.setattr(netns, "detach", lambda name: events.append(f"detach {name}"))
    monkeypatch.setattr(dataplane, "start_pods", lambda procs, topo, bins, logs, **kw: None)
    fake = FakeKube()
    kube = cast(Kube, fake)
    base = topology.Topology("llm-d", topology.Picker("epp", 1, (), ""), {}, [], [])
    k = kubelet.ProcessKubelet(
        lambda: kube, base, frozenset({"kind-000", "kind-001"}), {}, tmp_path, 40.0, say=events.append
    )
    pods = []
    for i, node in enumerate(("kind-000", "kind-001")):
        pods.append(
            {
                "metadata": {"name": f"pod-{i}", "namespace": "llm-d", "uid": f"u{i}", "labels": {}},
                "spec": {**copy.deepcopy(SIDECAR_SPEC), "nodeName": node},
            }
        )
    fake.pods = pods
    k.sync(kube)
    assert k.lose_node("kind-001") == [f"10.244.0.{topology.FIRST_POD_HOST + 1}"]
    assert "detach pod-1" in events and "detach pod-0" not in events
    assert [p.name for p in k.pods.values()] == ["pod-0"]
    # Marked for deletion afterwards: nobody on that node finalizes it (no kubelet there).
    fake.pods[1]["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    calls = len(fake.calls)
    k.sync(kube)
    assert len(fake.calls) == calls


def test_a_node_lost_is_reported_with_its_ready_condition_unknown() -> None:
    condition = faults_phase.not_ready_status()["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Ready",
        "Unknown",
        "NodeStatusUnknown",
    )


def test_a_lost_node_takes_down_every_group_with_a_pod_on_it() -> None:
    def pod(name: str, lws: str, group: str, node: str) -> dict[str, Any]:
        labels = {"leaderworkerset.sigs.k8s.io/name": lws, "leaderworkerset.sigs.k8s.io/group-index": group}
        return {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node}}

    pods = [
        pod("decode-2", "set-decode", "2", "kind-001"),
        pod("decode-2-1", "set-decode", "2", "kind-008"),
        pod("prefill-1", "set-prefill", "1", "kind-008"),  # no GPUs: packed beside the worker
        pod("decode-0", "set-decode", "0", "kind-002"),
    ]
    lost = faults_phase.groups_on(pods, "kind-008")
    assert sorted(lost) == [("set-decode", "2"), ("set-prefill", "1")]
    assert [p["metadata"]["name"] for p in lost[("set-decode", "2")]] == ["decode-2", "decode-2-1"]


def test_the_scenario_beside_the_scale_down_runs_and_reports_when_no_role_autoscales(tmp_path: Path) -> None:
    replay = daytwo.Replay(tmp_path, "local-sim", 40.0)
    replay.renders = [[{"kind": "Service", "metadata": {"name": "x"}}]]
    ran: list[bool] = []

    def alerts() -> tuple[list[str], list[str]]:
        ran.append(True)
        return ["alert: EppLeaderMissing fired ..."], ["one failure"]

    assert scale_phase.run_phase(replay, alerts) == (
        ["scale: not run: the local-sim stack autoscales no role", "alert: EppLeaderMissing fired ..."],
        ["one failure"],
    )
    assert ran == [True]
    assert scale_phase.run_phase(replay) == (["scale: not run: the local-sim stack autoscales no role"], [])


def test_the_phases_beside_the_alerts_run_while_the_alerts_fault_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The alerts' fault waits until a phase beside it has started (it would time out if the two
    ran one after the other), and its lines come first."""
    started = threading.Event()

    def pickers_down(run: Any, monitor: Any, config: str, handoff: Any = None) -> tuple[list[str], list[str]]:
        assert handoff is None, "no phase borrowed the lease"
        assert started.wait(10), "the phases beside the alerts did not start while the fault ran"
        return ["alert: EppLeaderMissing fired 120.0 s after x, resolved 20.0 s after recovery"], []

    def models(run: Any) -> tuple[list[str], list[str]]:
        started.set()
        return ["models: 0 misrouted"], []

    def reference(run: Any) -> tuple[list[str], list[str]]:
        return ["hit rate: rendered 90.0% baseline 60.0%"], ["reference: a failure"]

    monkeypatch.setattr(alerts, "pickers_down", pickers_down)
    run = types.SimpleNamespace(
        topo=types.SimpleNamespace(picker=types.SimpleNamespace(config="plugins: []\n"))
    )
    both = daytwo.beside_alerts(run, None, [models, reference])  # type: ignore[arg-type]
    assert both() == (
        [
            "alert: EppLeaderMissing fired 120.0 s after x, resolved 20.0 s after recovery",
            "models: 0 misrouted",
            "hit rate: rendered 90.0% baseline 60.0%",
        ],
        ["reference: a failure"],
    )


def test_the_replays_seconds_line_names_each_part() -> None:
    ticks = iter([100.0, 131.4, 249.6, 250.0])
    clock = daytwo.Clock(lambda: next(ticks))
    clock.lap("prepare")
    clock.lap("deploy")
    clock.lap(
        "+".join(
            ["scaling", "alerts", *map(daytwo.name_of, [models_phase.run_phase, reference_phase.run_phase])]
        )
    )
    assert clock.line() == "day-two: seconds: prepare 31, deploy 118, scaling+alerts+models+reference 0"


def test_the_kubelet_loads_for_the_stacks_declared_load_time() -> None:
    """The replay's simulated load is the day-two stack's own `serving.modelLoadMinutes`, so the
    cooldown and alerts rendered for that load are what the replay waits for; short enough for
    the 15-minute replay, long enough for two revisions to serve together."""
    from devtools.daytwo.figures import MIN_OVERLAP_S
    from devtools.daytwo.run import declared_load_seconds
    from llmd_fleet.cli.paths import CHECKOUT

    load = declared_load_seconds(CHECKOUT, daytwo.DEFAULT_STACK)
    assert load == 15.0
    # The revisions serve together from the first step's new pods Ready to the last step's old
    # pods gone: at least the two later steps' loads.
    assert 2 * load >= MIN_OVERLAP_S
