"""The day-two replay's Prometheus (docs/day-two.md, "Prometheus and alerts"): a real Prometheus,
built from the Prometheus module promtool is built from, scraping the twin's serving pods and
endpoint pickers as the rendered PodMonitors and ServiceMonitors say, evaluating the rendered
PrometheusRule, and watching its alerts fire and resolve.

Building: `cmd/prometheus` of `github.com/prometheus/prometheus` at `[tools].promtool` of
images/versions.toml, from the wrapper module devtools/daytwo/prometheus_gomod (the promtool
wrapper's directives, tidied for cmd/prometheus), with Prometheus' own `remove_all_sd` build tag
(the file and HTTP discovery it keeps are all this needs), into
`<cache>/prometheus-<version>-<key>/prometheus` like promtool (devtools/promtool/build.py).

Scrape configuration: a translation of the rendered monitors, not prometheus-operator's own
generator (its Go module is served, at v0.85.0 here, but its generator needs the operator's
Prometheus object, store and informers wired around it, which this slice does not do). It follows
the operator's documented semantics (prometheus-operator `Documentation/api-reference/api.md`,
PodMonitor/ServiceMonitor and `PodMetricsEndpoint`/`Endpoint`): one scrape job per endpoint, named
`podMonitor/<namespace>/<name>/<index>` (`serviceMonitor/...`); targets are the pods the selector
matches in the `namespaceSelector` namespaces, at the container port named `port`; the operator's
own relabelling first (`namespace`, `pod`, `container`, `endpoint` and `job` = `<namespace>/<name>`),
then the monitor's `relabelings` over the same `__meta_kubernetes_*` labels Kubernetes discovery
gives, then `metricRelabelings` as `metric_relabel_configs`. The targets go through file discovery,
rewritten from the twin's API server as the process kubelet gives pods their addresses. The
ServiceMonitor's Service selects the endpoint-picker pods, which in the replay are the picker
processes (devtools/dataplane/run.py `start_pickers`), so its targets are those.
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
# prometheus-operator's default `evaluationInterval` and `scrapeInterval` of a Prometheus object
# (api.md, PrometheusSpec: "Default: 30s"); the monitors' own `interval` wins for their jobs.
OPERATOR_DEFAULT_INTERVAL = "30s"
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


def _label_name(key: str) -> str:
    """A Kubernetes label key as Kubernetes discovery names it (`__meta_kubernetes_pod_label_<x>`,
    every character outside [a-zA-Z0-9_] as `_`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _selected(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _namespaces(monitor: dict[str, Any]) -> set[str] | None:
    """The namespaces a monitor selects from: matchNames, its own namespace by default, None for any."""
    ns_selector = monitor["spec"].get("namespaceSelector") or {}
    if ns_selector.get("any"):
        return None
    return set(ns_selector.get("matchNames") or [monitor["metadata"]["namespace"]])


def pod_meta(
    pod: dict[str, Any], container: dict[str, Any], port: dict[str, Any], init: bool = False
) -> dict[str, str]:
    """The `__meta_kubernetes_*` labels Kubernetes pod discovery gives one container port
    (`init`: the container is one of the pod's initContainers, a native sidecar)."""
    meta = pod["metadata"]
    labels = {
        "__meta_kubernetes_namespace": meta["namespace"],
        "__meta_kubernetes_pod_name": meta["name"],
        "__meta_kubernetes_pod_ip": pod["status"]["podIP"],
        "__meta_kubernetes_pod_container_name": container["name"],
        "__meta_kubernetes_pod_container_init": "true" if init else "false",
        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
        "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
        "__meta_kubernetes_pod_phase": (pod.get("status") or {}).get("phase", ""),
    }
    if "service" in pod:  # a pod behind a Service (picker_pods)
        labels["__meta_kubernetes_service_name"] = pod["service"]
    for key, value in (meta.get("labels") or {}).items():
        labels[f"__meta_kubernetes_pod_label_{_label_name(key)}"] = value
    return labels


def pod_targets(
    monitor: dict[str, Any], endpoint: dict[str, Any], pods: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """File-discovery target groups of one PodMonitor endpoint: every pod the selector matches in
    the selected namespaces that has an address, at its container port named `port` (or
    `portNumber`). Failed and Succeeded pods are left out, as the operator's relabelling drops them.
    The containers are the pod's containers, then its initContainers (where native sidecars, the
    routing sidecar among them, are), as Prometheus' pod discovery lists them (v0.314.0
    discovery/kubernetes/pod.go `buildPod`, with `__meta_kubernetes_pod_container_init`)."""
    namespaces = _namespaces(monitor)
    groups = []
    for pod in pods:
        meta = pod["metadata"]
        if namespaces is not None and meta["namespace"] not in namespaces:
            continue
        if not _selected(monitor["spec"].get("selector") or {}, meta.get("labels") or {}):
            continue
        status = pod.get("status") or {}
        if not status.get("podIP") or status.get("phase") in ("Failed", "Succeeded"):
            continue
        containers = [(c, False) for c in pod["spec"].get("containers", [])]
        containers += [(c, True) for c in pod["spec"].get("initContainers", [])]
        for container, init in containers:
            for port in container.get("ports") or []:
                if "port" in endpoint and port.get("name") != endpoint["port"]:
                    continue
                if "portNumber" in endpoint and port["containerPort"] != endpoint["portNumber"]:
                    continue
                groups.append(
                    {
                        "targets": [f"{status['podIP']}:{port['containerPort']}"],
                        "labels": pod_meta(pod, container, port, init),
                    }
                )
    return groups


def relabel(rule: dict[str, Any]) -> dict[str, Any]:
    """A monitor's RelabelConfig (camelCase, `action` in either case) as Prometheus' relabel_config."""
    names = {
        "sourceLabels": "source_labels",
        "targetLabel": "target_label",
        "separator": "separator",
        "regex": "regex",
        "modulus": "modulus",
        "replacement": "replacement",
        "action": "action",
    }
    out = {names[k]: v for k, v in rule.items() if k in names}
    if "action" in out:
        out["action"] = str(out["action"]).lower()
    return out


def operator_relabels(monitor: dict[str, Any], port_name: str) -> list[dict[str, Any]]:
    """The labels the operator's generator sets on every target of a pod-backed job before the
    monitor's own relabelings."""
    ns, name = monitor["metadata"]["namespace"], monitor["metadata"]["name"]
    rules: list[dict[str, Any]] = [
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
    ]
    if monitor["kind"] == "ServiceMonitor":  # job: the Service's name
        rules += [
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
        ]
    else:
        rules.append({"target_label": "job", "replacement": f"{ns}/{name}"})
    if job_label := monitor["spec"].get("jobLabel"):
        rules.append(
            {
                "source_labels": [f"__meta_kubernetes_pod_label_{_label_name(job_label)}"],
                "target_label": "job",
                "regex": "(.+)",
            }
        )
    rules.append({"target_label": "endpoint", "replacement": port_name})
    return rules


@dataclass(frozen=True)
class Job:
    """One scrape job: its configuration and how its targets are found."""

    name: str
    config: dict[str, Any]
    monitor: dict[str, Any]
    endpoint: dict[str, Any]


def jobs(monitors: Iterable[dict[str, Any]], targets_dir: Path, token_file: Path) -> list[Job]:
    """One job per endpoint of every PodMonitor and ServiceMonitor, in the order given; an
    endpoint with credentials reads them from `token_file` at each scrape."""
    out = []
    for monitor in monitors:
        kind = monitor["kind"]
        endpoints = monitor["spec"].get("podMetricsEndpoints" if kind == "PodMonitor" else "endpoints") or []
        for i, endpoint in enumerate(endpoints):
            meta = monitor["metadata"]
            name = f"{kind[0].lower()}{kind[1:]}/{meta['namespace']}/{meta['name']}/{i}"
            file = targets_dir / (re.sub(r"[^a-zA-Z0-9]", "-", name) + ".json")
            config: dict[str, Any] = {
                "job_name": name,
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "scrape_interval": endpoint.get("interval", OPERATOR_DEFAULT_INTERVAL),
                "metrics_path": endpoint.get("path", "/metrics"),
                "scheme": endpoint.get("scheme", "http"),
                "file_sd_configs": [{"files": [str(file)], "refresh_interval": "5s"}],
                "relabel_configs": [
                    *operator_relabels(monitor, str(endpoint.get("port", ""))),
                    *(relabel(r) for r in endpoint.get("relabelings") or []),
                ],
            }
            if "scrapeTimeout" in endpoint:
                config["scrape_timeout"] = endpoint["scrapeTimeout"]
            if endpoint.get("metricRelabelings"):
                config["metric_relabel_configs"] = [relabel(r) for r in endpoint["metricRelabelings"]]
            if (endpoint.get("authorization") or {}).get("credentials"):
                config["authorization"] = {
                    "type": endpoint["authorization"].get("type", "Bearer"),
                    "credentials_file": str(token_file),
                }
            out.append(Job(name, config, monitor, endpoint))
    return out


def picker_pods(
    monitor: dict[str, Any],
    services: Iterable[dict[str, Any]],
    endpoint: dict[str, Any],
    pickers: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The replay's picker processes as the pods behind a ServiceMonitor endpoint: each picker is
    given as a pod object (name, labels of the rendered picker pod template, address, the
    Service port's target port); only the Services the monitor selects contribute, and only
    when their selector matches the picker pods' labels."""
    namespaces = _namespaces(monitor)
    out = []
    for svc in services:
        meta = svc["metadata"]
        if namespaces is not None and meta["namespace"] not in namespaces:
            continue
        if not _selected(monitor["spec"].get("selector") or {}, meta.get("labels") or {}):
            continue
        for port in svc["spec"].get("ports") or []:
            if port.get("name") != endpoint.get("port"):
                continue
            for pod in pickers:
                if _selected({"matchLabels": svc["spec"].get("selector") or {}}, pod["metadata"]["labels"]):
                    number = port.get("targetPort", port["port"])
                    out.append(
                        {
                            "service": meta["name"],
                            "metadata": pod["metadata"],
                            "spec": {
                                "containers": [
                                    {
                                        "name": "epp",
                                        "ports": [{"name": port["name"], "containerPort": number}],
                                    }
                                ]
                            },
                            "status": pod["status"],
                        }
                    )
    return out


def stale_targets(targets_json: str, pods: set[str]) -> list[str]:
    """The active targets (Prometheus' /api/v1/targets answer) of pods not in `pods`, the pod
    names the target files list: targets Prometheus has not yet dropped. Pure."""
    return sorted(
        t["scrapeUrl"]
        for t in json.loads(targets_json)["data"]["activeTargets"]
        if (t.get("discoveredLabels") or {}).get(POD_NAME) not in pods
    )


def config_text(job_list: list[Job], rules_file: Path) -> str:
    return str(
        yaml.safe_dump(
            {
                "global": {
                    "scrape_interval": OPERATOR_DEFAULT_INTERVAL,
                    "evaluation_interval": OPERATOR_DEFAULT_INTERVAL,
                },
                "rule_files": [str(rules_file)],
                "scrape_configs": [j.config for j in job_list],
            },
            sort_keys=False,
        )
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
    """Prometheus in the run's pod network, its targets kept from the API server."""

    binary: Path
    run_dir: Path
    logs: Path
    rendered: list[dict[str, Any]]
    list_pods: Callable[[], list[dict[str, Any]]]
    pickers: list[dict[str, Any]]
    token: Callable[[], str | None]
    """The rendered metrics reader's token once the API server has it (the Secret comes with the
    stack's first `pulumi up`, after Prometheus starts): Prometheus reads `credentials_file` at
    every scrape, so the file is filled in when the token appears."""
    procs: dataplane.Processes = field(default_factory=lambda: dataplane.Processes([]))
    times: dict[str, AlertTimes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    """The pod names the target files listed when last written."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.dir = self.run_dir / "prometheus"
        self.targets_dir = self.dir / "targets"
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        monitors = [o for o in self.rendered if o["kind"] in ("PodMonitor", "ServiceMonitor")]
        self.services = [o for o in self.rendered if o["kind"] == "Service"]
        self.rules = [o for o in self.rendered if o["kind"] == "PrometheusRule"]
        self.token_file = self.dir / "token"
        self.token_file.write_text("")
        self._token_known = False
        self.jobs = jobs(monitors, self.targets_dir, self.token_file)
        (self.dir / "rules.yaml").write_text(rules_text(self.rules))
        (self.dir / "prometheus.yaml").write_text(config_text(self.jobs, self.dir / "rules.yaml"))

    def write_targets(self) -> None:
        if not self._token_known:
            token = self.token()
            if token:
                tmp = self.token_file.with_suffix(".tmp")
                tmp.write_text(token)
                tmp.replace(self.token_file)
                self._token_known = True
        pods = self.list_pods()
        written: set[str] = set()
        for job in self.jobs:
            if job.monitor["kind"] == "PodMonitor":
                groups = pod_targets(job.monitor, job.endpoint, pods)
            else:
                backing = picker_pods(job.monitor, self.services, job.endpoint, self.pickers)
                groups = pod_targets(
                    {**job.monitor, "spec": {**job.monitor["spec"], "selector": {}}}, job.endpoint, backing
                )
            written |= {g["labels"][POD_NAME] for g in groups}
            file = Path(job.config["file_sd_configs"][0]["files"][0])
            tmp = file.with_suffix(".tmp")
            tmp.write_text(json.dumps(groups, indent=1))
            tmp.replace(file)
        self.written = written

    def start(self) -> None:
        self.started = time.time()
        self.write_targets()
        netns.attach(NS, IP, VETH)
        self.procs.start(
            "prometheus",
            [
                *netns.exec_prefix(NS),
                str(self.binary),
                f"--config.file={self.dir / 'prometheus.yaml'}",
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
                self.write_targets()
            except Exception as error:  # the API server restarting: try again next time
                self.errors.append(f"prometheus targets: {error}")
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
        interval_s = duration_s(OPERATOR_DEFAULT_INTERVAL)
        out = self.dir / "offline"
        rules_file = self.dir / "offline-rules.yaml"
        rules_file.write_text(offline_rules_text(self.rules, names, OPERATOR_DEFAULT_INTERVAL))
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
