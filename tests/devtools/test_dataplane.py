"""The data-plane twin's pure parts: topology from a rendering, the baseline config, the replay
and the figures (the run itself is `make dataplane`)."""

import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.dataplane import netns, phases, relay, replay, report, run, scaled, topology
from tests.support import REPO

GOLDEN = REPO / "tests" / "golden" / "local-sim"


def _topology() -> topology.Topology:
    return topology.topology(GOLDEN)


def test_topology_reads_the_rendered_roles_and_picker() -> None:
    topo = _topology()
    assert [p.role for p in topo.pods] == ["prefill", "decode", "decode"]
    assert len({p.ip for p in topo.pods}) == 3
    decode = topo.role("decode")[0]
    assert [c.name for c in decode.containers] == ["routing-proxy", "simulator"]
    assert topo.picker.replicas == 2
    assert "--ha-enable-leader-election" in topo.picker.args
    assert yaml.safe_load(topo.picker.config)["kind"] == "EndpointPickerConfig"
    assert len(topology.selected(topo.pool, topo.pods)) == 3


def test_baseline_drops_only_the_cache_and_session_scorers() -> None:
    text = _topology().picker.config
    base = yaml.safe_load(run.baseline_config(text))
    rendered = yaml.safe_load(text)
    refs = {p["pluginRef"] for prof in base["schedulingProfiles"] for p in prof["plugins"]}
    assert not refs & {"prefix-cache-scorer", "session-affinity-scorer", "no-hit-lru-scorer"}
    assert "queue-scorer" in refs and "max-score-picker" in refs
    assert base["plugins"] == rendered["plugins"] and base["flowControl"] == rendered["flowControl"]


def test_picker_flags_unchanged_but_the_config_path() -> None:
    args = ("--pool-name=p", "--config-file=/config/epp.yaml", "--ha-enable-leader-election")
    assert run.picker_args(args, Path("/run/epp.yaml")) == [
        "--pool-name=p",
        "--config-file=/run/epp.yaml",
        "--ha-enable-leader-election",
    ]


def test_replay_sessions_grow_one_prefix_and_carry_client_headers() -> None:
    bands = replay.bands_of(_topology().objectives)
    assert bands == {"interactive": "agent-interactive", "subagent": "agent-subagent", "batch": "batch"}
    entries = replay.generate(replay.SHORT, "m", bands)
    assert entries == replay.generate(replay.SHORT, "m", bands)  # deterministic
    turns = sorted((e for e in entries if e["session"] == "codex-001"), key=lambda e: e["turn"])
    assert len(turns) == replay.SHORT.turns
    for a, b in itertools.pairwise(turns):
        assert b["body"]["messages"][: len(a["body"]["messages"])] == a["body"]["messages"]
    assert turns[0]["headers"]["session-id"] == "codex-001"
    assert {e["phase"] for e in entries} == {"agent", "subagent", "batch"}
    assert {e["headers"][replay.OBJECTIVE_HEADER] for e in entries} == set(bands.values())


def test_overload_is_sized_from_the_rendered_thresholds() -> None:
    cap = topology.capacity(_topology())
    # two decode pods of two data-parallel ranks, --max-num-seqs=32; six endpoints (three pods,
    # two target ports) at queueDepthThreshold 5; the admitter sheds all batch from (1/k)^(1/power),
    # which the plan puts at flow control's gate (k 1: docs/fleet-scale.md)
    assert (cap.decode_seqs, cap.endpoints, cap.queue_depth, cap.kv_threshold) == (128, 6, 5, 0.85)
    assert cap.saturating_waiting == 30 and cap.shed_at is not None and cap.shed_at == pytest.approx(1.0)
    wave = replay.flood(cap.decode_seqs, cap.saturating_waiting, cap.itl_ms)
    assert wave.count == 2 * (128 + 30)
    assert wave.max_tokens * cap.itl_ms >= 6 * wave.spread_ms  # still decoding when the tail lands
    bands = replay.bands_of(_topology().objectives)
    entries = replay.overload(replay.SHORT, wave, "m", bands)
    batch = [e for e in entries if e["phase"] == "overload"]
    assert len(batch) == wave.count and max(e["at_ms"] for e in batch) < wave.spread_ms
    assert all(e["body"]["ignore_eos"] and e["body"]["max_tokens"] == wave.max_tokens for e in batch)
    assert {e["band"] for e in entries if e["phase"] == "agent"} == {bands["interactive"]}
    fo = replay.failover(replay.SHORT, "m", bands)
    assert min(e["at_ms"] for e in fo) < replay.SHORT.failover_at_ms < max(e["at_ms"] for e in fo)


