"""Precise (KV-event) prefix routing on the day-two replay's twin (docs/day-two.md, "The reference
with precise prefix routing"): the single-model half of `make dataplane-reference`, in a namespace
of its own beside the day-two deployment.

The day-two stack's engine is the inference simulator, which the library refuses with
`router.prefixRouting: precise` (components/llmd_fleet/layers/serving/rules.py), so the routing
phase's figures (routing.py) are approximate prefix routing's. This phase renders STACK scaled as
`make dataplane-reference` renders it (devtools/dataplane/scaled.py: one instance per role; vLLM
engines mapped onto simulators; RANKS_PER_POD ranks per pod) with its `serving.namespace` set to
NAMESPACE, puts its InferencePool, InferenceObjectives and pods into the replay's twin as beside.py
does (the DisaggregatedSet stays out), and measures with the data-plane twin's functions
(devtools/dataplane/run.py `start_pods`, `start_pickers`; phases.py `Bench`, `steady_phase`,
`overload_phase`; report.py `lines`, `checks`):

1. the rendered config: every rank a simulator of its own publishing KV events through a relay
   per pod to both pickers' precise prefix producers, the steady replay through the gateway
   stand-in, then the overload wave or why it is not run;
2. the baseline config (cache- and session-aware scorers removed) over the same replay, the pods
   started afresh (empty caches), as `make dataplane-reference` starts them per config.

The pickers, the render stand-in (RENDER_HOST) and the pods each have a namespace and an address
of their own (`spaces`): nothing is shared with the replay's deployment, so the phase runs beside
the alerts' fault, which stops and restarts the replay's pickers (run.py `beside_alerts`).
The render Services' names are mapped in the pickers' hosts files.

Printed: `make dataplane-reference`'s lines for the single-model reference but `failover:` and
`status:` (`printed`), which the replay prints from its own deployment:
- `failover:`: the replay stops the leader picker under its own traffic (faults_phase.py). What it
  measures (the rendered picker Deployment's lease, the gateway's readiness probes) has the same
  shape in both stacks; precise routing does not enter it (both replicas subscribe to every rank's
  KV events all along, so the new leader's index is as warm as the old one's).
- `status:`: the routing phase runs `llmd-fleet status --request` on the day-two deployment;
  here the reference's DisaggregatedSet is not in the twin (beside.py), so status would count
  groups the twin does not have.
"""

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.dataplane import netns, phases, relay, replay, report, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import beside, routing
from devtools.twin import cluster
from devtools.twin.kube import wait_for

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# `make dataplane-reference`'s stack and ranks per pod (the Makefile's DATAPLANE_REFERENCE_STACK
# and DATAPLANE_REFERENCE_RANKS; a test holds them equal).
STACK = "onprem-h100"
RANKS_PER_POD = 2
NAMESPACE = "llm-d-reference"
# Pod addresses: above the multi-model phase's (models_phase.FIRST_HOST on, 14 pods), below the
# multi-model pickers' (multimodel.PICKER_HOST); the render stand-in's between the two. The phases
# run one after the other, but no address is taken twice, so no neighbour cache holds a stale one.
FIRST_HOST = 170
RENDER_HOST = 195
RENDER_NS = "render-reference"
# The pickers' addresses: between the pods' and the render stand-in's.
PICKER_HOSTS = (190, 191)
# veth indexes: above the multi-model phase's (950 on, 19 namespaces), below the process
# kubelet's (1000 on).
FIRST_VETH = 972
# Lines of report.lines this phase leaves to the replay (the module's docstring says why).
LEFT_TO_THE_REPLAY = ("failover:", "status:")


def printed(result: dict[str, Any]) -> list[str]:
    """`make dataplane-reference`'s lines for `result` but those in LEFT_TO_THE_REPLAY (pure)."""
    return [line for line in report.lines(result) if not line.startswith(LEFT_TO_THE_REPLAY)]


def detail_line(stack: str, pods: int, seconds: float) -> str:
    """The line before the figures: stack, namespace, routing mode, pods and their time (pure)."""
    return (
        f"day-two: reference: {stack} in namespace {NAMESPACE}, precise prefix routing "
        f"(KV events relayed per rank): {pods} pods ready in {seconds:.0f} s"
    )


def closing_line(seconds: float, subscribed: list[int], streams: int) -> str:
    """The line after the figures: the phase's time, how many of the ranks' KV-event streams each
    picker of the rendered config subscribed to, and what it leaves to the replay (pure)."""
    return (
        f"day-two: reference: figures in {seconds:.0f} s; the pickers subscribed to "
        f"{', '.join(str(n) for n in subscribed)} of {streams} ranks' KV-event streams "
        "(failover and status: the replay's own lines, from the day-two deployment)"
    )


