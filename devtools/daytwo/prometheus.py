"""The day-two replay's Prometheus (docs/day-two.md, "Prometheus and alerts"): a real Prometheus,
built from the Prometheus module promtool is built from, scraping the twin's serving pods and
endpoint pickers as the rendered PodMonitors and ServiceMonitors say, evaluating the rendered
PrometheusRule, and watching its alerts fire and resolve.

Building: `cmd/prometheus` of `github.com/prometheus/prometheus` at `[tools].promtool` of
images/versions.toml, from the wrapper module devtools/daytwo/prometheus_gomod (the promtool
wrapper's directives, tidied for cmd/prometheus), with Prometheus' own `remove_all_sd` build tag
(the file and HTTP discovery it keeps are all this needs), into
`<cache>/prometheus-<version>-<key>/prometheus` like promtool (devtools/promtool/build.py).

Scrape configuration: prometheus-operator's own resource selector and config generator, run
against the twin's API server whenever the monitors or the Secrets they read change
(operator_config.py), with Kubernetes discovery given as file discovery (discovery.py). The
targets files are rewritten from the twin's API server as the process kubelet gives pods their
addresses; the picker processes stand where the rendered picker Deployment's pods would be.
"""

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools import tool_cache
from devtools.dataplane import netns, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import discovery, operator_config
from devtools.promtool import build as promtool

GOMOD_DIR = Path(__file__).resolve().parent / "prometheus_gomod"
PACKAGE = f"{promtool.MODULE}/cmd/prometheus"
RECIPE = (
    "go build -mod=readonly -trimpath -ldflags '-s -w -X <version var>=<release>' -tags <tags> "
    "-o <dir>/prometheus <package>"
)
# Prometheus' namespace on the run's pod network (the bridge of devtools/dataplane/netns.py), an
# address no pod, picker or gateway of the replay takes, and a veth index none of theirs has.
NS = "prometheus"
IP = f"{topology.POD_SUBNET}.8"
VETH = 900
PORT = 9090
# prometheus-operator's default `evaluationInterval` of a Prometheus object, used until the
# operator's first configuration says otherwise.
OPERATOR_DEFAULT_INTERVAL = operator_config.CRD_DEFAULT_INTERVAL
# How often the targets file is rewritten from the API server, and the alerts read.
SYNC_S = 2.0
# Longest wait for Prometheus to drop a deleted pod's targets before they are counted: the file
# refresh (5 s, the jobs' file_sd_configs) and the discovery manager's update (5 s), with margin.
TARGETS_SETTLE_S = 20.0
POD_NAME = "__meta_kubernetes_pod_name"


class BuildError(Exception):
    """Prometheus could not be built."""


def wrapper_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(GOMOD_DIR.iterdir()) if p.is_file()}


def binary_dir(module: str) -> Path:
    files = wrapper_files()
    key = tool_cache.cache_key(
        RECIPE.encode(),
        " ".join(promtool.TAGS).encode(),
        module.encode(),
        promtool.go_version().encode(),
        *(item for name in sorted(files) for item in (name.encode(), files[name])),
    )
    return tool_cache.cache_root() / f"prometheus-{module}-{key}"


def reported_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"prometheus, version (\S+)", out)
    return match[1] if match else ""


