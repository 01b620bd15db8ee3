"""The replay's Prometheus and its live alerts (docs/day-two.md, "Prometheus and alerts"): started
before the first revision's `pulumi up` (as a cluster's Prometheus runs before a fleet is
deployed; KEDA's scale loop queries it), scraping for the rest of the replay; at the end both endpoint
pickers are stopped (no traffic runs then) until the alerts watching the router fire, and
started again until they resolve.

    alert: <AlertName> fired <T> s after <fault>, resolved <U> s after recovery

The fault's alerts are the rendered ones whose `for` (and windows) fit it: `EppLeaderMissing`
and `EppNoReadyEndpoints` (`for: 2m`). Any alert that fires before the fault is a failure of the
run (a rendered alert that fires on a healthy fleet). Every other rendered alert's expression is
evaluated by promtool over the series this run scraped (`Monitor.evaluate_offline`), one line
each: at how many evaluations it held, the longest it held, and whether its `for` was reached.
"""

import base64
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.dataplane import run as dataplane
from devtools.daytwo import operator_config, prometheus
from devtools.promtool import build as promtool
from devtools.twin.kube import ApiError

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

FAULT = "both endpoint pickers stopped"
# The rendered alerts the fault is to fire (and nothing else may fire before it).
FAULT_ALERTS = ("EppLeaderMissing", "EppNoReadyEndpoints")
# Longest wait for them: the rules' `for: 2m`, one evaluation interval, one scrape interval for
# the stale series, and a margin for a loaded machine.
FIRE_TIMEOUT_S = 120 + 30 + 15 + 45
# Longest wait for their resolution: a scrape of the restarted pickers and one evaluation, with margin.
RESOLVE_TIMEOUT_S = 15 + 30 + 45
# Longest wait, once the alerts fired, for the lease lent to a phase beside the fault to come back
# (`LeaseHandoff`): that phase's own length on a slow machine, with margin.
RETURN_TIMEOUT_S = 300.0
MONITORING = "monitoring.coreos.com/v1"