# What the picker's KV-event subscriber logs once it has dialled a rank's stream (llm-d-router
# v0.10.0's kv-cache module, kvevents/zmq_subscriber.go: "Connected subscriber socket", with the
# endpoint it dialled).
SUBSCRIBED = "Connected subscriber socket"


def streams(topo: topology.Topology, socket_port: int) -> set[str]:
    """The endpoints the pickers' precise prefix producers dial: each publishing rank's, at its
    pod's address and socket port + rank (devtools/dataplane/relay.py `relay_endpoints`); pure."""
    return {
        pair.outbound
        for pod in topo.pods
        for c in pod.containers
        if c.vllm and c.vllm.kv_events
        for pair in relay.relay_endpoints(pod.ip, socket_port, c.vllm.ranks, dataplane.RELAY_INBOUND)
    }


def subscribed(log: str, wanted: set[str]) -> int:
    """How many of `wanted` a picker's log (JSON lines) says it subscribed to (pure)."""
    seen = set()
    for line in log.splitlines():
        if SUBSCRIBED not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == SUBSCRIBED:
            seen.add(str(entry.get("endpoint")))
    return len(seen & wanted)


def served_model(topo: topology.Topology) -> str:
    """The name clients send: the last served name, as `make dataplane` sends it (pure)."""
    return next(
        names[-1] for p in topo.pods for c in p.containers if (names := topology.served_names(c.args))
    )


def picker_spaces(replicas: int) -> list[tuple[str, str]]:
    """The phase's pickers' namespaces and addresses (pure)."""
    return [
        (f"picker-reference-{i}", f"{topology.POD_SUBNET}.{host}")
        for i, host in enumerate(PICKER_HOSTS[:replicas])
    ]


def spaces(topo: topology.Topology) -> list[tuple[str, str]]:
    """The namespaces the phase adds to the replay's pod network: its render stand-in's, its
    pickers' and its pods' (pure)."""
    out = [*picker_spaces(topo.picker.replicas), *((p.name, p.ip) for p in topo.pods)]
    if topo.renderer:
        out.insert(0, (RENDER_NS, f"{topology.POD_SUBNET}.{RENDER_HOST}"))
    return out


def hosts(day_two: topology.Topology, topo: topology.Topology) -> dict[str, str]:
    """The render Services' names and the stand-ins serving them: the day-two stack's and this
    phase's (pure)."""
    out = {}
    if day_two.renderer:
        out[day_two.renderer.host] = dataplane.RENDER_IP
    if topo.renderer:
        out[topo.renderer.host] = f"{topology.POD_SUBNET}.{RENDER_HOST}"
    return out


def render_reference(run: "Replay") -> tuple[str, Path]:
    """The scaled reference, in NAMESPACE, rendered; its stack name and render."""
    return beside.render_scaled(run, STACK, NAMESPACE, "reference")


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """The rendered and baseline configs' steady replays on the reference's pods; the lines and
    failures."""
    if run.kubelet is None:
        return ["day-two: reference: not run (the replay's twin has no process kubelet nodes)"], []
    began = time.monotonic()
    node = beside.live_node(run)
    name, render = render_reference(run)
    topo = topology.with_ranks_per_pod(topology.topology(render), RANKS_PER_POD)
    [topo] = beside.moved([topo], FIRST_HOST, RENDER_HOST, f"the {name} pods'", "the render stand-in's")
    kv_events_port = topology.kv_events_socket_port(topo.picker.config)
    if kv_events_port is None or not any(
        c.vllm and c.vllm.kv_events for p in topo.pods for c in p.containers
    ):
        why = (
            f"{name} renders no precise prefix producer discovering pods (kvEventsConfig."
            "podDiscoveryConfig.socketPort) or no engine publishing KV events"
        )
        return [f"day-two: reference: not run ({why})"], [f"reference: {why}"]
    if topo.picker.replicas > len(PICKER_HOSTS):
        why = (
            f"{name} renders {topo.picker.replicas} pickers, the phase has addresses for {len(PICKER_HOSTS)}"
        )
        return [f"day-two: reference: not run ({why})"], [f"reference: {why}"]
    folder = run.run_dir / "reference"
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for obj in [*beside.namespace_objects(NAMESPACE), topo.pool, *topo.objectives]:
        run.kube.apply(obj)
    beside.apply_pods(run.kube, topo, node)
    network = beside.Network(FIRST_VETH)
    procs = dataplane.Processes([])
    forwarder: netns.Forwarder | None = None
    try:
        added = spaces(topo)
        network(added)
        netns.write_hosts([n for n, _ in added], hosts(run.topo, topo))
        # The pickers watch the pods through the API server, reached as in the replay's own
        # picker namespaces (run.py `Replay.start`).
        forwarder = netns.Forwarder(
            [n for n, _ in picker_spaces(topo.picker.replicas)],
            "127.0.0.1",
            cluster.load_state(run.root).ports["apiserver"],
        )
        if topo.renderer:
            procs.start(
                "render",
                [
                    *netns.exec_prefix(RENDER_NS),
                    str(run.bins["simulator"]),
                    *dataplane.renderer_args(topo.renderer),
                ],
                logs,
            )
        result, ready_s = _measure(run, name, topo, procs, folder, logs, kv_events_port)
    finally:
        procs.stop()
        if forwarder is not None:
            forwarder.close()
        network.close()
    wanted = streams(topo, kv_events_port)
    counts = [
        subscribed(_read(logs / f"picker-{i}-rendered.log"), wanted) for i in range(topo.picker.replicas)
    ]
    result["subscribed"] = {"streams": len(wanted), "pickers": counts}
    (folder / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        detail_line(name, len(topo.pods), ready_s),
        *printed(result),
        closing_line(time.monotonic() - began, counts, len(wanted)),
    ]
    failures = list(result["failures"])
    if any(n < len(wanted) for n in counts):
        failures.append(
            f"a picker subscribed to fewer than the {len(wanted)} ranks' KV-event streams ({counts})"
        )
    return lines, [f"reference: {f}" for f in failures]


