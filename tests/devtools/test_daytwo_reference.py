"""The day-two replay's precise-routing reference phase (devtools/daytwo/reference_phase.py) and
what it shares with the multi-model phase (devtools/daytwo/beside.py): the stack edit, the pods'
addresses and objects, the namespaces it adds to the replay's pod network, and its lines."""

import re
from typing import Any

import pytest
import yaml

from devtools.dataplane import multimodel, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import beside, kubelet, models_phase, prometheus, reference_phase
from devtools.daytwo import run as daytwo
from tests.support import REPO, STACKS_DIR


def _makefile_default(name: str) -> str:
    match = re.search(rf"^{name} \?= (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, name
    return match.group(1).strip()


def test_the_phase_runs_the_stack_and_ranks_make_dataplane_reference_runs() -> None:
    assert _makefile_default("DATAPLANE_REFERENCE_STACK") == reference_phase.STACK
    assert _makefile_default("DATAPLANE_REFERENCE_RANKS") == str(reference_phase.RANKS_PER_POD)


def test_the_reference_moves_to_its_namespace_and_nothing_else_changes() -> None:
    text = (STACKS_DIR / f"Pulumi.{reference_phase.STACK}.yaml").read_text()
    before = yaml.safe_load(text)
    after = yaml.safe_load(beside.in_namespace(text, reference_phase.NAMESPACE))
    assert after["config"]["llmd-fleet:serving"]["namespace"] == "llm-d-reference"
    assert before["config"]["llmd-fleet:serving"].get("namespace") != "llm-d-reference"
    before["config"]["llmd-fleet:serving"]["namespace"] = "llm-d-reference"
    assert after == before
    # The multi-model phase's name for it is the same function.
    assert models_phase.in_namespace is beside.in_namespace


def _pod(name: str, role: str, labels: dict[str, str] | None = None) -> topology.Pod:
    return topology.Pod(name, role, "10.244.0.10", labels or {}, ())


def _topo(pods: list[topology.Pod], renderer: topology.Renderer | None = None) -> topology.Topology:
    picker = topology.Picker("glm52-epp", 2, (), "")
    return topology.Topology(
        "llm-d-reference", picker, {"metadata": {"name": "glm52"}}, [], pods, renderer=renderer
    )


def test_the_reference_pods_are_renumbered_below_its_render_stand_in() -> None:
    pods = [
        _pod(f"glm52-prefill-0-{i}", "prefill", {"leaderworkerset.sigs.k8s.io/name": "x", "a": "b"})
        for i in range(2)
    ]
    [topo] = beside.moved([_topo(pods)], reference_phase.FIRST_HOST, reference_phase.RENDER_HOST, "w'", "r's")
    assert [p.ip for p in topo.pods] == ["10.244.0.170", "10.244.0.171"]
    assert [p.labels for p in topo.pods] == [{"a": "b"}, {"a": "b"}]
    too_many = [
        _pod(f"p-{i}", "decode") for i in range(reference_phase.RENDER_HOST - reference_phase.FIRST_HOST + 1)
    ]
    with pytest.raises(
        ValueError,
        match="the reference pods' 26 pods reach host 195, the render stand-in's addresses start at 195",
    ):
        beside.moved(
            [_topo(too_many)],
            reference_phase.FIRST_HOST,
            reference_phase.RENDER_HOST,
            "the reference pods'",
            "the render stand-in's",
        )
    # The multi-model phase keeps its words.
    with pytest.raises(
        ValueError, match="the multi-model pools' 51 pods reach host 200, the pickers' addresses start at 200"
    ):
        models_phase.moved([_topo([_pod(f"c-{i}", "decode") for i in range(51)])], 150)


def test_the_pod_objects_are_bound_to_the_node_in_the_reference_namespace() -> None:
    [topo] = beside.moved(
        [_topo([_pod("glm52-decode-0-0", "decode", {"app": "glm52"})])], 170, 195, "w'", "r's"
    )
    [obj] = beside.pod_objects(topo, "kind-012")
    assert obj["metadata"] == {
        "name": "glm52-decode-0-0",
        "namespace": "llm-d-reference",
        "labels": {"app": "glm52"},
    }
    assert obj["spec"]["nodeName"] == "kind-012"
    assert [o["kind"] for o in beside.namespace_objects("llm-d-reference")] == ["Namespace", "ServiceAccount"]
    assert beside.namespace_objects("llm-d-reference")[1]["metadata"] == {
        "name": "default",
        "namespace": "llm-d-reference",
    }


def _render(host: str) -> topology.Renderer:
    return topology.Renderer(host, 8000, "zai-org/GLM-5.2-FP8", "zai-org/GLM-5.2-FP8")


def test_the_phase_adds_its_render_stand_in_and_pods_and_maps_both_render_services() -> None:
    ref = _topo(
        [topology.Pod("glm52-decode-0-0", "decode", "10.244.0.170", {}, ())],
        _render("glm52-tokenizer.llm-d-reference.svc"),
    )
    day_two = _topo([], _render("glm52-tokenizer.llm-d.svc"))
    # Its pickers have namespaces and addresses of their own, not the replay's (they run while
    # the alerts' fault stops and restarts the replay's).
    assert reference_phase.spaces(ref) == [
        ("render-reference", "10.244.0.195"),
        ("picker-reference-0", "10.244.0.190"),
        ("picker-reference-1", "10.244.0.191"),
        ("glm52-decode-0-0", "10.244.0.170"),
    ]
    assert reference_phase.hosts(day_two, ref) == {
        "glm52-tokenizer.llm-d.svc": dataplane.RENDER_IP,
        "glm52-tokenizer.llm-d-reference.svc": "10.244.0.195",
    }
    # No render Service: no stand-in.
    assert [name for name, _ in reference_phase.spaces(_topo([]))] == [
        "picker-reference-0",
        "picker-reference-1",
    ]
    assert not {ip for _, ip in reference_phase.spaces(ref)} & set(dataplane.PICKER_IPS)


def test_the_phases_addresses_and_veths_meet_none_of_the_replays_or_the_models() -> None:
    fixed = {
        dataplane.GATEWAY_IP,
        *dataplane.PICKER_IPS,
        dataplane.RENDER_IP,
        dataplane.CLIENT_IP,
        prometheus.IP,
    }
    hosts = set(range(reference_phase.FIRST_HOST, reference_phase.RENDER_HOST + 1))
    assert {f"{topology.POD_SUBNET}.{h}" for h in hosts}.isdisjoint(fixed)
    # The multi-model phase's 14 pods (onprem-h100-multimodel scaled) end below the reference's,
    # and the reference's render stand-in below the multi-model pickers'.
    assert models_phase.FIRST_HOST + 14 <= reference_phase.FIRST_HOST
    assert reference_phase.RENDER_HOST < multimodel.PICKER_HOST
    # Its 12 pods (onprem-h100 scaled) end below its pickers, and they below its render stand-in.
    assert min(reference_phase.PICKER_HOSTS) >= reference_phase.FIRST_HOST + 12
    assert max(reference_phase.PICKER_HOSTS) < reference_phase.RENDER_HOST
    # veths: the models' 19 namespaces below the reference's 15 (12 pods, 2 pickers, the render
    # stand-in), those below the process kubelet's.
    assert models_phase.FIRST_VETH + 19 <= reference_phase.FIRST_VETH
    assert reference_phase.FIRST_VETH + 15 <= kubelet.FIRST_VETH


def _figs(hit: float, new: float, sticky: float, ttft: float, disaggregated: int) -> dict[str, Any]:
    return {
        "hit_rate": hit,
        "new_session_hit_rate": new,
        "stickiness": sticky,
        "ttft_ms": ttft,
        "pd": {
            "fresh": {"served": 12, "disaggregated": disaggregated},
            "served": 268,
            "disaggregated": disaggregated,
            "share": disaggregated / 268,
            "prefill_on_prefill_endpoint": disaggregated,
        },
    }


def test_the_lines_are_make_dataplane_references_without_failover_and_status() -> None:
    result = {
        "bands": {},
        "rendered": {
            **_figs(0.943, 0.951, 1.0, 44, 268),
            "flow_control_not_run": "the overload wave for these engines is 2288 requests, more than the 400 "
            "the replay runs beside the twin",
        },
        "baseline": _figs(0.649, 0.642, 0.7, 61, 0),
    }
    assert reference_phase.printed(result) == [
        "hit rate: rendered 94.3% baseline 64.9%",
        "hit rate (new sessions): rendered 95.1% baseline 64.2%",
        "ttft: rendered 44 ms baseline 61 ms (median, agent turns)",
        "stickiness: 100.0%",
        "p/d: 100.0% disaggregated (268/268), prefill on a prefill endpoint 268/268",
        "flow control: not run (the overload wave for these engines is 2288 requests, more than the 400 "
        "the replay runs beside the twin)",
    ]
    # With a failover and a status in the result, they are still the replay's to print.
    with_both = {**result, "status": {"lines": ["status onprem-h100-scaled: serving"]}}
    with_both["rendered"] = {**result["rendered"], "failover": {"failed": 3, "resume_s": 1.0}}
    assert reference_phase.printed(with_both) == reference_phase.printed(result)


def test_the_detail_and_closing_lines() -> None:
    assert reference_phase.detail_line("onprem-h100-scaled", 12, 21.4) == (
        "day-two: reference: onprem-h100-scaled in namespace llm-d-reference, precise prefix routing "
        "(KV events relayed per rank): 12 pods ready in 21 s"
    )
    assert reference_phase.closing_line(97.6, [24, 23], 24) == (
        "day-two: reference: figures in 98 s; the pickers subscribed to 24, 23 of 24 ranks' KV-event "
        "streams (failover and status: the replay's own lines, from the day-two deployment)"
    )


def test_the_kv_event_streams_and_the_pickers_subscriptions() -> None:
    vllm = topology.VllmServe("m", "m", 8200, 2, None, None, None, kv_events=True, kv_role=None)
    engine = topology.Container(topology.SIMULATOR, (), (8200, 8201), vllm=vllm)
    quiet = topology.Container(topology.SIMULATOR, (), (8200,))
    pods = [
        topology.Pod("glm52-decode-0-0", "decode", "10.244.0.170", {}, (engine,)),
        topology.Pod("other", "decode", "10.244.0.171", {}, (quiet,)),
    ]
    wanted = reference_phase.streams(_topo(pods), 5557)
    assert wanted == {"tcp://10.244.0.170:5557", "tcp://10.244.0.170:5558"}
    log = "\n".join(
        [
            '{"level":"info","msg":"Connected subscriber socket","endpoint":"tcp://10.244.0.170:5558"}',
            '{"level":"info","msg":"Connected subscriber socket","endpoint":"tcp://10.244.0.170:5558"}',
            '{"level":"info","msg":"Connected subscriber socket","endpoint":"tcp://10.244.0.99:5557"}',
            "not json Connected subscriber socket",
            '{"level":"error","msg":"Failed to connect","endpoint":"tcp://10.244.0.170:5557"}',
        ]
    )
    assert reference_phase.subscribed(log, wanted) == 1
    assert reference_phase.subscribed("", wanted) == 0


def test_the_reference_runs_last_and_only_when_asked() -> None:
    assert daytwo.PHASE_ORDER[-1] == "reference"
