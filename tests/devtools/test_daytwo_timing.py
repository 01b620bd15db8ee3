"""The day-two replay's arrangements in time (devtools/daytwo/run.py, alerts.py, kubelet.py,
serving.py; docs/day-two.md): the Responses phase beside the alerts' fault with the lease the fault
lends it, renderings made once in prepare, and an upgrade's measured start."""

import concurrent.futures
import subprocess
import time
import types
from pathlib import Path
from typing import Any, cast

import pytest

from devtools.dataplane import topology
from devtools.daytwo import alerts, kubelet, prometheus, serving
from devtools.daytwo import run as daytwo
from devtools.promtool import build as promtool
from llmd_fleet.cli.outdir import OUTPUT_MARKER


def test_the_lease_borrower_runs_first_beside_the_fault_and_its_lines_follow_the_alerts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A phase with pickers of its own beside the fault gets the fault's handoff and runs before
    the other phases beside it; the lines: the alerts', the borrower's, the others'."""
    order: list[str] = []

    def pickers_down(run: Any, monitor: Any, config: str, handoff: Any) -> tuple[list[str], list[str]]:
        handoff.released.set()
        assert handoff.returned.wait(10), "the borrower did not return the lease"
        order.append("pickers restarted")
        return ["alert: EppLeaderMissing fired 120.0 s after x, resolved 20.0 s after recovery"], []

    def borrower(run: Any, handoff: Any) -> tuple[list[str], list[str]]:
        assert handoff.released.wait(10)
        order.append("responses")
        handoff.returned.set()
        return ["responses: day-two: 0 failed"], ["responses: a failure"]

    def models(run: Any) -> tuple[list[str], list[str]]:
        order.append("models")
        return ["models: 0 misrouted"], []

    monkeypatch.setattr(alerts, "pickers_down", pickers_down)
    run = types.SimpleNamespace(
        topo=types.SimpleNamespace(picker=types.SimpleNamespace(config="plugins: []\n"))
    )
    both = daytwo.beside_alerts(run, None, [models], borrower)  # type: ignore[arg-type]
    assert both() == (
        [
            "alert: EppLeaderMissing fired 120.0 s after x, resolved 20.0 s after recovery",
            "responses: day-two: 0 failed",
            "models: 0 misrouted",
        ],
        ["responses: a failure"],
    )
    assert order.index("responses") < order.index("models")
    assert order.index("responses") < order.index("pickers restarted")


class _FaultRun:
    """What `alerts.pickers_down` uses of the replay and its Prometheus: stopping the pickers
    makes both fault alerts fire, starting them again resolves them; each step is recorded."""

    def __init__(self, handoff: alerts.LeaseHandoff) -> None:
        self.handoff = handoff
        self.steps: list[str] = []
        self.times: dict[str, prometheus.AlertTimes] = {}
        self.rules: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.errors: list[str] = []
        self.generated: dict[str, Any] = {}
        self.procs = types.SimpleNamespace(stop=self.stop)

    def targets_up(self) -> dict[str, tuple[int, int]]:
        return {}

    def stop(self, prefix: str) -> None:
        assert prefix == "picker-"
        self.steps.append("stopped")
        for name in alerts.FAULT_ALERTS:
            self.times[name] = prometheus.AlertTimes(fired=1.0)

    def pickers(self, config: str, tag: str) -> list[str]:
        self.steps.append(f"restarted (lease returned: {self.handoff.returned.is_set()})")
        for t in self.times.values():
            t.resolved = 10**9
        return []

    def evaluate_offline(self, promtool: Any, names: list[str], now: float) -> list[str]:
        return []


def test_the_fault_lends_its_lease_and_restarts_its_pickers_only_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handoff = alerts.LeaseHandoff()
    fake = _FaultRun(handoff)
    monkeypatch.setattr(promtool, "ensure", lambda: Path("promtool"))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fault = pool.submit(alerts.pickers_down, fake, fake, "plugins: []\n", handoff)  # type: ignore[arg-type]
        assert handoff.released.wait(10), "the fault did not say its pickers stopped"
        assert fake.steps == ["stopped"]
        time.sleep(1.5)  # the alerts have fired: the fault waits for the lease
        assert fake.steps == ["stopped"]
        handoff.returned.set()
        lines, failures = fault.result(timeout=30)
    assert fake.steps == ["stopped", "restarted (lease returned: True)"]
    assert failures == []
    assert [line.split(" fired")[0] for line in lines] == [f"alert: {a}" for a in sorted(alerts.FAULT_ALERTS)]


def test_a_rendering_the_run_made_already_is_read_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Replay.prepare` renders what the later phases read while the machine is idle; a phase's
    render of the same folder then reads it (the CLI renames a whole render into place, marker
    included), and a folder without the marker is rendered."""
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: calls.append(list(argv)))
    done = tmp_path / "render-canary-20"
    done.mkdir()
    (done / OUTPUT_MARKER).write_text("rendered\n")
    serving.rendered_into(tmp_path / "stacks", "day-two", done)
    assert calls == []
    serving.rendered_into(tmp_path / "stacks", "day-two", tmp_path / "render-canary-0")
    assert [argv[1:] for argv in calls] == [
        [
            "--stacks-dir",
            str(tmp_path / "stacks"),
            "render",
            "day-two",
            "--out",
            str(tmp_path / "render-canary-0"),
        ]
    ]


def test_an_upgrade_whose_new_revision_serves_before_the_lead_fails() -> None:
    """The measured window must hold the old revision serving alone for LEAD_S first: the new
    revision's first Ready pod, not the engine's patch, is what changes what serves (the patch
    can come at once when `pulumi up` is quick; a pod then still loads)."""
    began = 100.0
    assert daytwo.lead_problem("screener-on", "aaaa", "bbbb", began, began + 16.3) is None
    assert daytwo.lead_problem("screener-on", "aaaa", "bbbb", began, began + serving.LEAD_S) is None
    problem = daytwo.lead_problem("screener-on", "aaaa", "bbbb", began, began + 5.0)
    assert problem == (
        "screener-on: revision bbbb served 5.0 s after the steady traffic began, before 8 s of it "
        "against revision aaaa alone: the rollout's start is not measured"
    )
    assert daytwo.lead_problem("screener-off", "bbbb", "cccc", began, None) == (
        "screener-off: no pod of revision cccc turned Ready in the process kubelet"
    )


def test_the_kubelet_says_when_a_revision_first_served() -> None:
    pods = {}
    for uid, revision, started, ready_s in (
        ("u1", "aaaa", 10.0, 15.2),
        ("u2", "bbbb", 40.0, 15.4),
        ("u3", "bbbb", 38.0, 15.1),
        ("u4", "bbbb", 50.0, None),
    ):
        pod = topology.Pod(uid, "decode", "10.244.0.9", {topology.DS_REVISION: revision}, ())
        pods[uid] = kubelet.PodRun(uid, uid, pod.ip, pod, cast(Any, None), started, [], ready_s=ready_s)
    k = kubelet.ProcessKubelet(cast(Any, None), cast(Any, None), frozenset(), {}, Path("."), 15.0, pods=pods)
    assert k.first_ready("bbbb") == 38.0 + 15.1
    assert k.first_ready("aaaa") == 25.2
    assert k.first_ready("cccc") is None
