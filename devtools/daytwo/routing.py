"""The data plane's routing figures from the day-two replay's own deployment (docs/day-two.md,
"Routing"): the pods the LWS controller made and the process kubelet runs, after revision a is
Ready and before the upgrades, measured with the data-plane twin's phases
(devtools/dataplane/phases.py `Bench`, `steady_phase`, `overload_phase`; run.py `status_check`):

1. the rendered picker config over the steady replay, then the overload wave (the day-two
   stack's fits REPLAY_MAX_WAVE; a larger one says why it is not run), then `llmd-fleet status
   --request` through the Gateway's address, as `make dataplane`;
2. the baseline config (the cache- and session-aware scorers removed) over the same replay;
3. the negative control `make dataplane-broken` runs: the token producer's render URL on a port
   nothing serves, steady replay only; the run fails unless that config fails, and for the
   reason the Makefile's `dataplane-broken` target accepts.

Before each config the kubelet restarts every pod's engines (empty caches, as `make dataplane`
starts fresh simulators per config), so no config inherits the previous one's cache.

The stack routes by approximate prefix (engine simulator cannot be rendered with precise
routing: docs/local-sim.md, "KV events"); the precise KV-event figures are the replay's reference
phase's (reference_phase.py), on onprem-h100 scaled beside this deployment.
"""

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.dataplane import netns, phases, replay, report, topology
from devtools.dataplane import run as dataplane
from devtools.twin import cluster

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# The Makefile's `dataplane-broken` reasons (DATAPLANE_BROKEN_REASON, DATAPLANE_BROKEN_ALSO; a
# test holds them equal): without tokens the picker has no prefix match information, so the new
# sessions' hit rate is no better than the baseline's, and the P/D decider disaggregates nothing.
BROKEN_REASON = "the rendered config does not beat the baseline on the new sessions' hit rate"
BROKEN_ALSO = "the P/D decider did not disaggregate"
# The largest overload wave the replay runs: the machine's budget (phases.MAX_WAVE) less what
# the replay runs beside the engines (the twin's control plane, the LWS controller, Prometheus, the
# process kubelet). Measured: a 908-request wave (day-two's decode at 32 sequences a rank) left the
# leader picker's data producers timing out (the router's 400 ms, llm-d-router v0.10.0
# pkg/epp/requestcontrol/director.go) and hundreds of requests unrouted while the engines stayed
# unsaturated; the day-two stack's decode is sized so its wave (372) fits this budget
# (stacks/Pulumi.day-two.yaml, a test holds it), and a stack whose wave does not fit says so in its
# `flow control: not run (...)` line.
REPLAY_MAX_WAVE = 400
REPLAY_BUDGET = (
    f"the replay runs beside the twin (make dataplane alone replays waves up to {phases.MAX_WAVE})"
)
# The client namespace's veth index: above the replay's Prometheus (900) and canary (910..),
# below the process kubelet's pods (1000..).
CLIENT_VETH = 950


def broken_verdict(failures: list[str]) -> tuple[str, bool]:
    """The negative control's verdict in the words of the Makefile's `dataplane-broken` target,
    and whether it holds (the broken config failed, for an expected reason). Pure."""
    if not failures:
        return "dataplane-broken: the broken config passed", False
    if any(f.startswith(BROKEN_REASON) for f in failures):
        return f"dataplane-broken: failed as it must ({BROKEN_REASON})", True
    if any(f.startswith(BROKEN_ALSO) for f in failures):
        return (
            f"dataplane-broken: failed as it must ({BROKEN_ALSO}; the new sessions' hit rate did "
            "not fall below the baseline's in this run)",
            True,
        )
    return f"dataplane-broken: failed, but not for the expected reason ({BROKEN_REASON})", False


def printed(result: dict[str, Any]) -> list[str]:
    """`make dataplane`'s lines for this result but its `failover:` line: the replay stops the
    leader picker under its own traffic and prints its own (faults_phase.py). Pure."""
    return [line for line in report.lines(result) if not line.startswith("failover:")]