def test_saturation_as_the_detector_computes_it() -> None:
    idle = "vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.1\n"
    busy = "vllm:num_requests_waiting 10\nvllm:kv_cache_usage_perc 0.2\n"
    assert report.saturation([idle, busy], 5, 0.5) == (0.2 + 2.0) / 2
    samples = [{"t_ms": 0, "scrapes": [idle, idle]}, {"t_ms": 1000, "scrapes": [busy, busy]}]
    assert report.peak_saturation(samples, 5, 0.5) == 2.0


def test_hit_rate_is_the_counter_delta_over_all_engines() -> None:
    before = ['vllm:prefix_cache_hits{rank="0"} 10\nvllm:prefix_cache_queries{rank="0"} 100\n']
    after = [
        'vllm:prefix_cache_hits{rank="0"} 40\nvllm:prefix_cache_queries{rank="0"} 140\n'
        "# HELP x\nvllm:prefix_cache_hits_other 999\n"
    ]
    assert report.hit_rate(before, after) == 0.75
    assert report.hit_rate(before, before) is None


def _r(session: str, turn: int, dest: str, **kw: Any) -> dict[str, Any]:
    base = {
        "phase": "agent",
        "outcome": "served",
        "session": session,
        "turn": turn,
        "destination": dest,
        "prefill": "",
        "band": "i",
        "program": "p",
        "start_ms": 0.0,
        "pick_ms": 1.0,
        "picker": "p0",
        "ttft_ms": 5.0,
    }
    return {**base, **kw}


def test_new_session_hit_rate_counts_first_turns_that_share_an_earlier_prefix() -> None:
    results = [
        # program p: the first session cannot find its prefix anywhere, so it is left out
        _r("a", 0, "d1", start_ms=0.0, prompt_tokens=100, cached_tokens=0),
        _r("a", 1, "d1", start_ms=500.0, prompt_tokens=150, cached_tokens=100),  # a later turn
        _r("b", 0, "d2", start_ms=200.0, prompt_tokens=100, cached_tokens=80),
        _r("a-sub0", 0, "d1", phase="subagent", start_ms=600.0, prompt_tokens=200, cached_tokens=150),
        # program q: its first session is left out, the second counted (a miss)
        _r("c", 0, "d1", program="q", start_ms=100.0, prompt_tokens=100, cached_tokens=0),
        _r("e", 0, "d2", program="q", start_ms=300.0, prompt_tokens=100, cached_tokens=0),
        _r("batch", 0, "d2", phase="batch", program="z", start_ms=50.0, prompt_tokens=900, cached_tokens=0),
    ]
    chosen = report.new_session_requests(results)
    assert [r["session"] for r in chosen] == ["b", "e", "a-sub0"]
    assert report.token_hit_rate(chosen) == (80 + 0 + 150) / (100 + 100 + 200)
    # Requests not served, or without the engine's usage, do not count.
    assert report.token_hit_rate([{**results[2], "outcome": "failed"}]) is None
    assert report.token_hit_rate([{k: v for k, v in results[2].items() if k != "cached_tokens"}]) is None
    figs = report.figures(results, [], [], set(), {"d1", "d2"})
    assert figs["new_session_hit_rate"] == pytest.approx(230 / 400)


def test_replay_asks_the_engines_for_their_usage() -> None:
    bands = replay.bands_of(_topology().objectives)
    for e in replay.generate(replay.SHORT, "m", bands):
        assert e["body"]["stream_options"] == {"include_usage": True}


