"""The twin's process kubelet (docs/day-two.md): the kubelet of the stack's simulated GPU
nodes, where kwok runs no pod (devtools/twin/cluster.py `without_pods_on`).

For each pod the scheduler binds to one of those nodes (the real LWS controller and the
StatefulSet controller create them), it does what a kubelet does, with processes in place of
containers:

- start: a network namespace with the next address of the run's pod network, and the pod's
  containers as processes inside it, the rendered engine arguments mapped to the inference
  simulator's as the data-plane twin maps them (devtools/dataplane/topology.py `pod_containers`,
  started by devtools/dataplane/run.py `start_pods`); the pod's IP and phase Running written to
  its status, Ready False;
- ready: once the simulated model load (`load_seconds`, printed) has passed and every rendered
  readiness probe (httpGet, named ports resolved) answers from inside the pod's namespace, Ready
  True;
- delete: when the pod is marked for deletion, requests the picker routed before it dropped the
  pod are let in (`SETTLE_S`), the engines drain their in-flight requests (vLLM's
  `--shutdown-timeout`, which `serving.drainSeconds` renders; bounded by the pod's grace
  period), the processes stop, the namespace goes, and the pod object is deleted with grace 0,
  as a kubelet finalizes a pod whose containers have exited.

What it is not: no image, no cgroup, no volume, no liveness or startup probe (the simulated load
is shorter than the rendered startup budget, so a startup probe would have passed), no restart.
"""

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devtools.dataplane import netns, report, run, topology
from devtools.twin.kube import ApiError, Kube

# How long a pod marked for deletion still takes requests in: the picker drops a terminating pod
# as soon as its watch sees the deletion (llm-d-router pkg/epp/controller/pod_reconciler.go), but
# a request it picked a moment before is still on its way to the pod.
SETTLE_S = 2.0
# How often the kubelet reads its pods from the API server.
SYNC_S = 0.5
# veth indexes of pods the kubelet adds, above those `netns.setup` gave the run's fixed namespaces.
FIRST_VETH = 1000
# The last host address of the run's /24 pod network (.255 is its broadcast address); addresses
# are never reused in a run, so the replay's figures can name the pod behind every address.
LAST_POD_HOST = 254
RUNNING = "vllm:num_requests_running"
# The nodes' address as kwok reports it (devtools/twin/cluster.py, `--node-ip`).
HOST_IP = "127.0.0.1"


@dataclass(frozen=True)
class Endpoint:
    """What the run needs to know of an address later: which pod, role and revision it was."""

    pod: str
    role: str
    revision: str


@dataclass
class PodRun:
    uid: str
    name: str
    ip: str
    pod: topology.Pod
    procs: run.Processes
    started: float
    probes: list[tuple[str, int]]
    node: str = ""
    ready_s: float | None = None
    draining: bool = False
    mended: bool = False
    """Its simulators run behind the output-id stand-in (`ProcessKubelet.mend`)."""


def probe_targets(spec: dict[str, Any]) -> list[tuple[str, int]]:
    """Every container's httpGet readiness probe as (path, port), a named port resolved against
    the pod's container ports. Pure."""
    listed = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    listed += spec.get("containers", [])
    named = {p["name"]: int(p["containerPort"]) for c in listed for p in c.get("ports", []) if p.get("name")}
    out = []
    for c in listed:
        get = (c.get("readinessProbe") or {}).get("httpGet")
        if not get:
            continue
        port = get["port"]
        out.append((str(get.get("path", "/")), named[port] if isinstance(port, str) else int(port)))
    return out


