"""The day-two replay's Responses and multi-model phases (docs/day-two.md): the stack edit that
puts the multi-model reference in a namespace of its own, its pods' addresses, the namespaces each
phase adds to the replay's pod network, what the phase reads of the upstream, and the process
kubelet's output-id stand-in."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.dataplane import multimodel, netns, responses, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import canary_phase, kubelet, models_phase, prometheus, reference_phase, responses_phase
from devtools.twin import cluster
from tests.support import STACKS_DIR


def _pods(n: int, prefix: str) -> list[topology.Pod]:
    return [topology.Pod(f"{prefix}-{i}", "decode", f"10.244.0.{10 + i}", {}, ()) for i in range(n)]


def _topo(pods: list[topology.Pod]) -> topology.Topology:
    picker = topology.Picker("epp", 1, (), "")
    return topology.Topology("llm-d", picker, {"metadata": {"name": "p"}}, [], pods)


def test_every_model_of_the_multi_model_reference_moves_to_the_namespace_and_nothing_else_changes() -> None:
    text = (STACKS_DIR / "Pulumi.onprem-h100-multimodel.yaml").read_text()
    before = yaml.safe_load(text)
    after = yaml.safe_load(models_phase.in_namespace(text, "llm-d-models"))
    models = after["config"]["llmd-fleet:models"]
    assert len(models) == 2
    assert [m["serving"]["namespace"] for m in models] == ["llm-d-models", "llm-d-models"]
    for m in before["config"]["llmd-fleet:models"]:
        m["serving"]["namespace"] = "llm-d-models"
    assert after == before
    # A single-model stack: its one serving section.
    one = yaml.safe_load(
        models_phase.in_namespace((STACKS_DIR / "Pulumi.day-two.yaml").read_text(), "elsewhere")
    )
    assert one["config"]["llmd-fleet:serving"]["namespace"] == "elsewhere"


def test_the_multi_model_pods_are_renumbered_in_order_across_pools() -> None:
    pools = [_topo(_pods(3, "a")), _topo(_pods(2, "b"))]
    out = models_phase.moved(pools, 150)
    assert [(p.name, p.ip) for t in out for p in t.pods] == [
        ("a-0", "10.244.0.150"),
        ("a-1", "10.244.0.151"),
        ("a-2", "10.244.0.152"),
        ("b-0", "10.244.0.153"),
        ("b-1", "10.244.0.154"),
    ]
    assert [p.ip for p in pools[0].pods] == ["10.244.0.10", "10.244.0.11", "10.244.0.12"]  # not edited
    # The LeaderWorkerSet labels go (the LWS pod webhook would refuse the pods), the others stay.
    labelled = topology.Pod(
        "x-0", "decode", "10.244.0.9", {"leaderworkerset.sigs.k8s.io/name": "x", "app": "x"}, ()
    )
    assert models_phase.moved([_topo([labelled])], 150)[0].pods[0].labels == {"app": "x"}
    with pytest.raises(ValueError, match="pickers' addresses start at 200"):
        models_phase.moved([_topo(_pods(51, "c"))], 150)


def test_only_the_namespaces_the_replay_lacks_are_added() -> None:
    spaces = [("gateway", "10.244.0.2"), ("bbr", "10.244.0.7"), ("picker-glm52-0", "10.244.0.200")]
    existing = {netns.ns_name("gateway"), netns.ns_name("picker-0")}
    assert models_phase.new_spaces(spaces, existing) == spaces[1:]


def _replay_fixed() -> set[str]:
    """The addresses the day-two replay holds while its phases run."""
    return {
        dataplane.GATEWAY_IP,
        *dataplane.PICKER_IPS,
        dataplane.RENDER_IP,
        prometheus.IP,
    }


def test_the_phases_addresses_and_veths_meet_none_of_the_replays() -> None:
    agentic = responses.Rendered({}, {}, 2, 8080, "agentic-api-upstream.llm-d.svc", 80, 1024, "u", "d")
    resp = dict(responses_phase.phase_spaces(agentic))
    assert list(resp) == ["client", "db", "agentic-0", "agentic-1"]
    assert set(resp.values()).isdisjoint(_replay_fixed())
    # The process kubelet's addresses (from FIRST_POD_HOST) stay below the multi-model pods'.
    assert topology.FIRST_POD_HOST < models_phase.FIRST_HOST
    models = {multimodel.BBR_IP, f"{topology.POD_SUBNET}.{multimodel.PICKER_HOST}"}
    models |= {f"{topology.POD_SUBNET}.{multimodel.RENDER_HOST}"}
    assert models.isdisjoint(_replay_fixed())
    # veths: the canary's below the Responses phase's, its below the models', both below the kubelet's.
    assert canary_phase.CANARY_FIRST_VETH + 10 <= responses_phase.FIRST_VETH
    assert responses_phase.FIRST_VETH + len(resp) <= models_phase.FIRST_VETH
    assert models_phase.FIRST_VETH + 40 <= kubelet.FIRST_VETH
    assert prometheus.VETH < canary_phase.CANARY_FIRST_VETH
    # Beside the alerts' fault the phase adds its own two pickers: after its other namespaces,
    # below the multi-model phase's, at addresses no other phase and none of the replay's holds.
    own = dict(responses_phase.picker_spaces(2))
    assert responses_phase.FIRST_VETH + len(resp) <= responses_phase.PICKER_FIRST_VETH
    assert responses_phase.PICKER_FIRST_VETH + len(own) <= models_phase.FIRST_VETH
    hosts = {int(ip.rsplit(".", 1)[1]) for ip in own.values()}
    assert set(own.values()).isdisjoint(_replay_fixed() | set(resp.values()) | models)
    assert max(hosts) < canary_phase.CANARY_FIRST_HOST
    assert min(hosts) > reference_phase.RENDER_HOST
    assert not hosts & {multimodel.PICKER_HOST + i for i in range(8)}
    assert set(own).isdisjoint({f"picker-{i}" for i in range(2)})
    with pytest.raises(ValueError, match="3 pickers, 2 addresses"):
        responses_phase.picker_spaces(3)


def test_the_upstream_figures_read_the_gateway_stand_ins_records() -> None:
    upstream: list[dict[str, Any]] = [
        {"host": "agentic-api-upstream.llm-d.svc", "path": "/health", "status": 200},
        {"host": "agentic-api-upstream.llm-d.svc", "path": "/health", "status": 503},
        {"host": "agentic-api-upstream.llm-d.svc", "path": "/v1/responses", "status": 200},
        {"host": "elsewhere", "path": "/v1/responses?x=1", "status": 200},
    ]
    f = responses_phase.upstream_figures(upstream, "agentic-api-upstream.llm-d.svc", 80)
    assert f == {
        "requests": 4,
        "hosts": ["agentic-api-upstream.llm-d.svc", "elsewhere"],
        "health": 1,
        "responses": 2,
        "rendered_host": "agentic-api-upstream.llm-d.svc",
    }
    # responses.checks fails a host the rendering does not name, and names it.
    assert any("elsewhere" in c for c in responses.checks(_passing_result(f)))
    assert responses_phase.upstream_figures([], "h", 8000)["rendered_host"] == "h:8000"


def _passing_result(upstream: dict[str, Any]) -> dict[str, Any]:
    main = {"chains": 6, "turns": 36, "failed": 0, "intact": 36, "continued_elsewhere": 30, "stickiness": 0.1}
    return {
        "main": main,
        "loss": {"failed": 0, "in_flight": 0, "chains": 6, "continued": 6, "requests": 24},
        "database": {"failed": 6, "requests": 26, "seconds": 41, "recovered": True},
        "negative": {"cross": 6, "failed": 6},
        "statuses": dict(responses.EXPECTED_STATUS),
        "upstream": upstream,
    }


def test_each_pod_has_its_record_file() -> None:
    assert responses_phase.record_files(Path("/r"), ["b", "a"]) == [Path("/r/a.jsonl"), Path("/r/b.jsonl")]


class _Kube:
    def __init__(self) -> None:
        self.patched: list[str] = []

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> dict[str, Any]:
        self.patched.append(path)
        return {}


def test_the_process_kubelet_puts_the_output_id_stand_in_in_front_only_once_told(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[Path | None] = []
    monkeypatch.setattr(netns, "attach", lambda *a: None)
    monkeypatch.setattr(
        dataplane, "start_pods", lambda procs, topo, bins, logs, **kw: started.append(kw.get("mend"))
    )

    def pod(uid: str) -> dict[str, Any]:
        return {
            "metadata": {"name": f"glm52-decode-{uid}", "namespace": "llm-d", "uid": uid, "labels": {}},
            "spec": {"nodeName": "kind-000", "containers": [{"name": "routing-proxy", "ports": []}]},
        }

    records = tmp_path / "records"
    k = kubelet.ProcessKubelet(
        lambda: None,  # type: ignore[arg-type,return-value]
        _topo([]),
        frozenset({"kind-000"}),
        {},
        tmp_path,
        1.0,
        mend=records,
        say=lambda line: None,
    )
    # Bare at first: the pickers read every rank's metrics through the stand-in, which costs the
    # machine CPU in every phase that does not read its records.
    k._run(_Kube(), pod("u1"))  # type: ignore[arg-type]
    assert started == [None] and not k.all_mended()
    for state in k.pods.values():
        state.procs = dataplane.Processes([])
    # The Responses phase's restart puts it in front of the running pods and of every later one;
    # the routing phase's bare restart takes it away again.
    k.restart_engines(timeout=1.0, with_mend=True)
    k._run(_Kube(), pod("u2"))  # type: ignore[arg-type]
    assert started == [None, records, records] and k.all_mended()
    for state in k.pods.values():
        state.procs = dataplane.Processes([])
    k.restart_engines(timeout=1.0, with_mend=False)
    k._run(_Kube(), pod("u3"))  # type: ignore[arg-type]
    assert started[3:] == [None, None, None] and not k.all_mended()
    # Without a record folder there is no stand-in to put anywhere.
    bare = kubelet.ProcessKubelet(
        lambda: None,  # type: ignore[arg-type,return-value]
        _topo([]),
        frozenset({"kind-000"}),
        {},
        tmp_path,
        1.0,
        say=lambda line: None,
    )
    bare._run(_Kube(), pod("u4"))  # type: ignore[arg-type]
    for state in bare.pods.values():
        state.procs = dataplane.Processes([])
    bare.restart_engines(timeout=1.0, with_mend=True)
    assert started[6:] == [None, None]


class _Procs:
    def __init__(self) -> None:
        self.started: dict[str, list[str]] = {}

    def start(self, name: str, argv: list[str], logs: Path, env: dict[str, str] | None = None) -> None:
        self.started[name] = argv


def test_a_rendered_simulator_engine_gets_the_output_id_stand_in_on_its_rank_ports(tmp_path: Path) -> None:
    """engine simulator (day-two): no `vllm serve` to map, the rendered simulator's ports are its
    rank ports; it moves MEND_OFFSET up and the stand-in serves them."""
    sim = topology.Container(topology.SIMULATOR, ("--port=8000", "--data-parallel-size=2"), (8000, 8001))
    pod = topology.Pod("glm52-prefill-0", "prefill", "10.244.0.10", {}, (sim,))
    procs = _Procs()
    bins = {"simulator": Path("/bin/sim"), "pd-sidecar": Path("/bin/pd")}
    records = dataplane.start_pods(procs, _topo([pod]), bins, tmp_path, mend=tmp_path)  # type: ignore[arg-type]
    assert records == [tmp_path / "glm52-prefill-0.jsonl"]
    assert procs.started["pod-glm52-prefill-0-mend"][-2:] == ["8000=28000", "8001=28001"]
    assert "--port=28000" in procs.started["pod-glm52-prefill-0-simulator"]
    # Without the folder: no stand-in, the simulator on its rendered port.
    procs = _Procs()
    assert dataplane.start_pods(procs, _topo([pod]), bins, tmp_path) == []  # type: ignore[arg-type]
    assert list(procs.started) == ["pod-glm52-prefill-0-simulator"]
    assert "--port=8000" in procs.started["pod-glm52-prefill-0-simulator"]


def test_the_multi_model_pods_go_to_a_kubelet_node_that_is_still_there() -> None:
    nodes = frozenset({"kind-000", "kind-011", "kind-012"})
    assert models_phase.pod_node(nodes, set(), {"kind-000", "kind-011", "kind-012", "ctl"}) == "kind-012"
    # The lost node (deleted with its pods) and one the twin no longer has are passed over.
    assert models_phase.pod_node(nodes, {"kind-012"}, {"kind-000", "kind-011", "kind-012"}) == "kind-011"
    assert models_phase.pod_node(nodes, set(), {"kind-000"}) == "kind-000"
    with pytest.raises(cluster.TwinError, match="no node"):
        models_phase.pod_node(nodes, set(), {"ctl"})


def test_the_models_phase_says_how_many_decode_endpoints_answered_before_the_measured_requests() -> None:
    result = {"warm_seconds": 3, "endpoints": {"decode": 18, "prefill": 10, "seconds": 4.4}}
    assert models_phase.details(result, "onprem-h100-multimodel-scaled", 14, "kind-012") == [
        "day-two: models: onprem-h100-multimodel-scaled in namespace llm-d-models of the replay's twin, "
        "14 pods on kind-012, a request per model and adapter routed 3 s after",
        "day-two: models: 18 decode endpoints answered before the measured requests (4 s)",
    ]


class _PickerProcs:
    """What `start_pickers` asked to start: (name, argv, env) per process."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str], dict[str, str] | None]] = []

    def start(self, name: str, argv: list[str], logs: Path, env: dict[str, str] | None = None) -> None:
        self.started.append((name, argv, env))