def test_stickiness_pd_failover_and_lines() -> None:
    results = [_r("a", 0, "d1"), _r("a", 1, "d1"), _r("a", 2, "d2"), _r("b", 0, "d2"), _r("b", 1, "d2")]
    assert report.stickiness(results) == 2 / 3
    pd = report.pd([_r("a", 0, "d1", prefill="p1"), _r("a", 1, "d1")], {"p1"}, {"d1"})
    assert pd["share"] == 0.5 and pd["prefill_on_prefill_endpoint"] == 1
    fo = report.failover(
        [
            _r("x", 0, "", outcome="unrouted", start_ms=1000.0),
            # refused by the stopping leader: not routed, counted as failed
            _r("w", 0, "", outcome="rejected", reason="rejected-shutting-down", start_ms=1100.0),
            _r("v", 0, "d", start_ms=1200.0, picker="old"),  # the old leader still routing
            _r("y", 0, "d", start_ms=1500.0, pick_ms=600.0),
        ],
        killed_at_ms=900.0,
        killed="old",
    )
    assert fo == {"failed": 2, "resume_s": 1.2, "causes": {"no-picker": 1, "shutting-down": 1}}
    figs = report.figures(results, [], [], {"p1"}, {"d1"})
    figs["flow_control"] = report.flow_control([])
    figs["failover"] = fo
    lines = report.lines({"rendered": figs, "baseline": figs, "bands": {"interactive": "i", "batch": "b"}})
    assert [line.split(":")[0] for line in lines] == [
        "hit rate", "hit rate (new sessions)", "ttft", "stickiness", "p/d", "flow control", "failover",
        "status",
    ]  # fmt: skip
    assert lines[7] == "status: not run"
    assert lines[1] == "hit rate (new sessions): rendered n/a baseline n/a"  # no usage recorded
    assert lines[3] == "stickiness: 66.7%"
    # F > 0: the line keeps its shape and names the upstream limit of the commonest cause (a tie:
    # the first by name).
    assert lines[6] == (
        "failover: 2 failed, 1.2 s (limit: upstream llm-d-router#2051: no picker ready during the "
        "leader hand-over)"
    )
    figs["failover"] = {**fo, "causes": {"no-picker": 1, "shutting-down": 3}, "failed": 4}
    lines = report.lines({"rendered": figs, "baseline": figs, "bands": {"interactive": "i", "batch": "b"}})
    assert lines[6].startswith("failover: 4 failed, 1.2 s (limit: upstream llm-d-router ")
    assert "pkg/epp/requestcontrol/admission.go: flow control stops at SIGTERM" in lines[6]
    # Nothing lost: no limit.
    figs["failover"] = {"failed": 0, "resume_s": 0.8, "causes": {}}
    lines = report.lines({"rendered": figs, "baseline": figs, "bands": {"interactive": "i", "batch": "b"}})
    assert lines[6] == "failover: 0 failed, 0.8 s"


def test_checks_follow_the_rendered_behaviour() -> None:
    bands = {"interactive": "i", "subagent": "s", "batch": "b"}
    pd = {"disaggregated": 2, "prefill_on_prefill_endpoint": 2, "fresh": {"served": 2, "disaggregated": 2}}
    fc = {
        "counts": {"band i": {"dispatched": 5}, "band b": {"dispatched": 3, "rejected": 4}},
        "held_median_ms": {"i": 10.0, "b": 5.0},
        "peak_saturation": 1.2,
        "shed_at": 0.32,
    }
    rendered = {
        "hit_rate": 0.5, "stickiness": 0.9, "pd": pd, "flow_control": fc,
        "failover": {"failed": 1, "resume_s": 2.0},
    }  # fmt: skip
    rendered["new_session_hit_rate"] = 0.9
    baseline = {"hit_rate": 0.3, "stickiness": 0.4, "new_session_hit_rate": 0.7}
    good = {"bands": bands, "rendered": rendered, "baseline": baseline}
    assert report.checks(good) == []
    broken = {**good, "rendered": {**rendered, "hit_rate": 0.3}}
    assert report.checks(broken) == ["the rendered config does not beat the baseline on hit rate"]
    # The broken token producer's shape: overall hit rate still ahead (session affinity), but
    # new sessions no better than the baseline's.
    blind = {**good, "rendered": {**rendered, "new_session_hit_rate": 0.5}}
    assert report.checks(blind) == [
        "the rendered config does not beat the baseline on the new sessions' hit rate"
        " (prefix reuse across sessions: 50.0% against 70.0%)"
    ]
    tied = {**good, "rendered": {**rendered, "new_session_hit_rate": 0.7}}
    assert len(report.checks(tied)) == 1
    unmeasured = {**good, "rendered": {**rendered, "new_session_hit_rate": None}}
    assert "new sessions" in report.checks(unmeasured)[0]
    quiet = {"band i": {"dispatched": 5}, "band b": {"dispatched": 7}}
    calm = {**fc, "peak_saturation": 0.1, "counts": quiet}
    failures = report.checks({**good, "rendered": {**rendered, "flow_control": calm}})
    assert [f.split(" (")[0] for f in failures] == [
        "the overload did not saturate the pool", "under overload batch did not yield"
    ]  # fmt: skip