def ensure() -> Path:
    """The pinned Prometheus, built first if the cache has none (its cold build time printed)."""
    module = promtool.module_version()
    gomod = wrapper_files().get("go.mod", b"").decode()
    if not re.search(rf"^require {re.escape(promtool.MODULE)} {re.escape(module)}$", gomod, re.M):
        raise BuildError(
            f"devtools/daytwo/prometheus_gomod/go.mod does not require {promtool.MODULE} {module} "
            "([tools].promtool): copy the directives of devtools/promtool/gomod/go.mod and `go mod tidy`"
        )
    target = binary_dir(module)

    def build(target: Path) -> None:
        target.mkdir(parents=True)
        binary, log = target / "prometheus", target.with_name(target.name + ".log")
        log.write_text("")
        print(
            f"building prometheus {promtool.release(module)} ({PACKAGE}@{module}) into {target}",
            file=sys.stderr,
        )
        ldflags = f"-s -w -X {promtool.VERSION_VAR}={promtool.release(module)}"
        status = tool_cache.go_build(PACKAGE, binary, GOMOD_DIR, ldflags, log, tags=promtool.TAGS)
        if status != 0 or reported_version(binary) != promtool.release(module):
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building prometheus failed (exit {status}); {log}:\n{tail}")

    elapsed = tool_cache.build_once(target, build, f"{PACKAGE}@{module}\n")
    if elapsed is not None:
        print(f"prometheus built in {elapsed:.0f} s", file=sys.stderr)
    return target / "prometheus"


# --- the scrape configuration (pure) ----------------------------------------------------------


def picker_backed(
    pods: Iterable[dict[str, Any]], pickers: list[dict[str, Any]], selector: dict[str, str]
) -> list[dict[str, Any]]:
    """The pods discovery sees in the replay: the twin's pods, with the picker processes in place of
    the twin's pods of the rendered picker Deployment (its `selector`'s matchLabels), which
    nothing runs behind."""

    def is_picker(pod: dict[str, Any]) -> bool:
        labels = pod["metadata"].get("labels") or {}
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    return [p for p in pods if not is_picker(p)] + pickers


def stale_targets(targets_json: str, pods: set[str]) -> list[str]:
    """The active targets (Prometheus' /api/v1/targets answer) of pods not in `pods`, the pod
    names the target files list: targets Prometheus has not yet dropped. Pure."""
    return sorted(
        t["scrapeUrl"]
        for t in json.loads(targets_json)["data"]["activeTargets"]
        if (t.get("discoveredLabels") or {}).get(POD_NAME) not in pods
    )


def rules_text(rules: Iterable[dict[str, Any]]) -> str:
    """The PrometheusRule objects' groups as one Prometheus rule file."""
    return str(
        yaml.safe_dump({"groups": [g for r in rules for g in r["spec"].get("groups") or []]}, sort_keys=False)
    )


def live_rules(rules: Iterable[dict[str, Any]], fits: Callable[[dict[str, Any]], bool]) -> list[str]:
    """The alerting rules `fits` accepts (the ones the replay can see fire and resolve)."""
    return [
        r["alert"]
        for obj in rules
        for g in obj["spec"].get("groups") or []
        for r in g["rules"]
        if "alert" in r and fits(r)
    ]


# --- the alerts, live (pure parts) ------------------------------------------------------------


@dataclass
class AlertTimes:
    """When an alert was first seen firing and when it was next seen gone (monotonic seconds)."""

    fired: float | None = None
    resolved: float | None = None


def observe(times: dict[str, AlertTimes], firing: set[str], now: float) -> None:
    """Fold one reading of the firing alerts into `times`: the first firing, then the first
    reading without it after that. Pure but for `times`."""
    for name in firing:
        t = times.setdefault(name, AlertTimes())
        if t.fired is None:
            t.fired = now
    for name, t in times.items():
        if t.fired is not None and t.resolved is None and name not in firing:
            t.resolved = now


def alert_line(name: str, fault: str, fault_at: float, recovered_at: float, t: AlertTimes) -> str | None:
    if t.fired is None or t.resolved is None:
        return None
    return (
        f"alert: {name} fired {t.fired - fault_at:.1f} s after {fault}, "
        f"resolved {t.resolved - recovered_at:.1f} s after recovery"
    )


def firing_names(alerts_json: str) -> set[str]:
    data = json.loads(alerts_json)
    return {a["labels"]["alertname"] for a in data["data"]["alerts"] if a.get("state") == "firing"}


# --- the running Prometheus -------------------------------------------------------------------


