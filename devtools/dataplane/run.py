"""One data-plane run of a stack (docs/twin.md): render it, start the twin's API server, put the
router objects and the serving pods in (pods carry their address in the run's pod network, set in
their status as a kubelet would), start the simulators and routing sidecars inside the pods'
namespaces with their rendered arguments, two picker replicas with the rendered flags and config,
and drive the replay through the gateway stand-in: once with the rendered config, once with the
baseline (the same config without the prefix, session and no-hit scorers in any profile)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from devtools.agentic_check import env as agentic_env
from devtools.dataplane import build, netns, relay, replay, report, responses, scaled, topology
from devtools.twin import cluster, manifests
from devtools.twin.kube import Kube, wait_for
from llmd_fleet.cli.children import popen

# Scorers whose benefit the figures measure; the baseline drops them from every profile.
CACHE_AWARE_SCORERS = ("prefix-cache-scorer", "no-hit-lru-scorer", "session-affinity-scorer")
GATEWAY_NS = "gateway"
GATEWAY_IP = "10.244.0.2"
PICKER_IPS = ("10.244.0.3", "10.244.0.4")
# The render (tokenizer) service's pod: a stand-in for `vllm launch render`, see start_renderer.
RENDER_NS = "render"
RENDER_IP = "10.244.0.5"
# Where the user-facing check runs from (`llmd-fleet status --request`): a namespace of its own
# that reaches the gateway stand-in over the pod network and the API server through a forwarder.
CLIENT_NS = "client"
CLIENT_IP = "10.244.0.6"
CONFIG_MOUNT = "/config"
# The largest overload wave the run replays (requests within a second, each streaming for six):
# a budget of the machine the twin runs on (2 cores), not a figure of the config. local-sim's wave
# is 316; the quickstart's decode ranks (8 x 128 sequences) would make it 2208.
MAX_WAVE = 1000
# The CRD groups the run serves: the router's objects, the DisaggregatedSet (status counts its
# groups) and the Gateway (status reads its address).
CRD_GROUPS = (
    "inference.networking.k8s.io",
    "llm-d.ai",
    "disaggregatedset.x-k8s.io",
    "gateway.networking.k8s.io",
)


def baseline_config(text: str) -> str:
    """The rendered EndpointPickerConfig with the cache- and session-aware scorers removed from
    every scheduling profile (load-aware scorers and everything else kept)."""
    config = yaml.safe_load(text)
    types = {p["name"]: p["type"] for p in config["plugins"]}
    for profile in config["schedulingProfiles"]:
        profile["plugins"] = [
            p for p in profile["plugins"] if types.get(p["pluginRef"]) not in CACHE_AWARE_SCORERS
        ]
    return str(yaml.safe_dump(config, sort_keys=False))


def break_render_url(text: str) -> str:
    """The negative control: the token producer's render URL on a port nothing serves (a
    misconfigured tokenizer Service port), everything else unchanged. The picker then has no
    tokens, so the prefix producer matches nothing and the P/D decider has no cache state."""
    config = yaml.safe_load(text)
    for p in config["plugins"]:
        vllm = (p.get("parameters") or {}).get("vllm")
        if p.get("type") in ("token-producer", "tokenizer") and vllm and vllm.get("url"):
            parts = urlsplit(vllm["url"])
            wrong = (parts.port or 80) + 1
            vllm["url"] = urlunsplit(parts._replace(netloc=f"{parts.hostname}:{wrong}"))
            return str(yaml.safe_dump(config, sort_keys=False))
    raise ValueError("the config has no token producer with a render URL to break")


def picker_args(args: tuple[str, ...], config_file: Path) -> list[str]:
    """The rendered flags; only the config file's path follows where the run put the ConfigMap's
    content (the kubelet's volume mount at /config)."""
    return [f"--config-file={config_file}" if a.startswith("--config-file=") else a for a in args]


def pod_status(ip: str, ready: bool = True) -> dict[str, Any]:
    """A started pod's status at `ip`; with `ready` False its ContainersReady and Ready are False
    (a picker takes only Ready pods), as a kubelet writes it until the readiness probes pass."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {
            "type": t,
            "status": "True" if ready or t in ("PodScheduled", "Initialized") else "False",
            "lastTransitionTime": now,
        }
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": conditions,
        }
    }


def pod_object(pod: topology.Pod, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": namespace, "labels": pod.labels},
        "spec": {
            "nodeName": "dataplane",
            "containers": [
                {"name": c.name, "image": "dataplane", "ports": [{"containerPort": p} for p in c.ports]}
                for c in pod.containers
            ],
        },
    }


@dataclass
class Processes:
    items: list[tuple[str, subprocess.Popen[bytes]]]

    def start(
        self, name: str, argv: list[str], logs: Path, env: dict[str, str] | None = None, inherit: bool = True
    ) -> subprocess.Popen[bytes]:
        """Start `argv` as `name`, its output in logs/<name>.log; the environment is the run's
        with `env` added, or (`inherit=False`) `env` alone."""
        log = (logs / f"{name}.log").open("ab")
        proc = popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})} if inherit else dict(env or {}),
            start_new_session=True,
        )
        self.items.append((name, proc))
        return proc

    def stop(self, name_prefix: str = "") -> None:
        for name, proc in list(self.items):
            if name.startswith(name_prefix) and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name, proc in list(self.items):
            if name.startswith(name_prefix):
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                if (name, proc) in self.items:  # a concurrent stop may have taken it
                    self.items.remove((name, proc))


# Where a rank's simulator publishes its KV events inside its pod (`--kv-events`): a port of the
# relay's, on the pod's loopback, rank r at RELAY_INBOUND + r; not a port the rendering uses.
RELAY_INBOUND = 15557


def per_rank_args(args: tuple[str, ...], ranks: int, port: int, inbound: int) -> list[list[str]]:
    """The simulator's arguments split into one process per rank (`--kv-events`): rank r serves
    port + r alone (`--data-parallel-size=1`) and publishes its KV events to 127.0.0.1:inbound + r.
    One process per rank because the simulator's ranks in one process share one publisher and
    one topic (llm-d-inference-sim v0.10.2 pkg/kv-cache/block_cache.go, kv_cache_sender.go: every
    batch says rank 0), so no subscriber could tell them apart."""
    kept = [a for a in args if not a.startswith(("--port=", "--data-parallel-size=", "--zmq-endpoint="))]
    return [
        [
            *kept,
            f"--port={port + r}",
            "--data-parallel-size=1",
            f"--zmq-endpoint=tcp://127.0.0.1:{inbound + r}",
        ]
        for r in range(ranks)
    ]


# Where a simulator listens behind the output-id stand-in (`mend`): its rank ports moved up by this.
MEND_OFFSET = 20000


def shifted(args: list[str], offset: int) -> list[str]:
    """The simulator's arguments with its `--port` moved up by `offset` (pure)."""
    return [f"--port={int(a.split('=', 1)[1]) + offset}" if a.startswith("--port=") else a for a in args]


def start_pods(
    procs: Processes,
    topo: topology.Topology,
    bins: dict[str, Path],
    logs: Path,
    kv_events_port: int | None = None,
    mend: Path | None = None,
) -> list[Path]:
    """Each pod's containers in its namespace. With `kv_events_port` (the picker's
    `podDiscoveryConfig.socketPort`), each rank of an engine whose rendering publishes KV events
    runs as a simulator process of its own, and a relay per pod binds both sides of each rank's
    stream (devtools/dataplane/relay.py). With `mend` (a folder), each simulator listens
    MEND_OFFSET above its rank ports and the output-id stand-in (devtools/dataplane/mend.py)
    serves the rank ports, recording into `mend`/<pod>.jsonl; the record files are returned."""
    records: list[Path] = []
    for pod in topo.pods:
        env = {"POD_IP": pod.ip, "POD_NAME": pod.name, "POD_NAMESPACE": topo.namespace}
        offset = MEND_OFFSET if mend is not None else 0
        for c in pod.containers:
            # Every simulator: a mapped `vllm serve` or one the stack renders (engine simulator,
            # whose ports are its rank ports too).
            if c.name == topology.SIMULATOR and mend is not None:
                record = mend / f"{pod.name}.jsonl"
                records.append(record)
                procs.start(
                    f"pod-{pod.name}-mend",
                    [
                        *netns.exec_prefix(pod.name),
                        sys.executable,
                        "-m",
                        "devtools.dataplane.mend",
                        str(record),
                        pod.name,
                        *(f"{p}={p + offset}" for p in c.ports),
                    ],
                    logs,
                    {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                )
            if c.name == topology.SIMULATOR and kv_events_port is not None and c.vllm and c.vllm.kv_events:
                ranks, port = c.vllm.ranks, c.vllm.port
                for r, argv in enumerate(per_rank_args(c.args, ranks, port, RELAY_INBOUND)):
                    argv = shifted(argv, offset)
                    procs.start(
                        f"pod-{pod.name}-{c.name}-{r}",
                        [*netns.exec_prefix(pod.name), str(bins["simulator"]), *argv],
                        logs,
                        env,
                    )
                pairs = relay.relay_endpoints(pod.ip, kv_events_port, ranks, RELAY_INBOUND)
                procs.start(
                    f"pod-{pod.name}-relay",
                    [
                        *netns.exec_prefix(pod.name),
                        sys.executable,
                        "-m",
                        "devtools.dataplane.relay",
                        *(f"{p.inbound}={p.outbound}" for p in pairs),
                    ],
                    logs,
                    {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                )
                continue
            binary = bins["simulator"] if c.name == topology.SIMULATOR else bins["pd-sidecar"]
            args = shifted(list(c.args), offset) if c.name == topology.SIMULATOR else list(c.args)
            procs.start(
                f"pod-{pod.name}-{c.name}", [*netns.exec_prefix(pod.name), str(binary), *args], logs, env
            )
    return records


def renderer_args(renderer: topology.Renderer) -> list[str]:
    """The render stand-in: the inference simulator serves the same two render routes the token
    producer calls (POST /v1/chat/completions/render and /v1/completions/render, answering
    `token_ids`; llm-d-inference-sim v0.10.2 pkg/communication/http.go) with the dummy tokenizer
    the engines are rendered with (`--force-dummy-tokenizer=true`), so the picker's tokens are the
    engines' tokens by construction. Model and port are the rendered render Deployment's and the
    port the producer dials."""
    return [
        f"--model={renderer.model}",
        *topology.served_name_args(renderer.served_model),
        f"--port={renderer.port}",
        "--force-dummy-tokenizer=true",
    ]


def start_renderer(procs: Processes, renderer: topology.Renderer, bins: dict[str, Path], logs: Path) -> None:
    procs.start(
        "render", [*netns.exec_prefix(RENDER_NS), str(bins["simulator"]), *renderer_args(renderer)], logs
    )


def start_pickers(
    procs: Processes,
    topo: topology.Topology,
    config_text: str,
    bins: dict[str, Path],
    run_dir: Path,
    kubeconfig: Path,
    logs: Path,
    tag: str,
) -> list[str]:
    config_file = run_dir / f"config-{tag}" / "epp.yaml"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(config_text)
    addresses = []
    for i in range(topo.picker.replicas):
        name = f"{topo.picker.name}-{i}"
        env = {
            "KUBECONFIG": str(kubeconfig),
            "NAMESPACE": topo.namespace,
            "POD_NAME": name,
            **topo.picker.env,
        }
        argv = [
            *netns.exec_prefix(f"picker-{i}", hostname=name),
            str(bins["epp"]),
            *picker_args(topo.picker.args, config_file),
        ]
        procs.start(f"picker-{i}-{tag}", argv, logs, env)
        port = next(a.split("=")[1] for a in topo.picker.args if a.startswith("--grpc-port="))
        addresses.append(f"{PICKER_IPS[i]}:{port}")
    return addresses


def idle(urls: list[str]) -> bool:
    """No engine runs or queues a request (read from inside the gateway's namespace)."""
    for url in urls:
        text = netns.fetch(GATEWAY_NS, url)
        if text is None:
            return False
        if report.metric_sum(text, report.WAITING) + report.metric_sum(text, RUNNING) > 0:
            return False
    return True


RUNNING = "vllm:num_requests_running"


def leader(kube: Kube, namespace: str) -> str | None:
    for lease in kube.list("coordination.k8s.io/v1", "Lease", namespace):
        holder = lease.get("spec", {}).get("holderIdentity") or ""
        if holder:
            return str(holder).split("_")[0]
    return None


def gateway_status(ip: str) -> dict[str, Any]:
    """The Gateway's status as its controller sets it once it serves: its address."""
    return {"status": {"addresses": [{"type": "IPAddress", "value": ip}]}}


def listener_port(gateway: dict[str, Any]) -> int:
    listeners = gateway["spec"].get("listeners") or []
    if not listeners:
        raise ValueError(f"Gateway {gateway['metadata']['name']} has no listener")
    return int(listeners[0]["port"])


_ANSWERED = re.compile(r"^request\s+POST \S+: HTTP 200 in [0-9.]+ s: .+")


def answered(lines: list[str]) -> bool:
    """`llmd-fleet status --request` printed an answered request: HTTP 200 with content (the
    answer's text follows the time)."""
    return any(_ANSWERED.match(line) for line in lines)


def context_flag(kubeconfig: Path) -> list[str]:
    """`--context` naming the twin kubeconfig's own context: a stack may name its cluster's
    context (local-sim: `kind-llmd`), which the twin's kubeconfig does not have, and a user with
    a differently named context passes the flag the same way."""
    current = (yaml.safe_load(kubeconfig.read_text()) or {}).get("current-context")
    return ["--context", str(current)] if current else []


def status_check(
    procs: Processes,
    bins: dict[str, Path],
    pickers: list[str],
    picker: topology.Picker,
    port: int,
    stack: str,
    kubeconfig: Path,
    root: Path,
    logs: Path,
    stacks_flag: list[str] | None = None,
) -> tuple[list[str], int]:
    """Serve through the gateway stand-in on the Gateway's address and listener port, then run
    `llmd-fleet status STACK --kubeconfig KUBECONFIG --request` as a user would, from the client
    namespace (it reads the Gateway's address from its status). Its output lines and exit code."""
    argv = gateway_argv(bins, pickers, picker, f"--listen={GATEWAY_IP}:{port}")
    procs.start("gateway-serve", argv, logs)
    try:
        wait_for(
            "the gateway stand-in listening",
            lambda: netns.connects(CLIENT_NS, GATEWAY_IP, port),
            30,
            0.5,
        )
        command = [
            *netns.exec_prefix(CLIENT_NS),
            str(Path(sys.executable).with_name("llmd-fleet")),
            *(stacks_flag or []),
            "status",
            stack,
            "--kubeconfig",
            str(kubeconfig),
            *context_flag(kubeconfig),
            "--request",
        ]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=180, check=False)
        (logs / "status.log").write_text(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        return lines, done.returncode
    finally:
        procs.stop("gateway-serve")


def gateway_argv(bins: dict[str, Path], pickers: list[str], picker: topology.Picker, *mode: str) -> list[str]:
    """The gateway stand-in's command in its namespace: the pickers it asks, their readiness
    probes as the rendered Deployment sets them, and the mode's own flags."""
    health_port = next(a.split("=")[1] for a in picker.args if a.startswith("--grpc-health-port="))
    return [
        *netns.exec_prefix(GATEWAY_NS),
        str(bins["gateway"]),
        f"--pickers={','.join(pickers)}",
        *mode,
        f"--health={','.join(f'{ip}:{health_port}' for ip in PICKER_IPS[: picker.replicas])}",
        f"--probe-period={picker.probe_period_s}s",
        f"--probe-failures={picker.probe_failures}",
    ]


def run_replay(
    procs: Processes,
    bins: dict[str, Path],
    pickers: list[str],
    entries_file: Path,
    out: Path,
    scrape: list[str],
    logs: Path,
    picker: topology.Picker,
    deadline: str = "15s",
) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    argv = gateway_argv(
        bins,
        pickers,
        picker,
        f"--replay={entries_file}",
        f"--out={out}",
        f"--scrape={','.join(scrape)}",
        f"--pick-deadline={deadline}",
        "--series-period=1s",
    )
    proc = procs.start(f"gateway-{out.name}", argv, logs)
    proc.wait(timeout=900)
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def scrapes(out: Path, tag: str) -> list[str]:
    return [p.read_text() for p in sorted(out.glob(f"{tag}-*.prom"))]


def picture(series: dict[str, dict[str, list[tuple[float, float]]]], stack: str) -> str:
    """Hit rate per second of each config's steady replay, and the engines' waiting requests
    (scaled to the most seen) over the rendered config's three phases one after the other."""
    lines: dict[str, list[tuple[float, float]]] = {}
    for tag, s in series.items():
        lines[f"hit rate, {tag}"] = s["hit rate"]
    waiting = series.get("rendered", {}).get("waiting", [])
    top = max((y for _, y in waiting), default=0.0)
    if top > 0:
        lines[f"waiting, rendered (max {top:.0f})"] = [(x, y / top) for x, y in waiting]
    return report.svg(lines, f"{stack}: prefix-cache hit rate and queueing over time")


def samples_of(out: Path) -> list[dict[str, Any]]:
    path = out / "series.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def joined(phases: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The phases' periodic scrapes on one clock (each phase after the previous one's last)."""
    out: list[dict[str, Any]] = []
    offset = 0.0
    for samples in phases:
        out += [{**x, "t_ms": x["t_ms"] + offset} for x in samples]
        if samples:
            offset += samples[-1]["t_ms"] + 1000
    return out


def break_kv_events_port(text: str) -> str:
    """The KV-events negative control: the precise producer's subscribers dial a port no engine
    publishes on (`podDiscoveryConfig.socketPort` + 1000, a router/engine port mismatch),
    everything else unchanged. Only the speculative entries of its own routing decisions remain."""
    config = yaml.safe_load(text)
    for p in config["plugins"]:
        if p.get("type") == "precise-prefix-cache-producer":
            discovery = ((p.get("parameters") or {}).get("kvEventsConfig") or {}).get("podDiscoveryConfig")
            if discovery and discovery.get("socketPort"):
                discovery["socketPort"] = int(discovery["socketPort"]) + 1000
                return str(yaml.safe_dump(config, sort_keys=False))
    raise ValueError("the config has no precise prefix producer with a KV-events socket port to break")


def upstream_requests(log: Path) -> list[dict[str, Any]]:
    """The gateway stand-in's record of the agentic API's upstream requests (one JSON line each)."""
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def responses_phase(
    procs: Processes,
    topo: topology.Topology,
    bins: dict[str, Path],
    logs: Path,
    run_dir: Path,
    kubeconfig: Path,
    config_text: str,
    kv_events_port: int | None,
    agentic: responses.Rendered,
    binary: Path,
    model: str,
    stack: str,
) -> dict[str, Any]:
    """The Responses phase with the rendered router: the pods with the output-id stand-in, two
    pickers with the rendered config, the gateway stand-in serving the agentic API's upstream
    host and port, then devtools/dataplane/responses.py."""
    records_dir = run_dir / "responses-records"
    records_dir.mkdir(parents=True, exist_ok=True)
    records = start_pods(procs, topo, bins, logs, kv_events_port, mend=records_dir)
    pickers = start_pickers(procs, topo, config_text, bins, run_dir, kubeconfig, logs, "responses")
    warm = run_dir / "warm-responses"
    warm_file = run_dir / "warm.jsonl"
    wait_for(
        "responses: a request routed",
        lambda: any(
            r["outcome"] == "served"
            for r in run_replay(procs, bins, pickers, warm_file, warm, [], logs, topo.picker, "5s")
        ),
        120,
        2,
    )
    port = agentic.upstream_port
    procs.start(
        "gateway-upstream", gateway_argv(bins, pickers, topo.picker, f"--listen={GATEWAY_IP}:{port}"), logs
    )
    phase = responses.Phase(
        start=lambda name, argv, env: procs.start(name, argv, logs, env, inherit=False),
        stop=procs.stop,
        binary=binary,
        version=agentic_env.agentic_version(),
        rendered=agentic,
        model=model,
        client_ns=CLIENT_NS,
        run_dir=run_dir,
        records=records,
        decode_pods={p.name for p in topo.role("decode")},
    )
    try:
        out = responses.run_phase(phase, stack)
    finally:
        procs.stop("gateway-upstream")
        procs.stop("picker-")
        procs.stop("pod-")
    upstream = upstream_requests(logs / "gateway-upstream.log")
    expected_host = agentic.upstream_host + ("" if port == 80 else f":{port}")
    out["upstream"] = {
        "requests": len(upstream),
        "hosts": sorted({str(u.get("host")) for u in upstream}),
        "health": sum(1 for u in upstream if u.get("path") == "/health" and u.get("status") == 200),
        "responses": sum(1 for u in upstream if str(u.get("path", "")).startswith("/v1/responses")),
    }
    out["upstream"]["rendered_host"] = expected_host
    return out


def endpoint_sets(pods: list[topology.Pod]) -> tuple[list[str], set[str], set[str]]:
    """What the replay reads of the serving pods (pure): the engines' metrics URLs it scrapes,
    the prefill endpoints (engine ports of prefill pods) and the decode endpoints (the routing
    sidecar's ports of decode pods), by which it tells where a request was prefilled."""

    def addresses(role: str | None, engine: bool) -> list[str]:
        """`ip:port` of the engine's (or, with engine False, the other containers') ports, of
        `role`'s pods or every pod's."""
        return [
            f"{p.ip}:{port}"
            for p in pods
            if role is None or p.role == role
            for c in p.containers
            if (c.name == topology.SIMULATOR) == engine
            for port in c.ports
        ]

    scrape = [f"http://{a}/metrics" for a in addresses(None, engine=True)]
    prefill = set(addresses("prefill", engine=True))
    decode = set(addresses("decode", engine=False))
    return scrape, prefill, decode


@dataclass
class Bench:
    """What the replay phases need, whoever started the pods: this module's `start_pods` (`make
    dataplane`) or the day-two replay's process kubelet (devtools/daytwo/routing.py). `scrape`,
    `prefill` and `decode` are the serving pods' (`endpoint_sets`); `files` the replay files."""

    procs: Processes
    bins: dict[str, Path]
    logs: Path
    run_dir: Path
    picker: topology.Picker
    cap: topology.Capacity
    wave: replay.Flood
    files: dict[str, Path]
    scrape: list[str]
    prefill: set[str]
    decode: set[str]

    @classmethod
    def of(
        cls,
        procs: Processes,
        topo: topology.Topology,
        bins: dict[str, Path],
        logs: Path,
        run_dir: Path,
        shape: replay.Shape,
        model: str,
        phases: tuple[str, ...] = ("steady", "overload"),
    ) -> "Bench":
        """The bench of `topo` (its pods, its rendered capacity), with the replay files of
        `phases` written under `run_dir`."""
        bands = replay.bands_of(topo.objectives)
        cap = topology.capacity(topo)
        wave = replay.flood(cap.decode_seqs, cap.saturating_waiting, cap.itl_ms)
        generators = {
            "steady": lambda: replay.generate(shape, model, bands),
            "overload": lambda: replay.overload(shape, wave, model, bands),
            "failover": lambda: replay.failover(shape, model, bands),
        }
        files = {}
        for phase in phases:
            files[phase] = run_dir / f"replay-{phase}.jsonl"
            files[phase].write_text(replay.write(generators[phase]()))
        scrape, prefill, decode = endpoint_sets(topo.pods)
        return cls(procs, bins, logs, run_dir, topo.picker, cap, wave, files, scrape, prefill, decode)

    def replay(self, tag: str, phase: str, pickers: list[str]) -> tuple[Path, list[dict[str, Any]]]:
        out = self.run_dir / tag / phase
        results = run_replay(
            self.procs, self.bins, pickers, self.files[phase], out, self.scrape, self.logs, self.picker
        )
        return out, results


def steady_phase(bench: Bench, tag: str, pickers: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The steady replay through `pickers`: hit rate, TTFT, stickiness and P/D over this replay
    alone (report.figures), and its periodic scrapes."""
    out, results = bench.replay(tag, "steady", pickers)
    figs = report.figures(results, scrapes(out, "before"), scrapes(out, "after"), bench.prefill, bench.decode)
    return figs, samples_of(out)


def overload_phase(
    bench: Bench,
    tag: str,
    pickers: list[str],
    figs: dict[str, Any],
    max_wave: int = MAX_WAVE,
    budget: str = "this machine replays",
) -> list[dict[str, Any]]:
    """The overload wave once the steady replay is done (flow control in its own window), its
    figures into `figs["flow_control"]`; or, for a wave over `max_wave` (the machine's budget,
    `budget` saying whose), why it is not run (`figs["flow_control_not_run"]`). Its periodic
    scrapes."""
    if bench.wave.count > max_wave:
        figs["flow_control_not_run"] = (
            f"the overload wave for these engines is {bench.wave.count} requests, "
            f"more than the {max_wave} {budget}"
        )
        return []
    out, results = bench.replay(tag, "overload", pickers)
    samples = samples_of(out)
    fc = report.flow_control(results)
    fc["peak_saturation"] = report.peak_saturation(samples, bench.cap.queue_depth, bench.cap.kv_threshold)
    fc["shed_at"] = bench.cap.shed_at
    figs["flow_control"] = fc
    # Drain: what follows starts with the engines idle again (bounded: a gauge left over by a
    # refused request must not stop the run; recorded).
    drain_until = time.monotonic() + 30
    while not idle(bench.scrape) and time.monotonic() < drain_until:
        time.sleep(1)
    fc["drained_before_failover"] = idle(bench.scrape)
    return samples


def main_run(
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
    started = time.monotonic()
    # The twin's API server takes its Kubernetes version from the stack file; a scaled copy's is its
    # reference's.
    twin_stack = stack
    stack, stacks_flag, run_dir, logs, render = rendered_run(stack, root, scaled_down)
    topo = topology.topology(render)
    if ranks_per_pod is not None:
        topo = topology.with_ranks_per_pod(topo, ranks_per_pod)
    bins: dict[str, Path] = {}
    for target in (build.ROUTER, build.SIMULATOR):
        folder = build.ensure(target)
        for b in target.binaries:
            bins["simulator" if b == "llm-d-inference-sim" else b] = folder / b
    # The Responses phase (devtools/dataplane/responses.py), for a stack that renders the agentic API.
    agentic = None
    if with_responses and not (broken or broken_kv_events):
        try:
            agentic = responses.rendered(render)
        except ValueError as exc:  # a stack whose database the twin cannot stand in for
            print(f"responses: not run: {exc}")
    agentic_binary = agentic_env.ensure() if agentic is not None else None
    rendered_config = topo.picker.config
    if broken:
        rendered_config = break_render_url(rendered_config)
    kv_events_port = None
    if kv_events or broken_kv_events:
        kv_events_port = topology.kv_events_socket_port(topo.picker.config)
        publishing = [c for p in topo.pods for c in p.containers if c.vllm and c.vllm.kv_events]
        if kv_events_port is None or not publishing:
            raise ValueError(
                f"{stack}: --kv-events needs a precise prefix producer that discovers pods "
                "(kvEventsConfig.podDiscoveryConfig.socketPort) and engines rendered with KV events"
            )
    if broken_kv_events:
        rendered_config = break_kv_events_port(rendered_config)
    bands = replay.bands_of(topo.objectives)
    # The name clients send: the last served name (the first is its label form when they differ,
    # llmd_fleet.config.model.served_model_names).
    model = next(
        names[-1] for p in topo.pods for c in p.containers if (names := topology.served_names(c.args))
    )
    shape = replay.fit(replay.LONG if long else replay.SHORT, topology.pd_threshold(topo.picker.config))
    procs = Processes([])
    phases = ("steady", "overload", "failover")
    bench = Bench.of(procs, topo, bins, logs, run_dir, shape, model, phases)
    cap, wave, files = bench.cap, bench.wave, bench.files
    forwarder = None
    try:
        cluster.up(twin_stack, apiserver_only=True, root=root)
        kube = cluster.client(root)
        for crd in manifests.vendored_crds():
            if crd["spec"]["group"] in CRD_GROUPS:
                kube.apply(crd)
        time.sleep(3)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": topo.namespace}})
        # No controller manager runs: the ServiceAccount admission needs the default account.
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": topo.namespace},
            }
        )
        wait_for(
            "router CRDs served",
            lambda: kube.served("inference.networking.k8s.io/v1", "InferencePool"),
            60,
        )
        wait_for(
            "DisaggregatedSet and Gateway CRDs served",
            lambda: (
                kube.served("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet")
                and kube.served("gateway.networking.k8s.io/v1", "Gateway")
            ),
            60,
        )
        for obj in [topo.pool, *topo.objectives, topo.serving_set, topo.gateway]:
            kube.apply(obj)
        # The Gateway's address, as its controller would set it: the stand-in's.
        kube.request(
            "PATCH",
            kube.object_path(topo.gateway) + "/status",
            gateway_status(GATEWAY_IP),
            "application/merge-patch+json",
        )
        for pod in topo.pods:
            obj = pod_object(pod, topo.namespace)
            kube.apply(obj)
            kube.request(
                "PATCH", kube.object_path(obj) + "/status", pod_status(pod.ip), "application/merge-patch+json"
            )
        spaces = [(GATEWAY_NS, GATEWAY_IP), (CLIENT_NS, CLIENT_IP)] + [
            (f"picker-{i}", PICKER_IPS[i]) for i in range(topo.picker.replicas)
        ]
        if topo.renderer:
            spaces.append((RENDER_NS, RENDER_IP))
        spaces += [(p.name, p.ip) for p in topo.pods]
        if agentic is not None:
            spaces += responses.spaces(agentic)
        netns.setup(spaces)
        if topo.renderer:
            # The Service name resolves to the render pod inside every namespace of the run.
            netns.write_hosts([name for name, _ in spaces], {topo.renderer.host: RENDER_IP})
            start_renderer(procs, topo.renderer, bins, logs)
        if agentic is not None:
            # The agentic API's upstream host names the gateway stand-in in its replicas'
            # namespaces, as the upstream Service over the gateway's proxies does in a cluster.
            netns.write_hosts(
                [responses.replica_ns(i) for i in range(agentic.replicas)],
                {agentic.upstream_host: GATEWAY_IP},
            )
        state = cluster.load_state(root)
        forwarder = netns.Forwarder(
            [f"picker-{i}" for i in range(topo.picker.replicas)] + [CLIENT_NS],
            "127.0.0.1",
            state.ports["apiserver"],
        )
        kubeconfig = cluster.twin_dir(root) / "kubeconfig"
        scrape = bench.scrape
        result: dict[str, Any] = {
            "stack": stack,
            "bands": bands,
            "long": long,
            "broken": broken,
            "kv_events": kv_events_port is not None,
            "broken_kv_events": broken_kv_events,
            "ranks_per_pod": ranks_per_pod,
            "capacity": vars(cap),
            "flood": vars(wave),
        }
        series: dict[str, dict[str, list[tuple[float, float]]]] = {}
        first = replay.generate(shape, model, bands)[0]
        for tag, text in (("rendered", rendered_config), ("baseline", baseline_config(rendered_config))):
            start_pods(procs, topo, bins, logs, kv_events_port)
            pickers = start_pickers(procs, topo, text, bins, run_dir, kubeconfig, logs, tag)
            warm = run_dir / f"warm-{tag}"
            warm_file = run_dir / "warm.jsonl"
            warm_file.write_text(replay.write([{**first, "id": "warmup", "session": "warmup"}]))

            def warmed(pickers: list[str] = pickers, warm: Path = warm, warm_file: Path = warm_file) -> bool:
                results = run_replay(procs, bins, pickers, warm_file, warm, [], logs, topo.picker, "5s")
                return any(r["outcome"] == "served" for r in results)

            wait_for(f"{tag}: a request routed", warmed, 120, 2)
            if tag == "rendered":
                # The user-facing check, once routing works: `llmd-fleet status --request`.
                port = listener_port(topo.gateway)
                lines, code = status_check(
                    procs, bins, pickers, topo.picker, port, stack, kubeconfig, root, logs, stacks_flag
                )
                result["status"] = {"lines": lines, "exit": code, "answered": answered(lines)}

            # Steady replay: hit rate, TTFT, stickiness, P/D, over this replay alone.
            figs, steady_samples = steady_phase(bench, tag, pickers)
            if tag == "rendered" and not broken:
                overload_samples = overload_phase(bench, tag, pickers, figs)
                # Failover: stop the leader mid-replay; nothing else runs meanwhile.
                killed: dict[str, Any] = {}
                out = run_dir / tag / "failover"

                def stop_leader(
                    killed: dict[str, Any] = killed, out: Path = out, pickers: list[str] = pickers
                ) -> None:
                    clock = out / "start_unix_ms"
                    while not clock.exists():
                        time.sleep(0.05)
                    start_ms = float(clock.read_text())
                    time.sleep(max(0.0, (start_ms + shape.failover_at_ms) / 1000 - time.time()))
                    who = leader(kube, topo.namespace)
                    for i in range(topo.picker.replicas):
                        if who == f"{topo.picker.name}-{i}":
                            killed["at_ms"] = time.time() * 1000 - start_ms
                            killed["picker"] = pickers[i]
                            procs.stop(f"picker-{i}-")

                threading.Thread(target=stop_leader, daemon=True).start()
                results = run_replay(procs, bins, pickers, files["failover"], out, scrape, logs, topo.picker)
                figs["failover"] = report.failover(results, killed.get("at_ms"), killed.get("picker"))
                series[tag] = report.time_series(joined([steady_samples, overload_samples, samples_of(out)]))
                series[tag]["hit rate"] = report.time_series(steady_samples)["hit rate"]
            else:
                series[tag] = {"hit rate": report.time_series(steady_samples)["hit rate"]}
            result[tag] = figs
            procs.stop("picker-")
            procs.stop("pod-")
        if agentic is not None and agentic_binary is not None:
            result["responses"] = responses_phase(
                procs,
                topo,
                bins,
                logs,
                run_dir,
                kubeconfig,
                rendered_config,
                kv_events_port,
                agentic,
                agentic_binary,
                model,
                stack,
            )
        result["seconds"] = round(time.monotonic() - started)
        result["series"] = series
        result["failures"] = report.checks(result)
        if "responses" in result:
            result["failures"] += responses.checks(result["responses"])
        (run_dir / "report.json").write_text(json.dumps(result, indent=2) + "\n")
        (run_dir / "report.svg").write_text(picture(series, stack))
        for line in report.lines(result):
            print(line)
        if "responses" in result:
            for line in responses.lines(result["responses"]):
                print(line)
        print(f"dataplane: {stack} in {result['seconds']} s; report {run_dir}/report.json, report.svg")
        for failure in result["failures"]:
            print(f"dataplane: FAIL: {failure}", file=sys.stderr)
        return 1 if result["failures"] else 0
    finally:
        procs.stop()
        if forwarder:
            forwarder.close()
        netns.teardown()
        cluster.down(root)


def rendered_run(stack: str, root: Path, scaled_down: bool) -> tuple[str, list[str], Path, Path, Path]:
    """A fresh run folder under build/dataplane/ with the stack rendered into it: the stack's name
    (its scaled-down copy's with `scaled_down`: devtools/dataplane/scaled.py, rendered from a stacks
    folder of its own, which `llmd-fleet status` is pointed at too), the `--stacks-dir` flag that
    copy needs, the run folder, its logs folder and the render."""
    stacks_flag: list[str] = []
    if scaled_down:
        copy_dir = root / "build" / "dataplane" / "stacks"
        stack = scaled.write_scaled(stack, root / "stacks", copy_dir)
        stacks_flag = ["--stacks-dir", str(copy_dir)]
    run_dir = root / "build" / "dataplane" / stack
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    logs = run_dir / "logs"
    logs.mkdir(parents=True)
    render = run_dir / "render"
    subprocess.run(
        [
            str(Path(sys.executable).with_name("llmd-fleet")),
            *stacks_flag,
            "render",
            stack,
            "--out",
            str(render),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return stack, stacks_flag, run_dir, logs, render