def test_flow_control_counts_the_overload_replay_by_band_and_program() -> None:
    results = [
        _r("o1", 0, "d", phase="overload", band="b", program="q", start_ms=100.0, total_ms=50.0),
        _r("o2", 0, "", phase="overload", band="b", program="q", start_ms=110.0, outcome="rejected",
           reason="rejected-saturated"),
        _r("o3", 0, "", phase="overload", band="b", program="q", start_ms=120.0, outcome="rejected",
           reason="evicted-priority"),
        _r("a", 3, "d", start_ms=130.0, pick_ms=4.0),
    ]  # fmt: skip
    fc = report.flow_control(results)
    assert fc["counts"]["band b"] == {"dispatched": 1, "rejected": 1, "shed": 1}
    assert fc["counts"]["band i"] == {"dispatched": 1}
    assert fc["counts"]["program q"]["shed"] == 1
    assert fc["held_median_ms"]["i"] == 4.0


def test_render_stand_in_and_broken_config() -> None:
    topo = _topology()
    assert topo.renderer is not None
    assert topo.renderer.host == "glm52-tokenizer.llm-d.svc" and topo.renderer.port == 8000
    assert f"--port={topo.renderer.port}" in run.renderer_args(topo.renderer)
    broken = yaml.safe_load(run.break_render_url(topo.picker.config))
    url = next(p for p in broken["plugins"] if p["type"] == "token-producer")["parameters"]["vllm"]["url"]
    assert url == "http://glm52-tokenizer.llm-d.svc:8001"
    assert topology.pd_threshold(topo.picker.config) == 512
    shape = replay.fit(replay.SHORT, 512)
    assert shape.batch_words == 1024 and shape.turn_words <= 128
    hosts = netns.hosts_text("127.0.0.1 localhost\n", {"svc.example": "10.244.0.5"})
    assert hosts == "127.0.0.1 localhost\n10.244.0.5 svc.example\n"


def test_netns_commands_wire_each_namespace_to_the_bridge() -> None:
    commands = netns.setup_commands([("gw", "10.244.0.2"), ("pod", "10.244.0.10")])
    flat = [" ".join(c) for c in commands]
    assert flat[0] == f"ip netns add {netns.BRIDGE_NS}"
    assert f"ip -n {netns.ns_name('pod')} addr add 10.244.0.10/24 dev eth0" in flat
    assert sum("master br0" in c for c in flat) == 2
    assert all(c.startswith("ip ") for c in flat)


def test_a_run_tears_down_its_own_namespaces_and_those_of_runs_that_are_gone() -> None:
    def alive(pid: int) -> bool:
        return pid == 42

    own = "lfdp7-"
    assert netns.ours("lfdp7-gateway", own, alive)
    assert not netns.ours("lfdp42-gateway", own, alive)  # another run, still going
    assert netns.ours("lfdp43-gateway", own, alive)  # a run whose process is gone
    # Names of earlier versions (a concurrent run of one removes them itself) and anything else.
    assert not netns.ours("lfdp-gateway", own, alive)
    assert not netns.ours("cni-1234", own, alive)
    assert netns.ns_name("client").startswith(f"lfdp{os.getpid()}-")


