"""The replay's phases of one data-plane run (docs/twin.md) and `main_run`, which runs them over
the run's pods, pickers and replay (devtools/dataplane/run.py): the steady replay (`steady_phase`),
the overload wave (`overload_phase`), the failover and the Responses phase (`responses_phase`),
once with the rendered config and once with the baseline. The day-two replay runs the same phases
over its own pods (`Bench`: devtools/daytwo/routing.py, reference_phase.py)."""

import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.agentic_check import env as agentic_env
from devtools.dataplane import build, netns, replay, report, responses, topology
from devtools.dataplane.run import (
    CLIENT_IP,
    CLIENT_NS,
    CRD_GROUPS,
    GATEWAY_IP,
    GATEWAY_NS,
    PICKER_SWAP_GRACE_S,
    RENDER_IP,
    RENDER_NS,
    Processes,
    answered,
    baseline_config,
    break_kv_events_port,
    break_render_url,
    gateway_argv,
    gateway_status,
    leader,
    listener_port,
    picker_spaces,
    pod_object,
    pod_status,
    rendered_run,
    run_replay,
    start_pickers,
    start_pods,
    start_renderer,
    status_check,
)
from devtools.twin import cluster, manifests
from devtools.twin.kube import wait_for

# The largest overload wave the run replays (requests within a second, each streaming for six):
# a budget of the machine the twin runs on (2 cores), not a figure of the config. local-sim's wave
# is 316; the quickstart's decode ranks (8 x 128 sequences) would make it 2208.
MAX_WAVE = 1000


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
    """What the replay phases need, whoever started the pods: run.py's `start_pods` (`make
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
    drain: bool = True,
) -> list[dict[str, Any]]:
    """The overload wave once the steady replay is done (flow control in its own window), its
    figures into `figs["flow_control"]`; or, for a wave over `max_wave` (the machine's budget,
    `budget` saying whose), why it is not run (`figs["flow_control_not_run"]`). Its periodic
    scrapes. `drain` False: no wait for idle engines after it (the caller restarts them next)."""
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
    if not drain:
        return samples
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
        spaces = [(GATEWAY_NS, GATEWAY_IP), (CLIENT_NS, CLIENT_IP), *picker_spaces(topo.picker.replicas)]
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
            procs.stop("picker-", grace=PICKER_SWAP_GRACE_S)
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