def answering(bench: phases.Bench) -> bool:
    """Every engine's metrics endpoint answers and every decode endpoint (routing sidecar) takes
    a connection, from the gateway stand-in's namespace."""
    if not all(netns.fetch(dataplane.GATEWAY_NS, url) is not None for url in bench.scrape):
        return False
    for address in sorted(bench.decode):
        host, port = address.rsplit(":", 1)
        if not netns.connects(dataplane.GATEWAY_NS, host, int(port)):
            return False
    return True


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _measure(
    run: "Replay",
    stack: str,
    topo: topology.Topology,
    procs: dataplane.Processes,
    folder: Path,
    logs: Path,
    kv_events_port: int,
) -> tuple[dict[str, Any], float]:
    """Both configs' steady replays (the overload wave or why not after the rendered one's): the
    result as `make dataplane-reference` records it, and the seconds from the rendered config's
    pods starting to its first routed request."""
    model = served_model(topo)
    bands = replay.bands_of(topo.objectives)
    shape = replay.fit(replay.SHORT, topology.pd_threshold(topo.picker.config))
    bench = phases.Bench.of(procs, topo, run.bins, logs, folder, shape, model)
    first = replay.generate(shape, model, bands)[0]
    warm_file = folder / "warm.jsonl"
    warm_file.write_text(replay.write([{**first, "id": "warmup", "session": "warmup"}]))
    result: dict[str, Any] = {
        "stack": stack,
        "namespace": NAMESPACE,
        "bands": bands,
        "kv_events": True,
        "ranks_per_pod": RANKS_PER_POD,
        "capacity": vars(bench.cap),
        "flood": vars(bench.wave),
    }
    ready_s = 0.0
    rendered = topo.picker.config
    for tag, text in (("rendered", rendered), ("baseline", dataplane.baseline_config(rendered))):
        started = time.monotonic()
        dataplane.start_pods(procs, topo, run.bins, logs, kv_events_port)
        pickers = dataplane.start_pickers(
            procs,
            topo,
            text,
            run.bins,
            folder,
            run.kubeconfig,
            logs,
            tag,
            picker_spaces(topo.picker.replicas),
        )
        warm = folder / f"warm-{tag}"

        def routed(pickers: list[str] = pickers, warm: Path = warm) -> bool:
            results = dataplane.run_replay(
                procs, run.bins, pickers, warm_file, warm, [], logs, topo.picker, "5s"
            )
            return any(r["outcome"] == "served" for r in results)

        # The pods' Ready condition is written, not probed (beside.py), so the phase waits for
        # what the readiness probes would: every engine rank serving and every routing sidecar
        # listening. Routing one request is not enough: a decode sidecar whose engine is not up
        # yet answers 503 "The decode node is not ready" (seen under load, before this wait).
        wait_for(
            f"reference {tag}: every engine and routing sidecar answering", lambda: answering(bench), 180, 1
        )
        wait_for(f"reference {tag}: a request routed", routed, 120, 2)
        if tag == "rendered":
            ready_s = time.monotonic() - started
        figs, _samples = phases.steady_phase(bench, tag, pickers)
        if tag == "rendered":
            # The replay's budget (routing.py): the reference's wave is over it, and over `make
            # dataplane-reference`'s too, so both print why it is not run.
            phases.overload_phase(bench, tag, pickers, figs, routing.REPLAY_MAX_WAVE, routing.REPLAY_BUDGET)
        result[tag] = figs
        procs.stop("picker-", grace=dataplane.PICKER_SWAP_GRACE_S)
        procs.stop("pod-")
    result["failures"] = report.checks(result)
    return result, ready_s