def test_pickers_start_in_the_namespaces_given_and_the_gateway_probes_them_there(tmp_path: Path) -> None:
    picker = topology.Picker("glm52-epp", 2, ("--grpc-port=9002", "--grpc-health-port=9003"), "plugins: []\n")
    topo = topology.Topology("llm-d-reference", picker, {"metadata": {"name": "p"}}, [], [])
    spaces = [("picker-reference-0", "10.244.0.190"), ("picker-reference-1", "10.244.0.191")]
    bins = {"epp": tmp_path / "epp", "gateway": tmp_path / "gateway"}

    def start(procs: _PickerProcs, spaces: list[tuple[str, str]] | None = None) -> list[str]:
        return dataplane.start_pickers(
            procs,  # type: ignore[arg-type]
            topo,
            picker.config,
            bins,
            tmp_path,
            tmp_path / "kubeconfig",
            tmp_path,
            "rendered",
            spaces,
        )

    procs = _PickerProcs()
    addresses = start(procs, spaces)
    assert addresses == ["10.244.0.190:9002", "10.244.0.191:9002"]
    # Process names are the replay's (a phase stops its pickers by the `picker-` prefix), the
    # namespaces the given ones.
    assert [name for name, _, _ in procs.started] == ["picker-0-rendered", "picker-1-rendered"]
    for (_, argv, env), (space, _ip) in zip(procs.started, spaces, strict=True):
        assert argv[:4] == ["ip", "netns", "exec", netns.ns_name(space)]
        assert env is not None and env["NAMESPACE"] == "llm-d-reference"
    # The gateway stand-in probes each picker's health port at that picker's own address.
    argv = dataplane.gateway_argv(bins, addresses, picker, "--replay=x")
    assert "--health=10.244.0.190:9003,10.244.0.191:9003" in argv
    # Without spaces: the replay's own namespaces and addresses.
    procs = _PickerProcs()
    default = start(procs)
    assert default == [f"{ip}:9002" for ip in dataplane.PICKER_IPS]
    assert [argv[3] for _, argv, _ in procs.started] == [netns.ns_name("picker-0"), netns.ns_name("picker-1")]
    # Fewer namespaces than replicas: refused, not a picker left without one.
    with pytest.raises(ValueError, match="2 pickers need as many namespaces, 1 given"):
        start(_PickerProcs(), spaces[:1])