@dataclass
class Monitor:
    """Prometheus in the run's pod network, configured by prometheus-operator's own generator
    (operator_config.py) and its targets kept from the API server."""

    binary: Path
    run_dir: Path
    logs: Path
    rendered: list[dict[str, Any]]
    list_pods: Callable[[], list[dict[str, Any]]]
    pickers: list[dict[str, Any]]
    """The picker processes as pods of the rendered picker Deployment (`picker_backed`)."""
    picker_selector: dict[str, str]
    generate: Callable[[Path], operator_config.Generated | None]
    """prometheus-operator's reconciliation of the Prometheus object in the file given; None while
    the API server serves no monitoring.coreos.com kinds (before the stack's first `pulumi up`)."""
    inputs: Callable[[], object]
    """What the operator reconciles on (the monitors' and the metrics reader Secret's versions):
    the configuration is generated again, and Prometheus reloaded, when it changes."""
    procs: dataplane.Processes = field(default_factory=lambda: dataplane.Processes([]))
    times: dict[str, AlertTimes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    """The pod names the target files listed when last written."""
    warnings: list[str] = field(default_factory=list)
    """What the operator logged at warning level in its last pass (a rejected monitor)."""
    generated: dict[str, Any] = field(default_factory=dict)
    """The operator's last configuration, as it wrote it."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _inputs: object = None
    _files: dict[Path, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = self.run_dir / "prometheus"
        self.targets_dir = self.dir / "targets"
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        self.services = [o for o in self.rendered if o["kind"] == "Service"]
        self.rules = [o for o in self.rendered if o["kind"] == "PrometheusRule"]
        self.config_file = self.dir / "prometheus.yaml"
        (self.dir / "rules.yaml").write_text(rules_text(self.rules))
        self.prometheus_file = self.dir / "prometheus-object.yaml"
        self.prometheus_file.write_text(
            yaml.safe_dump(operator_config.prometheus_object(promtool.release(promtool.module_version())))
        )

    def reconcile(self) -> bool:
        """Generate the configuration again when the operator's inputs changed; True when it
        changed what Prometheus reads. The file holds the reader's token inline, as the
        operator's configuration Secret does: only its owner may read it."""
        inputs = self.inputs()
        if inputs == self._inputs and self.config_file.exists():
            return False
        generated = self.generate(self.prometheus_file)
        self.generated = generated.config if generated is not None else {}
        self.warnings = generated.warnings if generated is not None else []
        self._inputs = inputs
        text = yaml.safe_dump(
            operator_config.for_replay(self.generated, self.targets_dir, self.dir / "rules.yaml"),
            sort_keys=False,
        )
        if self.config_file.exists() and self.config_file.read_text() == text:
            return False
        tmp = self.config_file.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(text)
        tmp.replace(self.config_file)
        return True

    def evaluation_interval(self) -> str:
        return str((self.generated.get("global") or {}).get("evaluation_interval", OPERATOR_DEFAULT_INTERVAL))

    def write_targets(self) -> None:
        pods = picker_backed(self.list_pods(), self.pickers, self.picker_selector)
        written: set[str] = set()
        for job in self.generated.get("scrape_configs") or []:
            if "kubernetes_sd_configs" not in job:
                continue
            groups = discovery.job_groups(job, pods, self.services)
            written |= {g["labels"][POD_NAME] for g in groups if POD_NAME in g["labels"]}
            file = operator_config.job_file(self.targets_dir, job["job_name"])
            text = json.dumps(groups, indent=1, sort_keys=True)
            if self._files.get(file) != text:  # unchanged files are not rewritten: no rereads
                tmp = file.with_suffix(".tmp")
                tmp.write_text(text)
                tmp.replace(file)
                self._files[file] = text
        self.written = written

    def sync(self) -> None:
        """One pass: the configuration (reloading Prometheus when it changed), then the targets."""
        changed = self.reconcile()
        self.write_targets()
        if changed and self._thread is not None:
            status = netns.post(NS, f"http://{IP}:{PORT}/-/reload", {}, timeout=10)
            if status != 200:  # Prometheus keeps its last good configuration then
                self.errors.append(
                    f"prometheus: reloading the operator's new configuration answered {status}"
                )

    def start(self) -> None:
        self.started = time.time()
        self.reconcile()
        self.write_targets()
        netns.attach(NS, IP, VETH)
        self.procs.start(
            "prometheus",
            [
                *netns.exec_prefix(NS),
                str(self.binary),
                f"--config.file={self.config_file}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address={IP}:{PORT}",
                "--web.enable-lifecycle",
            ],
            self.logs,
        )
        deadline = time.monotonic() + 60
        while self.query("/-/ready") is None:
            if time.monotonic() > deadline:
                raise TimeoutError("prometheus did not turn ready in 60 s (logs/prometheus.log)")
            time.sleep(0.5)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def query(self, path: str) -> str | None:
        return netns.fetch(NS, f"http://{IP}:{PORT}{path}", timeout=5)

    def instant(self, expr: str) -> str | None:
        """An instant query's answer (the body), None when Prometheus does not answer 2xx."""
        return self.query("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))

    def _loop(self) -> None:
        while not self._stop.wait(SYNC_S):
            try:
                self.sync()
            except Exception as error:  # the API server restarting: try again next time
                self.errors.append(f"prometheus configuration and targets: {error}")
            text = self.query("/api/v1/alerts")
            if text is not None:
                observe(self.times, firing_names(text), time.monotonic())

    def targets_up(self, settle_s: float = TARGETS_SETTLE_S) -> dict[str, tuple[int, int]]:
        """Per job: (targets up, targets), once Prometheus lists no target of a pod the last
        target files no longer have (a deleted pod: its discovery drops it a few seconds after the
        file's rewrite, the file refresh and the discovery manager's update), or after `settle_s`."""
        time.sleep(SYNC_S)  # the monitor's thread rewrites the files from the pods listed now
        deadline = time.monotonic() + settle_s
        text = self.query("/api/v1/targets?state=active")
        while text is not None and stale_targets(text, self.written) and time.monotonic() < deadline:
            time.sleep(1.0)
            text = self.query("/api/v1/targets?state=active")
        out: dict[str, tuple[int, int]] = {}
        if text is None:
            return out
        for t in json.loads(text)["data"]["activeTargets"]:
            job = t["scrapePool"]
            up, total = out.get(job, (0, 0))
            out[job] = (up + (t["health"] == "up"), total + 1)
        return out

    def evaluate_offline(self, promtool_bin: Path, names: list[str], end: float) -> list[str]:
        """The named alerts' expressions evaluated by promtool over the series this run scraped,
        from Prometheus' start to `end` (Unix seconds) at the evaluation interval, timestamps as
        scraped; one line per alert, in the order given."""
        interval_s = duration_s(self.evaluation_interval())
        out = self.dir / "offline"
        rules_file = self.dir / "offline-rules.yaml"
        rules_file.write_text(offline_rules_text(self.rules, names, self.evaluation_interval()))
        subprocess.run(
            [
                *netns.exec_prefix(NS),
                str(promtool_bin),
                "tsdb",
                "create-blocks-from",
                "rules",
                "--quiet",
                f"--url=http://{IP}:{PORT}",
                f"--start={int(self.started)}",
                f"--end={int(end)}",
                f"--output-dir={out}",
                str(rules_file),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        (out / "wal").mkdir(exist_ok=True)  # `tsdb dump` opens the blocks as a database
        dump = subprocess.run(
            [str(promtool_bin), "tsdb", "dump", f'--match={{__name__=~"{OFFLINE_PREFIX}.*"}}', str(out)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        steps = held_steps(dump)
        evaluations = int((int(end) - int(self.started)) // interval_s) + 1
        by_name = {
            r["alert"]: r
            for obj in self.rules
            for g in obj["spec"].get("groups") or []
            for r in g["rules"]
            if "alert" in r
        }
        return [
            offline_line(
                n,
                str(by_name[n].get("for", "")),
                steps.get(n, []),
                evaluations,
                interval_s,
                [m for m in annotated_metrics(by_name[n]) if not self.has_series(m, end)],
            )
            for n in names
        ]

    def has_series(self, metric: str, end: float) -> bool:
        """Prometheus holds a series of `metric` scraped in this run."""
        match = urllib.parse.quote(f'{{__name__="{metric}"}}')
        text = self.query(f"/api/v1/series?match[]={match}&start={int(self.started)}&end={int(end)}")
        return text is not None and bool(json.loads(text)["data"])

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.procs.stop()
        netns.detach(NS)


# --- the other rules, by promtool over the run's series ---------------------------------------

OFFLINE_PREFIX = "llmd_fleet_alert_expr:"


def offline_rules_text(rules: Iterable[dict[str, Any]], names: Iterable[str], interval: str) -> str:
    """Each named alert's expression as a recording rule, for `promtool tsdb create-blocks-from
    rules` (it evaluates recording rules only) at the rule evaluation interval."""
    wanted = set(names)
    records = [
        {"record": OFFLINE_PREFIX + r["alert"], "expr": r["expr"]}
        for obj in rules
        for g in obj["spec"].get("groups") or []
        for r in g["rules"]
        if r.get("alert") in wanted
    ]
    return str(yaml.safe_dump({"groups": [{"name": "offline", "interval": interval, "rules": records}]}))


def held_steps(dump: str) -> dict[str, list[int]]:
    """Per alert, the evaluation timestamps (ms) at which its expression returned anything, from
    `promtool tsdb dump` output (`{__name__="...", ...} <value> <timestamp>` lines)."""
    steps: dict[str, set[int]] = {}
    for line in dump.splitlines():
        match = re.match(r'\{__name__="' + re.escape(OFFLINE_PREFIX) + r'([^"]+)".*\} \S+ (\d+)$', line)
        if match:
            steps.setdefault(match[1], set()).add(int(match[2]))
    return {name: sorted(ts) for name, ts in steps.items()}


def duration_s(text: str) -> float:
    """A Prometheus duration (`2m`, `1h30m`, `15s`) in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * units[u] for n, u in parts)


def longest_hold_s(steps: list[int], interval_s: float) -> float:
    """The longest time the expression held across consecutive evaluations (0 for one alone)."""
    longest, start = 0.0, None
    for i, t in enumerate(steps):
        if i == 0 or t - steps[i - 1] > interval_s * 1000 * 1.5:
            start = t
        assert start is not None
        longest = max(longest, (t - start) / 1000)
    return longest


def offline_line(
    name: str, for_: str, steps: list[int], evaluations: int, interval_s: float, absent: Iterable[str] = ()
) -> str:
    """One alert's promtool evaluation; `absent` names the metrics of its `metric` annotation the
    run scraped no series of (its expression then holds only through an `or vector(0)`, or never)."""
    held = longest_hold_s(steps, interval_s)
    fires = bool(steps) and held >= duration_s(for_ or "0s")
    missing = list(absent)
    return (
        f"day-two: promtool: {name} (for {for_ or '0s'}): expression held at {len(steps)} of "
        f"{evaluations} evaluations, longest {held:.0f} s: {'would fire' if fires else 'would not fire'}"
        + (f" (no series scraped of {', '.join(missing)})" if missing else "")
    )


def annotated_metrics(rule: dict[str, Any]) -> list[str]:
    """The metric names a rendered alert's `metric` annotation lists (histograms by their name)."""
    text = str((rule.get("annotations") or {}).get("metric", ""))
    return [m.strip() for m in text.split(",") if m.strip()]
