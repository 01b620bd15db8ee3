"""The day-two replay's routing figures (devtools/daytwo/routing.py) and the data-plane phases
it shares with `make dataplane` (devtools/dataplane/phases.py)."""

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.dataplane import phases, replay, report, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import routing
from tests.support import REPO


def _makefile_value(name: str) -> str:
    match = re.search(rf"^{name} := (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, name
    return match.group(1).strip()


def test_broken_reasons_are_the_makefiles() -> None:
    """The replay's verdict is worded as `make dataplane-broken`'s: the same two reasons."""
    assert _makefile_value("DATAPLANE_BROKEN_REASON") == routing.BROKEN_REASON
    assert _makefile_value("DATAPLANE_BROKEN_ALSO") == routing.BROKEN_ALSO


def _figs(hit: float, new: float, sticky: float, disaggregated: int) -> dict[str, Any]:
    return {
        "hit_rate": hit,
        "new_session_hit_rate": new,
        "stickiness": sticky,
        "pd": {
            "fresh": {"served": 12, "disaggregated": disaggregated},
            "served": 268,
            "disaggregated": disaggregated,
            "share": disaggregated / 268,
            "prefill_on_prefill_endpoint": disaggregated,
        },
    }


def test_broken_verdict_from_the_checks_the_run_makes() -> None:
    baseline = _figs(0.80, 0.80, 0.75, 0)
    # What a broken token producer does: no prefix match, nothing disaggregated.
    broken = {"rendered": _figs(0.86, 0.68, 0.79, 0), "baseline": baseline, "bands": {}}
    line, held = routing.broken_verdict(report.checks(broken))
    assert line == (
        "dataplane-broken: failed as it must (the rendered config does not beat the baseline "
        "on the new sessions' hit rate)"
    )
    assert held
    # Chance favours the broken config on new sessions: it fails on P/D only, accepted and said so.
    lucky = {"rendered": _figs(0.86, 0.85, 0.79, 0), "baseline": baseline, "bands": {}}
    line, held = routing.broken_verdict(report.checks(lucky))
    assert held and line.startswith("dataplane-broken: failed as it must (the P/D decider did not")
    # A config that routes as rendered passes: the negative control does not hold.
    working = {"rendered": _figs(0.92, 0.95, 1.0, 12), "baseline": baseline, "bands": {}}
    assert routing.broken_verdict(report.checks(working)) == (
        "dataplane-broken: the broken config passed",
        False,
    )


def test_broken_verdict_for_another_failure() -> None:
    line, held = routing.broken_verdict(["a prefill went to an endpoint that is not a prefill endpoint"])
    assert not held
    assert line == (
        "dataplane-broken: failed, but not for the expected reason (the rendered config does not "
        "beat the baseline on the new sessions' hit rate)"
    )


def test_printed_lines_leave_failover_to_the_replay() -> None:
    result = {
        "bands": {},
        "rendered": {**_figs(0.919, 0.957, 1.0, 14), "ttft_ms": 29, "flow_control_not_run": "why"},
        "baseline": {**_figs(0.81, 0.826, 0.7, 0), "ttft_ms": 37},
        "status": {"lines": ["status local-sim: serving"]},
    }
    lines = routing.printed(result)
    assert not [x for x in lines if x.startswith("failover")]
    assert lines[0] == "hit rate: rendered 91.9% baseline 81.0%"
    assert "flow control: not run (why)" in lines
    assert lines[-1] == "status: status local-sim: serving"


def _pod(name: str, role: str, ip: str, sidecar: bool) -> topology.Pod:
    containers = [topology.Container(topology.SIMULATOR, (), (8200, 8201))]
    if sidecar:
        containers.append(topology.Container("routing-proxy", (), (8000, 8001)))
    return topology.Pod(name, role, ip, {}, tuple(containers))


def test_endpoint_sets_from_the_pods() -> None:
    pods = [
        _pod("p-0", "prefill", "10.244.0.10", False),
        _pod("d-0", "decode", "10.244.0.11", True),
    ]
    scrape, prefill, decode = phases.endpoint_sets(pods)
    assert scrape == [
        "http://10.244.0.10:8200/metrics",
        "http://10.244.0.10:8201/metrics",
        "http://10.244.0.11:8200/metrics",
        "http://10.244.0.11:8201/metrics",
    ]
    assert prefill == {"10.244.0.10:8200", "10.244.0.10:8201"}
    assert decode == {"10.244.0.11:8000", "10.244.0.11:8001"}


def test_overload_over_the_machines_budget_is_not_run(tmp_path: Path) -> None:
    """A wave over MAX_WAVE replays nothing and says why, in `make dataplane`'s words."""
    cap = topology.Capacity(2208, 2, 5, 0.85, 1.0, 20.0)
    bench = phases.Bench(
        dataplane.Processes([]),
        {},
        tmp_path,
        tmp_path,
        topology.Picker("epp", 2, (), ""),
        cap,
        replay.Flood(phases.MAX_WAVE + 1, 1000, 300),
        {},
        [],
        set(),
        set(),
    )
    figs: dict[str, Any] = {}
    assert phases.overload_phase(bench, "rendered", [], figs) == []
    assert figs == {
        "flow_control_not_run": f"the overload wave for these engines is {phases.MAX_WAVE + 1} "
        f"requests, more than the {phases.MAX_WAVE} this machine replays"
    }
    assert not (tmp_path / "rendered").exists()


@pytest.mark.parametrize("names", [("steady",), ("steady", "overload", "failover")])
def test_bench_writes_the_replay_files_of_its_phases(tmp_path: Path, names: tuple[str, ...]) -> None:
    topo = topology.topology(REPO / "tests" / "golden" / "local-sim")
    bench = phases.Bench.of(
        dataplane.Processes([]), topo, {}, tmp_path, tmp_path, replay.SHORT, "model", names
    )
    assert sorted(bench.files) == sorted(names)
    assert bench.files["steady"].read_text() == replay.write(
        replay.generate(replay.SHORT, "model", replay.bands_of(topo.objectives))
    )
    assert bench.wave == replay.flood(bench.cap.decode_seqs, bench.cap.saturating_waiting, bench.cap.itl_ms)


def test_the_replay_s_wave_budget_is_below_the_machine_s_and_says_whose(tmp_path: Path) -> None:
    """A wave the machine would replay alone (under MAX_WAVE) but over the replay's budget is not
    run inside the replay, and its reason names the replay's budget and where flow control runs."""
    assert routing.REPLAY_MAX_WAVE < phases.MAX_WAVE
    count = routing.REPLAY_MAX_WAVE + 1
    bench = phases.Bench(
        dataplane.Processes([]),
        {},
        tmp_path,
        tmp_path,
        topology.Picker("epp", 2, (), ""),
        topology.Capacity(2208, 2, 5, 0.85, 1.0, 20.0),
        replay.Flood(count, 1000, 300),
        {},
        [],
        set(),
        set(),
    )
    figs: dict[str, Any] = {}
    assert (
        phases.overload_phase(bench, "rendered", [], figs, routing.REPLAY_MAX_WAVE, routing.REPLAY_BUDGET)
        == []
    )
    assert figs["flow_control_not_run"] == (
        f"the overload wave for these engines is {count} requests, more than the "
        f"{routing.REPLAY_MAX_WAVE} {routing.REPLAY_BUDGET}"
    )
    assert "make dataplane" in routing.REPLAY_BUDGET and "local-sim" not in routing.REPLAY_BUDGET


def test_the_day_two_stack_s_wave_fits_the_replay_s_budget() -> None:
    """The day-two stack declares engines whose overload wave the replay runs beside the twin, so
    its routing phase prints a measured `flow control:` line: the wave from the rendered engines
    is the formula over the stack file's roles (2 x (decode sequences + the saturating queue)),
    and within REPLAY_MAX_WAVE."""
    stack = yaml.safe_load((REPO / "stacks" / "Pulumi.day-two.yaml").read_text())
    roles = stack["config"]["llmd-fleet:serving"]["roles"]
    decode = roles["decode"]
    seqs = decode["instances"] * decode["dataParallel"] * decode["maxNumSeqs"]
    # One endpoint per data-parallel rank, in every instance of both roles.
    endpoints = sum(r["instances"] * r["dataParallel"] for r in roles.values())
    # The rendered engines and thresholds; the endpoints are the deployment's, where prefill runs
    # its minimum of 3 instances (the static rendering's autoscaled role has no replica count).
    rendered = topology.capacity(topology.topology(REPO / "tests" / "golden" / "day-two"))
    assert (rendered.decode_seqs, rendered.queue_depth) == (seqs, 5)
    cap = replace(rendered, endpoints=endpoints)
    wave = replay.flood(cap.decode_seqs, cap.saturating_waiting, cap.itl_ms)
    assert wave.count == 2 * (seqs + 5 * endpoints) == 2 * (3 * 4 * 8 + 5 * 18)
    assert wave.count <= routing.REPLAY_MAX_WAVE