def broken_detail(figs: dict[str, Any], failures: list[str]) -> str:
    """One line of what the broken config did, and what the checks found. Pure."""
    pdf = figs["pd"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    return (
        "day-two: broken config (render URL on a port nothing serves): hit rate "
        f"{pct(figs['hit_rate'])}, new sessions {pct(figs.get('new_session_hit_rate'))}, "
        f"stickiness {pct(figs['stickiness'])}, p/d {pdf['disaggregated']}/{pdf['served']}; "
        + ("; ".join(failures) or "no check failed")
    )


def measure(run: "Replay") -> tuple[list[str], list[str]]:
    """The phases above on `run`'s deployment: the printed lines (the last one its time) and the
    failures."""
    assert run.kubelet is not None
    began = time.monotonic()
    out_dir = run.run_dir / "routing"
    out_dir.mkdir(parents=True, exist_ok=True)
    # `llmd-fleet status --request` runs from a client namespace that reaches the API server
    # through a forwarder, and reads the Gateway's address from its status as its controller sets it.
    netns.attach(dataplane.CLIENT_NS, dataplane.CLIENT_IP, CLIENT_VETH)
    forwarder = netns.Forwarder(
        [dataplane.CLIENT_NS], "127.0.0.1", cluster.load_state(run.root).ports["apiserver"]
    )
    try:
        run.kube.request(
            "PATCH",
            run.kube.object_path(run.topo.gateway) + "/status",
            dataplane.gateway_status(dataplane.GATEWAY_IP),
            "application/merge-patch+json",
        )
        lines, failures = _measure(run, out_dir)
        return [*lines, f"day-two: routing figures in {time.monotonic() - began:.0f} s"], failures
    finally:
        run.procs.stop("picker-", grace=dataplane.PICKER_SWAP_GRACE_S)
        forwarder.close()
        netns.detach(dataplane.CLIENT_NS)


def _measure(run: "Replay", out_dir: Path) -> tuple[list[str], list[str]]:
    assert run.kubelet is not None
    config = run.topo.picker.config
    shape = replay.fit(replay.SHORT, topology.pd_threshold(config))
    result: dict[str, Any] = {"stack": run.stack, "bands": run.bands()}
    for tag, text in (
        ("rendered", config),
        ("baseline", dataplane.baseline_config(config)),
        ("broken", dataplane.break_render_url(config)),
    ):
        # Bare simulators, as `make dataplane` measures them (no output-id stand-in in front).
        pods = run.kubelet.restart_engines(with_mend=False)
        topo = replace(run.topo, pods=pods)
        bench = phases.Bench.of(run.procs, topo, run.bins, run.logs, out_dir, shape, run.model())
        pickers = run.pickers(text, f"routing-{tag}")
        if tag == "rendered":
            lines, code = dataplane.status_check(
                run.procs,
                run.bins,
                pickers,
                run.topo.picker,
                dataplane.listener_port(run.topo.gateway),
                run.stack,
                run.kubeconfig,
                run.root,
                run.logs,
            )
            result["status"] = {"lines": lines, "exit": code, "answered": dataplane.answered(lines)}
        figs, _samples = phases.steady_phase(bench, tag, pickers)
        if tag == "rendered":
            result["capacity"], result["flood"] = vars(bench.cap), vars(bench.wave)
            # No drain after the wave: the baseline's run restarts every engine first.
            phases.overload_phase(bench, tag, pickers, figs, REPLAY_MAX_WAVE, REPLAY_BUDGET, drain=False)
        result[tag] = figs
    broken = {"rendered": result["broken"], "baseline": result["baseline"], "bands": result["bands"]}
    broken_failures = report.checks(broken)
    verdict, held = broken_verdict(broken_failures)
    result["failures"] = report.checks(result)
    result["broken_failures"] = broken_failures
    (out_dir / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [*printed(result), broken_detail(result["broken"], broken_failures), verdict]
    return lines, [f"routing: {f}" for f in result["failures"]] + ([] if held else [verdict])