def test_twin_cli_dispatches_dataplane(monkeypatch: pytest.MonkeyPatch) -> None:
    from devtools.twin import cli

    seen: list[tuple[str, bool, bool, bool, bool]] = []
    responses: list[bool] = []

    def fake_run(
        stack: str,
        long: bool,
        broken: bool,
        root: Path,
        kv_events: bool = False,
        broken_kv_events: bool = False,
        scaled_down: bool = False,
        ranks_per_pod: int | None = None,
        with_responses: bool = True,
    ) -> int:
        seen.append((stack, long, broken, kv_events, broken_kv_events))
        responses.append(with_responses)
        if scaled_down:
            assert ranks_per_pod == 2
        if stack == "gke-h100":
            raise topology.MappingError("container vllm: vllm serve names no model")
        return 0

    monkeypatch.setattr(phases, "main_run", fake_run)
    assert cli.main(["dataplane"]) == 2
    assert cli.main(["dataplane", "local-sim", "--broken"]) == 0
    assert cli.main(["dataplane", "quickstart-h100", "--kv-events"]) == 0
    assert cli.main(["dataplane", "local-sim", "--brokn"]) == 2  # a typo is refused, not ignored
    assert cli.main(["dataplane", "gke-h100"]) == 2  # a rendering the run cannot map: an error line
    assert cli.main(["dataplane", "local-sim", "--ranks-per-pod=0"]) == 2
    assert cli.main(["dataplane", "onprem-h100", "--scaled", "--ranks-per-pod=2"]) == 0
    assert cli.main(["dataplane", "onprem-h100", "--scaled", "--ranks-per-pod=2", "--without-responses"]) == 0
    assert seen == [
        ("local-sim", False, True, False, False),
        ("quickstart-h100", False, False, True, False),
        ("gke-h100", False, False, False, False),
        ("onprem-h100", False, False, False, False),
        ("onprem-h100", False, False, False, False),
    ]
    # The Responses phase runs unless the flag leaves it out (CI: `make day-two` runs it).
    assert responses == [True, True, True, True, False]