class LeaseHandoff:
    """The leader lease the fault's pickers give up, lent to a phase beside the fault that runs
    pickers of its own with the same rendering (the Responses phase, responses_phase.py): they
    would take the same Lease (the router names it after the pool). `released` is set once the
    fault's pickers have stopped (they release it at SIGTERM); the fault starts them again only
    after `returned` (the borrower's pickers stopped), so the restarted ones take it at once."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.returned = threading.Event()


def picker_deployment(run: "Replay") -> dict[str, Any]:
    return next(
        o
        for o in run.renders[0]
        if o["kind"] == "Deployment" and o["metadata"]["name"] == run.topo.picker.name
    )


def picker_pods(run: "Replay") -> list[dict[str, Any]]:
    """The picker processes as the rendered picker Deployment's pods would be: its pod template's
    labels and containers, each picker's address, Running and Ready."""
    template = picker_deployment(run)["spec"]["template"]
    return [
        {
            "metadata": {
                "name": f"{run.topo.picker.name}-{i}",
                "namespace": run.topo.namespace,
                "labels": template["metadata"]["labels"],
            },
            "spec": {
                k: template["spec"][k] for k in ("containers", "initContainers") if k in template["spec"]
            },
            "status": {
                "podIP": dataplane.PICKER_IPS[i],
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(run.topo.picker.replicas)
    ]


def reader_token(run: "Replay") -> str | None:
    """The token of the rendered metrics-reader Secret once the twin's token controller filled
    it; None before (the Secret comes with the first `pulumi up`, after Prometheus starts)."""
    for obj in run.renders[0]:
        if obj["kind"] == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
            try:
                data = run.kube.read(obj).get("data") or {}
            except ApiError:
                return None
            return base64.b64decode(data["token"]).decode() if data.get("token") else None
    return None


MONITOR_KINDS = ("PodMonitor", "ServiceMonitor")


def operator_inputs(run: "Replay") -> object:
    """What prometheus-operator reconciles a Prometheus on, for the replay's monitors: every
    PodMonitor's and ServiceMonitor's version, and whether the metrics reader's token is there
    (the Secret its ServiceMonitor reads)."""
    versions = []
    for kind in MONITOR_KINDS:
        try:
            items = run.kube.list(MONITORING, kind)
        except KeyError:  # the kind is not served yet
            items = []
        versions += sorted(
            (kind, i["metadata"]["namespace"], i["metadata"]["name"], i["metadata"]["resourceVersion"])
            for i in items
        )
    return (tuple(versions), reader_token(run) is not None)


def operator_pass(run: "Replay", binary: Path, prometheus_file: Path) -> operator_config.Generated | None:
    if not all(run.kube.served(MONITORING, kind) for kind in MONITOR_KINDS):
        return None
    return operator_config.generate(binary, run.kubeconfig, prometheus_file)


def start(run: "Replay") -> prometheus.Monitor:
    generator = operator_config.ensure()
    monitor = prometheus.Monitor(
        prometheus.ensure(),
        run.run_dir,
        run.logs,
        run.renders[0],
        lambda: run.kube.list("v1", "Pod", run.topo.namespace),
        picker_pods(run),
        picker_deployment(run)["spec"]["selector"].get("matchLabels") or {},
        lambda file: operator_pass(run, generator, file),
        lambda: operator_inputs(run),
    )
    monitor.start()
    return monitor


def scrape_problems(monitor: prometheus.Monitor, up: dict[str, tuple[int, int]]) -> list[str]:
    """Before the fault every job the operator generated has targets and the operator rejected
    nothing. (A target may be down: the tokenizer's pods are kwok's, nothing answers there.) Pure."""
    problems = [f"prometheus-operator: {w}" for w in monitor.warnings]
    for job in monitor.generated.get("scrape_configs") or []:
        if up.get(job["job_name"], (0, 0))[1] == 0:
            problems.append(f"prometheus: {job['job_name']}: no targets before the fault")
    return problems


def wait(monitor: prometheus.Monitor, done: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(1)
    return False


def pickers_down(
    run: "Replay", monitor: prometheus.Monitor, config_text: str, handoff: LeaseHandoff | None = None
) -> tuple[list[str], list[str]]:
    """The fault and its recovery, the lease lent through `handoff` meanwhile; (lines, failures)."""
    lines, failures = [], []
    early = {n for n, t in monitor.times.items() if t.fired is not None}
    if early:
        failures.append(f"alerts fired before any fault: {', '.join(sorted(early))}")
    up_before = monitor.targets_up()
    for job, (up, total) in sorted(up_before.items()):
        lines.append(f"day-two: prometheus: {job}: {up}/{total} targets up before the fault")
    failures += scrape_problems(monitor, up_before)
    lines += [f"day-two: prometheus: {e} (passed over)" for e in sorted(set(monitor.errors))]
    monitor.times.clear()
    # Stopped as a rollout stops them: SIGTERM, then their drain window up to the stop's grace
    # (one grace for both, devtools/dataplane/run.py `Processes.stop`). The fault begins at the
    # SIGTERM: a picker gives up its lease then, and its drain serves no request.
    fault_at = time.monotonic()
    try:
        run.procs.stop("picker-")
    finally:
        if handoff is not None:
            handoff.released.set()
    fired = wait(
        monitor,
        lambda: all(monitor.times.get(a, prometheus.AlertTimes()).fired for a in FAULT_ALERTS),
        FIRE_TIMEOUT_S,
    )
    if handoff is not None and not handoff.returned.wait(RETURN_TIMEOUT_S):
        failures.append(
            f"{FAULT}: the lease lent to the phase beside the fault was not returned in "
            f"{RETURN_TIMEOUT_S:.0f} s after the alerts fired"
        )
    # Recovery is the moment both pickers are started again, not the first request routed after
    # it: under load their warm-up outlasts the next scrape, and an alert that resolved before
    # "recovery" would print a negative time.
    recovered_at = time.monotonic()
    run.pickers(config_text, "restored")
    if not fired:
        silent = [a for a in FAULT_ALERTS if not monitor.times.get(a, prometheus.AlertTimes()).fired]
        failures.append(f"{FAULT}: {', '.join(silent)} did not fire in {FIRE_TIMEOUT_S} s")
    wait(
        monitor,
        lambda: all(t.resolved is not None for t in monitor.times.values() if t.fired is not None),
        RESOLVE_TIMEOUT_S,
    )
    for name, t in sorted(monitor.times.items()):
        if t.resolved is not None and t.resolved < recovered_at:
            failures.append(f"alert {name} resolved before the pickers were started again")
        line = prometheus.alert_line(name, FAULT, fault_at, recovered_at, t)
        if line is not None:
            lines.append(line)
        elif t.fired is not None:
            failures.append(
                f"alert {name} fired after '{FAULT}' and did not resolve in {RESOLVE_TIMEOUT_S} s"
            )
    live = set(FAULT_ALERTS)
    others = [a for a in prometheus.live_rules(monitor.rules, lambda r: True) if a not in live]
    try:
        lines += monitor.evaluate_offline(promtool.ensure(), others, time.time())
    except (subprocess.CalledProcessError, promtool.BuildError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        failures.append(f"promtool could not evaluate {', '.join(others)}: {detail.strip()[-300:]}")
    return lines, failures