def running_status(ip: str, host_ip: str, spec: dict[str, Any], ready: bool) -> dict[str, Any]:
    """The status a kubelet writes for a started pod, Ready or not. Pure but for the clock."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    flag = "True" if ready else "False"
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
        {"type": "Ready", "status": flag, "lastTransitionTime": now},
    ]
    containers = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": ready,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in spec.get("containers", [])
    ]
    return {
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": host_ip,
            "conditions": conditions,
            "containerStatuses": containers,
        }
    }


@dataclass
class ProcessKubelet:
    client: Callable[[], Kube]
    """A new API client per thread (one HTTP session is not shared across threads)."""
    base: topology.Topology
    """The rendered topology (its namespace; its pods are replaced by each pod the kubelet runs)."""
    nodes: frozenset[str]
    bins: dict[str, Path]
    logs: Path
    load_seconds: float
    kv_blocks: int | None = None
    mend: Path | None = None
    """With a folder: where the output-id stand-in (devtools/dataplane/mend.py) records each
    `/v1/responses` request, <folder>/<pod>.jsonl (the Responses phase,
    devtools/daytwo/responses_phase.py), once it runs in front of the simulators (`mending`)."""
    mending: bool = False
    """The stand-in in front of every simulator this kubelet starts: off until a
    `restart_engines(with_mend=True)` puts it in front of the running ones (the Responses phase's
    restart), and off again after one without it. Off by default because the pickers read every
    rank's metrics through it each refresh (50 ms): a Python proxy for several hundred requests a
    second, about a sixth of the machine, in every phase that does not read its records."""
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    """Every address the kubelet gave out this run, kept after its pod is gone."""
    pods: dict[str, PodRun] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    """Nodes that died (`lose_node`): their pods are no longer this kubelet's."""
    _next_host: int = topology.FIRST_POD_HOST
    _next_veth: int = FIRST_VETH
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _loop(self) -> None:
        kube = self.client()
        while not self._stop.is_set():
            try:
                self.sync(kube)
            except (ApiError, OSError) as error:  # a loaded API server: the next pass retries
                self.errors.append(f"kubelet sync: {error}")
            self._stop.wait(SYNC_S)

    def sync(self, kube: Kube) -> None:
        listed = kube.list("v1", "Pod", self.base.namespace)
        seen = set()
        for pod in listed:
            meta, spec = pod["metadata"], pod["spec"]
            if spec.get("nodeName") not in self.nodes or spec.get("nodeName") in self.lost:
                continue
            uid = meta["uid"]
            seen.add(uid)
            with self._lock:
                current = self.pods.get(uid)
            if meta.get("deletionTimestamp"):
                if current is not None and not current.draining:
                    current.draining = True
                    grace = float(meta.get("deletionGracePeriodSeconds") or 30)
                    thread = threading.Thread(target=self._terminate, args=(current, grace), daemon=True)
                    self._threads.append(thread)
                    thread.start()
                elif current is None:
                    # Never started here, or stopped already: nothing runs, finalize it.
                    self._finalize(kube, meta["name"], uid)
                continue
            if current is None:
                self._run(kube, pod)
            elif current.ready_s is None:
                self._check_ready(kube, current, pod)
        with self._lock:
            gone = [p for uid, p in self.pods.items() if uid not in seen and not p.draining]
        for p in gone:  # deleted with grace 0 by someone else: stop what runs
            p.draining = True
            self._stop_pod(p)

    def _run(self, kube: Kube, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        labels = meta.get("labels", {})
        with self._lock:
            if self._next_host > LAST_POD_HOST:
                self.errors.append(
                    f"kubelet: {meta['name']} not started: the run's pod network has no address left"
                )
                return
            ip = f"{topology.POD_SUBNET}.{self._next_host}"
            self._next_host += 1
            veth = self._next_veth
            self._next_veth += 1
        name = meta["name"]
        role = labels.get(topology.DS_ROLE, "")
        containers = topology.pod_containers(spec, self.kv_blocks)
        as_pod = topology.Pod(name, role, ip, dict(labels), containers)
        netns.attach(name, ip, veth)
        procs = run.Processes([])
        mend = self.mend if self.mending else None
        run.start_pods(procs, replace(self.base, pods=[as_pod]), self.bins, self.logs, mend=mend)
        state = PodRun(
            meta["uid"],
            name,
            ip,
            as_pod,
            procs,
            self.clock(),
            probe_targets(spec),
            spec["nodeName"],
            mended=mend is not None,
        )
        with self._lock:
            self.pods[state.uid] = state
            self.endpoints[ip] = Endpoint(name, role, labels.get(topology.DS_REVISION, ""))
        status = running_status(ip, HOST_IP, spec, ready=False)
        status["status"]["startTime"] = status["status"]["conditions"][0]["lastTransitionTime"]
        kube.request(
            "PATCH",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{name}/status",
            status,
            "application/merge-patch+json",
        )
        self.say(
            f"kubelet: {name} on {spec['nodeName']} at {ip}: started, "
            f"loading for {self.load_seconds:.1f} s (simulated)"
        )

    def _check_ready(self, kube: Kube, state: PodRun, pod: dict[str, Any]) -> None:
        elapsed = self.clock() - state.started
        if elapsed < self.load_seconds:
            return
        for path, port in state.probes:
            if netns.fetch(state.name, f"http://{state.ip}:{port}{path}", timeout=2) is None:
                return
        kube.request(
            "PATCH",
            f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{state.name}/status",
            running_status(state.ip, HOST_IP, pod["spec"], ready=True),
            "application/merge-patch+json",
        )
        state.ready_s = elapsed
        self.say(f"kubelet: {state.name} Ready {elapsed:.1f} s after start")

    def _engine_urls(self, state: PodRun) -> list[str]:
        return [
            f"http://{state.ip}:{port}/metrics"
            for c in state.pod.containers
            if c.name == topology.SIMULATOR
            for port in c.ports
        ]

    def _idle(self, state: PodRun) -> bool:
        for url in self._engine_urls(state):
            text = netns.fetch(state.name, url, timeout=2)
            if text is None:
                return True  # an engine that no longer answers has nothing in flight
            if report.metric_sum(text, RUNNING) + report.metric_sum(text, report.WAITING) > 0:
                return False
        return True

    def _terminate(self, state: PodRun, grace: float) -> None:
        began = time.monotonic()
        time.sleep(SETTLE_S)
        while not self._idle(state) and time.monotonic() - began < grace:
            time.sleep(0.2)
        drained = time.monotonic() - began
        self._stop_pod(state)
        self._finalize(self.client(), state.name, state.uid)
        self.say(f"kubelet: {state.name} stopped after draining {drained:.1f} s")

    def _stop_pod(self, state: PodRun) -> None:
        state.procs.stop()
        netns.detach(state.name)
        with self._lock:
            self.pods.pop(state.uid, None)

    def _finalize(self, kube: Kube, name: str, uid: str) -> None:
        try:
            kube.request(
                "DELETE",
                f"/api/v1/namespaces/{self.base.namespace}/pods/{name}",
                {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )
        except ApiError as error:
            if error.code not in (404, 409):
                self.errors.append(f"kubelet: deleting {name}: {error}")

    def lose_node(self, node: str) -> list[str]:
        """The node dies: its pods' processes stop at once (no drain) and this kubelet no longer
        acts for it, as a kubelet that is gone (its pods are left to the control plane). Returns
        the addresses its pods had."""
        with self._lock:
            self.lost.add(node)
            victims = [p for p in self.pods.values() if p.node == node]
            for p in victims:
                p.draining = True
        for p in victims:
            self._stop_pod(p)
            self.say(f"kubelet: {p.name} on {node} at {p.ip}: killed with its node")
        return [p.ip for p in victims]

    def restart_engines(self, timeout: float = 60.0, with_mend: bool = True) -> list[topology.Pod]:
        """Every running pod's processes stopped and started again in its namespace, as a
        kubelet restarts a pod's containers (empty engine caches, same address, the pod left
        Ready: nothing is routed meanwhile), once every readiness probe answers again. The
        pods, as the data-plane twin's replay reads them. With `with_mend` (and a record folder)
        the output-id stand-in runs in front of every simulator, restarted and started later
        (`mending`; the Responses phase reads its records); without it they run bare, as `make
        dataplane`'s engines do (the routing figures)."""
        with self._lock:
            running = [p for p in self.pods.values() if not p.draining]
            self.mending = with_mend and self.mend is not None
        mend = self.mend if self.mending else None
        # Every pod's processes stopped at once: one that still finishes a request does not hold
        # up the others' restart (each stop waits up to its grace).
        with ThreadPoolExecutor(max(1, len(running)), thread_name_prefix="restart") as pool:
            list(pool.map(lambda state: state.procs.stop(), running))
        for state in running:
            run.start_pods(state.procs, replace(self.base, pods=[state.pod]), self.bins, self.logs, mend=mend)
            state.mended = mend is not None
        until = time.monotonic() + timeout
        for state in running:
            for path, port in state.probes:
                while netns.fetch(state.name, f"http://{state.ip}:{port}{path}", timeout=2) is None:
                    if time.monotonic() > until:
                        raise TimeoutError(f"kubelet: {state.name} did not answer its probes after a restart")
                    time.sleep(0.2)
        return [state.pod for state in running]

    def first_ready(self, revision: str) -> float | None:
        """When the first running pod of `revision` turned Ready (the kubelet's clock), None while
        none has."""
        with self._lock:
            times = [
                p.started + p.ready_s
                for p in self.pods.values()
                if p.ready_s is not None and p.pod.labels.get(topology.DS_REVISION) == revision
            ]
        return min(times) if times else None

    def all_mended(self) -> bool:
        """Every running pod's simulators behind the output-id stand-in: those restarted by the
        last `restart_engines(with_mend=True)` and every pod started since."""
        with self._lock:
            return all(p.mended for p in self.pods.values() if not p.draining)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        with self._lock:
            running = list(self.pods.values())
        for state in running:
            self._stop_pod(state)