def test_an_unknown_stack_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack with no file is refused before anything starts: one line naming the stacks there
    are, exit 2, no traceback (the run would otherwise fail inside its rendering)."""
    from devtools.dataplane import cli

    def fake_run(*args: object, **kwargs: object) -> int:
        raise AssertionError("the run started for a stack with no file")

    monkeypatch.setattr(phases, "main_run", fake_run)
    assert cli.main(["run", "no-such-stack", "--kv-events"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("dataplane: error: no stack file stacks/Pulumi.no-such-stack.yaml (stacks: ")
    assert "local-sim" in out and out.count("\n") == 1
    assert cli.main(["run", "local-sim", "--no-such-flag"]) == 2  # flags are still read first


def test_a_twin_that_does_not_come_up_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from devtools.dataplane import cli
    from devtools.twin.cluster import TwinError

    def fake_run(*args: object, **kwargs: object) -> int:
        raise TwinError("kube-apiserver not ready after 150 s; the end of its log:\n    E1202 etcd")

    monkeypatch.setattr(phases, "main_run", fake_run)
    assert cli.main(["run", "local-sim"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dataplane: failed: kube-apiserver not ready after 150 s")
    assert "Traceback" not in err


def test_rendered_vllm_engines_become_simulators_with_mapped_arguments() -> None:
    topo = topology.topology(REPO / "tests" / "golden" / "quickstart-h100")
    # Labelled as the DisaggregatedSet and LWS controllers label them: one revision for the whole
    # set, the role, and the LeaderWorkerSet <set>-<slice>-<revision>-<role>.
    revision = topo.pods[0].labels[topology.DS_REVISION]
    assert len(revision) == 8 and all(p.labels[topology.DS_REVISION] == revision for p in topo.pods)
    assert [
        (p.role, p.labels[topology.DS_ROLE], p.labels[topology.DS_NAME], p.labels[topology.LWS_NAME])
        for p in topo.pods
    ] == [
        ("prefill", "prefill", "quickstart", f"quickstart-0-{revision}-prefill"),
        ("decode", "decode", "quickstart", f"quickstart-0-{revision}-decode"),
    ]
    prefill, decode = (next(c for c in p.containers if c.name == topology.SIMULATOR) for p in topo.pods)
    assert prefill.vllm is not None and decode.vllm is not None
    assert prefill.vllm.model == "deepseek-ai/DeepSeek-V2-Lite-Chat" and prefill.vllm.ranks == 8
    assert (prefill.vllm.kv_role, decode.vllm.kv_role) == ("kv_producer", "kv_consumer")
    assert prefill.vllm.kv_events and prefill.vllm.block_size == 64
    # Rank ports only (not the engine's other ports), where the pool and the sidecar expect them.
    assert prefill.ports == tuple(range(8000, 8008)) and decode.ports == tuple(range(8200, 8208))
    # Both rendered served names, the label form first, each its own word after the flag.
    at = decode.args.index("--served-model-name")
    assert decode.args[at + 1 : at + 3] == (
        "deepseek-ai--DeepSeek-V2-Lite-Chat",
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
    )
    assert topology.served_names(decode.args) == [
        "deepseek-ai--DeepSeek-V2-Lite-Chat",
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
    ]
    args = dict(a.removeprefix("--").split("=", 1) for a in decode.args if "=" in a)
    assert args["model"] == "deepseek-ai/DeepSeek-V2-Lite-Chat"
    assert args["port"] == "8200" and args["data-parallel-size"] == "8"
    assert args["max-num-seqs"] == "128" and args["block-size"] == "64" and args["max-model-len"] == "32768"
    assert args["kv-cache-size"] == "29009"  # the rendered approximate index's blocks per rank
    assert args["zmq-endpoint"] == "" and args["force-dummy-tokenizer"] == "true"
    assert "max-num-seqs" not in dict(a.removeprefix("--").split("=", 1) for a in prefill.args if "=" in a)
    # The sidecar is the rendered one, unchanged.
    sidecar = next(c for c in topo.pods[1].containers if c.name == "routing-proxy")
    assert "--model-server-port=8200" in sidecar.args and "--data-parallel-size=8" in sidecar.args
    assert topology.capacity(topo).decode_seqs == 8 * 128
    # local-sim renders the simulator itself: taken as rendered.
    local = _topology().pods[0].containers[0]
    assert local.vllm is None and "--zmq-endpoint=" in local.args


def test_vllm_serve_reads_plain_commands_and_refuses_what_it_cannot_map() -> None:
    plain = {"name": "e", "command": ["vllm", "serve"], "args": ["m/x", "--port", "9000", "--max-num-seqs=4"]}
    serve = topology.vllm_serve(plain)
    assert serve is not None and (serve.model, serve.port, serve.ranks, serve.max_num_seqs) == (
        "m/x",
        9000,
        1,
        4,
    )
    assert serve.served_model == "m/x" and not serve.kv_events and serve.kv_role is None
    assert topology.vllm_serve({"name": "s", "args": ["--port=8000"]}) is None
    with pytest.raises(topology.MappingError, match="names no model"):
        topology.vllm_serve({"name": "e", "command": ["vllm", "serve"], "args": ["--port=1"]})
    with pytest.raises(topology.MappingError, match="not a number"):
        topology.vllm_serve({"name": "e", "command": ["vllm", "serve", "m", "--port", "${PORT}"]})


def test_status_answer_and_gateway_address() -> None:
    ok = ["fleet      glm52 in namespace llm-d", "request    POST http://10.244.0.2/v1/chat/completions: "
          "HTTP 200 in 0.08 s: 'hello'"]  # fmt: skip
    assert run.answered(ok)
    assert not run.answered(
        ["request    POST http://x/v1/chat/completions: HTTP 200 in 0.08 s"]
    )  # no content
    assert not run.answered(["request    POST http://x/v1/chat/completions: HTTP 503 in 0.08 s: 'no'"])
    assert not run.answered(["request    POST http://x/v1/chat/completions: no answer in 5.00 s: refused"])
    assert run.gateway_status("10.244.0.2") == {
        "status": {"addresses": [{"type": "IPAddress", "value": "10.244.0.2"}]}
    }
    assert run.listener_port(_topology().gateway) == 80
    pd = {"disaggregated": 1, "prefill_on_prefill_endpoint": 1, "fresh": {"served": 1, "disaggregated": 1}}
    base = {"bands": {}, "rendered": {"hit_rate": None, "stickiness": None, "pd": pd}, "baseline": {}}
    assert report.status_lines({"lines": ok, "exit": 0}) == [f"status: {line}" for line in ok]
    unanswered = {"lines": ok[:1], "exit": 1, "answered": False}
    failures = report.checks({**base, "status": unanswered})
    assert "llmd-fleet status --request: the request through the Gateway was not answered" in " ".join(
        failures
    )
    assert not any("status" in f for f in report.checks({**base, "status": {**unanswered, "answered": True}}))


def test_overload_not_run_is_said_and_failover_still_checked() -> None:
    pd = {"disaggregated": 1, "prefill_on_prefill_endpoint": 1, "fresh": {"served": 1, "disaggregated": 1}}
    rendered = {
        "hit_rate": 0.9, "new_session_hit_rate": 0.9, "stickiness": 0.9, "ttft_ms": 5.0,
        "pd": {**pd, "served": 1, "share": 1.0},
        "flow_control_not_run": "the overload wave is 2208 requests",
        "failover": {"failed": None, "resume_s": None},
    }  # fmt: skip
    baseline = {"hit_rate": 0.5, "new_session_hit_rate": 0.5, "stickiness": 0.5, "ttft_ms": 6.0}
    rep = {"bands": {"interactive": "i", "batch": "b"}, "rendered": rendered, "baseline": baseline}
    assert "flow control: not run (the overload wave is 2208 requests)" in report.lines(rep)
    # Without the overload, no flow-control check runs, but failover is still held to resuming.
    assert report.checks(rep) == ["routing did not resume after the leader stopped"]


def test_kv_events_per_rank_processes_relays_and_broken_port() -> None:
    args = ("--model=m", "--port=8200", "--data-parallel-size=2", "--zmq-endpoint=", "--block-size=64")
    assert run.per_rank_args(args, 2, 8200, 15557) == [
        ["--model=m", "--block-size=64", "--port=8200", "--data-parallel-size=1",
         "--zmq-endpoint=tcp://127.0.0.1:15557"],
        ["--model=m", "--block-size=64", "--port=8201", "--data-parallel-size=1",
         "--zmq-endpoint=tcp://127.0.0.1:15558"],
    ]  # fmt: skip
    pairs = relay.relay_endpoints("10.244.0.11", 5557, 2, 15557)
    assert [(p.inbound, p.outbound) for p in pairs] == [
        ("tcp://127.0.0.1:15557", "tcp://10.244.0.11:5557"),
        ("tcp://127.0.0.1:15558", "tcp://10.244.0.11:5558"),
    ]
    assert relay.parse([f"{p.inbound}={p.outbound}" for p in pairs]) == pairs
    for bad in (["tcp://a:1"], ["a:1=tcp://b:2"], [], ["tcp://a:1=tcp://b:2", "tcp://a:1=tcp://c:3"]):
        with pytest.raises(ValueError, match="relay:"):
            relay.parse(bad)
    config = topology.topology(REPO / "tests" / "golden" / "quickstart-h100").picker.config
    assert topology.kv_events_socket_port(config) == 5557
    assert topology.kv_events_socket_port(run.break_kv_events_port(config)) == 6557
    assert topology.kv_events_socket_port(_topology().picker.config) is None  # local-sim: approximate
    with pytest.raises(ValueError, match="no precise prefix producer"):
        run.break_kv_events_port(_topology().picker.config)


def test_relay_forwards_a_dialling_publisher_to_a_dialling_subscriber() -> None:
    import socket
    import threading
    import time

    import zmq

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    inbound, outbound = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    threading.Thread(target=relay.serve, args=([relay.Pair(inbound, outbound)],), daemon=True).start()
    context = zmq.Context()
    publisher, subscriber = context.socket(zmq.PUB), context.socket(zmq.SUB)
    publisher.connect(inbound)  # both ends dial, as the simulator and the picker do
    subscriber.connect(outbound)
    subscriber.setsockopt(zmq.SUBSCRIBE, b"kv@")
    subscriber.setsockopt(zmq.RCVTIMEO, 200)
    frames = [b"kv@10.244.0.11@m", (7).to_bytes(8, "big"), b"payload"]
    got = None
    for _ in range(50):  # until the subscription has travelled up to the publisher
        publisher.send_multipart([b"other@x", b"", b"not subscribed"])
        publisher.send_multipart(frames)
        try:
            got = subscriber.recv_multipart()
            break
        except zmq.Again:
            time.sleep(0.05)
    assert got == frames  # whole, in order; the other topic filtered out
    publisher.close(0)
    subscriber.close(0)
    context.term()


def test_scaled_copy_keeps_roles_and_ranks_with_one_instance_each() -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-h100.yaml").read_text())
    copy = scaled.scaled_config(document)
    roles, old = (
        copy["config"]["llmd-fleet:serving"]["roles"],
        document["config"]["llmd-fleet:serving"]["roles"],
    )
    assert {n: r["instances"] for n, r in roles.items()} == {"prefill": 1, "decode": 1}
    for name in ("prefill", "decode"):  # everything else of the role as it was
        assert {k: v for k, v in roles[name].items() if k != "instances"} == {
            k: v for k, v in old[name].items() if k != "instances"
        }
    assert copy["config"]["llmd-fleet:workload"]["agents"] == 3000 // old["decode"]["instances"]
    assert copy["config"]["llmd-fleet:fleet"]["nodeGroups"]["h100"]["count"] == (
        old["prefill"]["nodesPerInstance"] + old["decode"]["nodesPerInstance"]
    )
    unchanged = {k: v for k, v in document["config"].items() if k not in ("llmd-fleet:serving",
                 "llmd-fleet:workload", "llmd-fleet:fleet")}  # fmt: skip
    assert {k: copy["config"][k] for k in unchanged} == unchanged  # router, model, target as they were
    with pytest.raises(ValueError, match=r"no llmd-fleet:serving\.roles"):
        scaled.scaled_config({"config": {}})


def test_ranks_per_pod_scales_pool_engines_and_sidecars_together() -> None:
    topo = topology.with_ranks_per_pod(topology.topology(REPO / "tests" / "golden" / "quickstart-h100"), 2)
    assert topo.pool["spec"]["targetPorts"] == [{"number": 8000}, {"number": 8001}]
    engine = next(c for c in topo.pods[1].containers if c.name == topology.SIMULATOR)
    sidecar = next(c for c in topo.pods[1].containers if c.name == "routing-proxy")
    assert engine.ports == (8200, 8201) and "--data-parallel-size=2" in engine.args
    assert engine.vllm is not None and engine.vllm.ranks == 2
    assert sidecar.ports == (8000, 8001) and "--data-parallel-size=2" in sidecar.args
    assert topology.capacity(topo).decode_seqs == 2 * 128 and topology.capacity(topo).endpoints == 4
    with pytest.raises(ValueError, match="target ports"):
        topology.with_ranks_per_pod(topo, 3)


def test_a_stopped_process_that_ignores_sigterm_is_killed_after_the_grace_given(tmp_path: Path) -> None:
    """A picker swap between two measurements waits PICKER_SWAP_GRACE_S, not the picker's whole
    drain window: a process that outlives SIGTERM goes at the grace given."""
    procs = run.Processes([])
    proc = procs.start("picker-0-x", ["sh", "-c", "trap '' TERM; echo ready; sleep 30"], tmp_path)
    log = tmp_path / "picker-0-x.log"
    deadline = time.monotonic() + 10
    while "ready" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    began = time.monotonic()
    procs.stop("picker-", grace=0.5)
    assert time.monotonic() - began < 5
    assert proc.returncode == -signal.SIGKILL
    assert procs.items == []
    assert run.PICKER_SWAP_GRACE_S < run.STOP_GRACE_S


def test_processes_stopped_together_share_one_grace(tmp_path: Path) -> None:
    """Three processes that outlive SIGTERM, stopped together, are killed once `grace` has passed
    for all of them: the stop takes about `grace`, not three times it."""
    procs = run.Processes([])
    started = [
        procs.start(f"picker-{i}", ["sh", "-c", "trap '' TERM; echo ready; sleep 30"], tmp_path)
        for i in range(3)
    ]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(
        "ready"
        in ((tmp_path / f"picker-{i}.log").read_text() if (tmp_path / f"picker-{i}.log").exists() else "")
        for i in range(3)
    ):
        time.sleep(0.05)
    began = time.monotonic()
    procs.stop("picker-", grace=1.5)
    took = time.monotonic() - began
    assert 1.4 < took < 3.0, took
    assert [p.returncode for p in started] == [-signal.SIGKILL] * 3
    assert procs.items == []