def test_one_picker_a_fault_stopped_starts_again_at_its_own_address(tmp_path: Path) -> None:
    picker = topology.Picker("glm52-epp", 2, ("--grpc-port=9002",), "plugins: []\n")
    topo = topology.Topology("llm-d", picker, {"metadata": {"name": "p"}}, [], [])
    procs = _PickerProcs()
    addresses = dataplane.start_pickers(
        procs,  # type: ignore[arg-type]
        topo,
        picker.config,
        {"epp": tmp_path / "epp"},
        tmp_path,
        tmp_path / "kubeconfig",
        tmp_path,
        "faults",
        only={1},
    )
    assert addresses == [f"{ip}:9002" for ip in dataplane.PICKER_IPS[:2]]
    ((name, argv, env),) = procs.started
    assert name == "picker-1-faults" and argv[3] == netns.ns_name("picker-1")
    assert env is not None and env["POD_NAME"] == "glm52-epp-1"


class _Proc:
    def __init__(self, alive: bool = True) -> None:
        self.alive = alive

    def poll(self) -> int | None:
        return None if self.alive else 0


def test_the_replay_keeps_running_pickers_with_the_config_asked_for_and_replaces_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A phase that asks for the config the pickers run gets them as they are; a different config,
    or a picker that stopped (a fault, a phase's own stop), restarts them all."""
    from devtools.dataplane import replay as replay_module
    from devtools.daytwo import figures
    from devtools.daytwo import run as daytwo

    picker = topology.Picker("glm52-epp", 2, ("--grpc-port=9002",), "plugins: []\n")
    replay = daytwo.Replay(tmp_path, "day-two", 15.0)
    replay.topo = topology.Topology("llm-d", picker, {"metadata": {"name": "p"}}, [], [])
    replay.bins, replay.kubeconfig, replay.logs = {}, tmp_path / "kubeconfig", tmp_path
    replay.run_dir.mkdir(parents=True)
    starts: list[str] = []
    stops: list[str] = []

    def start_pickers(procs: Any, topo: Any, config: str, *args: Any, **kwargs: Any) -> list[str]:
        starts.append(config)
        procs.items[:] = [(n, p) for n, p in procs.items if not n.startswith("picker-")]
        procs.items += [(f"picker-{i}-x", _Proc()) for i in range(2)]
        return ["a:1", "b:1"]

    monkeypatch.setattr(dataplane, "start_pickers", start_pickers)
    monkeypatch.setattr(replay.procs, "stop", lambda prefix="", grace=0.0: stops.append(prefix))
    monkeypatch.setattr(figures, "steady", lambda *a: [{"id": "x", "session": "s"}])
    monkeypatch.setattr(replay_module, "write", lambda entries: "")
    monkeypatch.setattr(dataplane, "run_replay", lambda *a: [{"outcome": "served"}])
    monkeypatch.setattr(daytwo.Replay, "model", lambda self: "m")
    monkeypatch.setattr(daytwo.Replay, "bands", lambda self: {})

    assert replay.pickers("rendered", "one") == ["a:1", "b:1"]
    assert replay.pickers("rendered", "two") == ["a:1", "b:1"]
    assert starts == ["rendered"]
    assert replay.pickers("no gating", "three") == ["a:1", "b:1"]
    assert starts == ["rendered", "no gating"] and stops == ["picker-", "picker-"]
    # One of them stopped (the failover): all are started again, even for the same config.
    replay.procs.items[0][1].alive = False  # type: ignore[attr-defined]
    replay.pickers("no gating", "four")
    assert starts == ["rendered", "no gating", "no gating"]
