"""The parts of one data-plane run of a stack (docs/twin.md), which devtools/dataplane/phases.py
`main_run` puts together: the rendering (`rendered_run`), the pods in the twin's API server (they
carry their address in the run's pod network, set in their status as a kubelet would), the
simulators and routing sidecars inside the pods' namespaces with their rendered arguments
(`start_pods`), two picker replicas with the rendered flags and config (`start_pickers`), and the
replay through the gateway stand-in (`run_replay`), with the rendered config or the baseline (the
same config without the prefix, session and no-hit scorers in any profile: `baseline_config`)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from devtools.dataplane import netns, relay, scaled, topology
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


# How long a stopped process may take to exit before it is killed.
STOP_GRACE_S = 10.0
# The same for endpoint pickers a run replaces between two measurements, when no request is in
# flight: the picker gives up its lease at SIGTERM (controller-runtime's leader election releases it
# on cancel, logged within 0.1 s) and then keeps a drain window (llm-d-router v0.10.0
# cmd/epp/runner/runner.go: "draining (NotServing) while finishing in-flight requests",
# drainTimeout 30 s) that has nothing to finish; without this the swap waited STOP_GRACE_S each time.
PICKER_SWAP_GRACE_S = 2.0


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

    def stop(self, name_prefix: str = "", grace: float = STOP_GRACE_S) -> None:
        """SIGTERM to every process named `name_prefix...`, SIGKILL to those still running after
        `grace` seconds."""
        for name, proc in list(self.items):
            if name.startswith(name_prefix) and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        # One deadline for all of them: they were signalled together, so n slow processes take
        # `grace`, not n x `grace`.
        deadline = time.monotonic() + grace
        for name, proc in list(self.items):
            if name.startswith(name_prefix):
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
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
    spaces: Sequence[tuple[str, str]] | None = None,
    only: Collection[int] | None = None,
    name_prefix: str = "picker-",
) -> list[str]:
    """The rendered picker Deployment's replicas as processes `<name_prefix><i>-<tag>`, each in
    its network namespace at its address (`spaces`, (namespace, address) per replica; the
    pickers' own, `picker_spaces`, unless given); their ext_proc addresses. `only`: start just
    these replicas (one its Deployment recreates), the addresses still every replica's."""
    spaces = list(spaces if spaces is not None else picker_spaces(topo.picker.replicas))
    if len(spaces) < topo.picker.replicas:
        raise ValueError(f"{topo.picker.replicas} pickers need as many namespaces, {len(spaces)} given")
    config_file = run_dir / f"config-{tag}" / "epp.yaml"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(config_text)
    port = next(a.split("=")[1] for a in topo.picker.args if a.startswith("--grpc-port="))
    addresses = []
    for i, (space, ip) in enumerate(spaces[: topo.picker.replicas]):
        name = f"{topo.picker.name}-{i}"
        env = {
            "KUBECONFIG": str(kubeconfig),
            "NAMESPACE": topo.namespace,
            "POD_NAME": name,
            **topo.picker.env,
        }
        argv = [
            *netns.exec_prefix(space, hostname=name),
            str(bins["epp"]),
            *picker_args(topo.picker.args, config_file),
        ]
        if only is None or i in only:
            procs.start(f"{name_prefix}{i}-{tag}", argv, logs, env)
        addresses.append(f"{ip}:{port}")
    return addresses


def picker_spaces(replicas: int) -> list[tuple[str, str]]:
    """The pickers' network namespaces and addresses: `picker-<i>` at PICKER_IPS[i] (pure)."""
    return [(f"picker-{i}", PICKER_IPS[i]) for i in range(replicas)]


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
    """The gateway stand-in's command in its namespace: the pickers it asks (ext_proc addresses),
    their readiness probes as the rendered Deployment sets them (the health port at each
    picker's address), and the mode's own flags."""
    health_port = next(a.split("=")[1] for a in picker.args if a.startswith("--grpc-health-port="))
    hosts = [address.rsplit(":", 1)[0] for address in pickers]
    return [
        *netns.exec_prefix(GATEWAY_NS),
        str(bins["gateway"]),
        f"--pickers={','.join(pickers)}",
        *mode,
        f"--health={','.join(f'{host}:{health_port}' for host in hosts)}",
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
