"""The scaling phase of the day-two replay (docs/day-two.md, "Scaling"; the pure parts in
devtools/daytwo/scaling.py): the HPA KEDA would make from the rendered ScaledObject (applied
beside it: the twin runs no KEDA) scales the role's DisaggregatedSetRoleScaler on the trigger's
query, served from the live Prometheus by an external-metrics stand-in behind the API server's
aggregation layer; a burst of long prompts raises it, and the role comes back down after the
rendered cooldown. `run_phase` returns the `scale:` line, e2e's `scale:` line from the same
scaling and a detail line, then the lines of the scenario run beside the scale-down, and the
failures.
"""

import contextlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from devtools.dataplane import topology
from devtools.daytwo import contract, figures, prometheus, scaling
from devtools.daytwo.serving import read_results, replay_gateway, serving_pods
from devtools.twin import cluster, pki
from devtools.twin.kube import ApiError, wait_for

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# Scaling (docs/day-two.md, "Scaling"): the burst, the longest it runs before the role must have
# scaled up (HPA sync 15 s, the leader picker's scrape, one simulated load), and the longest the
# role may take to come back once it stops (the rendered cooldown, one scale-down period, a sync
# and the pods' termination).
# The backlog it holds: 5 requests/s x ~0.4 s to a first token (16,000 tokens: 20 ms + 16,000 x
# 20 us of simulated prefill, the KV transfer and one decode step) x 16,000 tokens, over the
# rendered 100,000 tokens/s = ~0.3 s, six times the 0.05 s per instance target of 3 instances.
BURST = scaling.Burst(per_second=5.0, seconds=150.0, prompt_words=16000, max_tokens=8)
# Once the HPA has scaled up (the burst's end), how long the new instance may take to turn Ready.
SCALE_UP_GRACE_S = 90.0
SCALE_DOWN_TIMEOUT_S = 420.0


def run_phase(
    run: "Replay", meanwhile: Callable[[], tuple[list[str], list[str]]] | None = None
) -> tuple[list[str], list[str]]:
    """A burst of long prompts until the HPA has scaled the autoscaled role up; then no
    traffic while the new instance turns Ready and until the role is back at its minimum.
    `meanwhile`, a scenario that needs no traffic either (the alerts' fault), runs in a thread
    from the burst's end, beside the new instance's load and the scale-down's wait: the
    rendered stabilization window is waited in full, not twice.
    Returns (contract lines, failures), `meanwhile`'s after the scaling's."""
    objects = [o for o in run.renders[0] if o["kind"] == "ScaledObject"]
    if not objects:
        alone = meanwhile() if meanwhile is not None else ([], [])
        return [f"scale: not run: the {run.stack} stack autoscales no role", *alone[0]], alone[1]
    scaled = objects[0]
    role = scaling.role_of(scaled, run.set_name)
    hpa = scaling.keda_hpa(scaled)
    a, maximum = int(hpa["spec"]["minReplicas"]), int(hpa["spec"]["maxReplicas"])
    ns, hpa_name = hpa["metadata"]["namespace"], hpa["metadata"]["name"]
    scaler = hpa["spec"]["scaleTargetRef"]["name"]
    size = next(
        int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
        for r in run.topo.serving_set["spec"]["roles"]
        if r["name"] == role
    )
    binary = scaling.ensure()
    forward = scaling.IntoNamespace(prometheus.NS, prometheus.IP, prometheus.PORT)
    aggregation: list[dict[str, Any]] = []
    try:
        config = run.run_dir / "metrics-adapter.json"
        config.write_text(
            json.dumps(
                {
                    "prometheus": f"http://127.0.0.1:{forward.port}",
                    "metrics": scaling.adapter_metrics(run.renders[0]),
                },
                indent=2,
            )
            + "\n"
        )
        certs = pki.Pki(cluster.twin_dir(run.root) / "pki")
        cert, key = pki.serving_cert(
            certs, "metrics-adapter", (f"{scaling.ADAPTER_NAME}.{scaling.ADAPTER_NAMESPACE}.svc",)
        )
        port = cluster.free_port()
        run.procs.start(
            "metrics-adapter",
            scaling.adapter_argv(binary, port, config, cert, key, run.kubeconfig),
            run.logs,
        )
        aggregation = scaling.aggregation_objects(port, certs.ca_cert.read_bytes())
        for obj in aggregation:
            run.kube.apply(obj)
        wait_for(
            f"APIService {scaling.APISERVICE_NAME} Available",
            lambda: scaling.available(
                run.kube.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{scaling.APISERVICE_NAME}")
            ),
            120,
            1.0,
        )
        pickers = run.pickers(run.topo.picker.config, "scale")
        template = figures.steady(run.model(), run.bands(), 1)[0]
        argv, out = replay_gateway(run, "scale", pickers, scaling.burst_entries(template, BURST))
        hpa_path = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{hpa_name}"
        scaler_path = f"/apis/{scaling.ROLE_SCALER_API}/namespaces/{ns}/disaggregatedsetrolescalers/{scaler}"
        peak: list[str] = []

        last = (a, a)

        def look() -> tuple[int, int]:
            """(the scaler's replicas, the role's groups Ready and not going), the HPA's metric
            kept; the last answer again while the API server does not answer."""
            nonlocal last
            try:
                status = run.kube.get(hpa_path).get("status") or {}
                peak.extend(scaling.current_values(status))
                wanted = int(run.kube.get(scaler_path)["spec"].get("replicas") or 0)
                pods = [
                    p
                    for p in serving_pods(run.kube, run.topo.namespace, run.set_name)
                    if p["metadata"]["labels"].get(topology.DS_ROLE) == role
                ]
            except ApiError:
                return last
            last = (wanted, scaling.ready_groups(pods, size))
            return last

        def role_pods() -> list[dict[str, Any]]:
            return [
                p
                for p in serving_pods(run.kube, run.topo.namespace, run.set_name)
                if p["metadata"]["labels"].get(topology.DS_ROLE) == role
            ]

        before_pods = role_pods()
        run.procs.start("gateway-scale", argv, run.logs)
        began = time.monotonic()
        b = a
        # The burst runs until the HPA has scaled the role up (the scaler's replicas raised),
        # which is what it is for: the new instance loads without traffic, and the scale-down's
        # stabilization window runs from the decisions the HPA makes once the metric falls. So
        # the scenario beside the scale-down starts at the burst's end, while the new instance
        # still loads.
        while time.monotonic() - began < BURST.seconds:
            wanted, _ = look()
            b = max(b, wanted)
            if wanted > a:
                break
            time.sleep(1.0)
        run.procs.stop("gateway-scale")
        stopped = time.monotonic()
        pool = ThreadPoolExecutor(1, thread_name_prefix="beside-scale-down")
        beside = pool.submit(meanwhile) if meanwhile is not None else None
        up_s = None
        while b > a and time.monotonic() - stopped < SCALE_UP_GRACE_S:
            wanted, ready = look()
            if wanted > a and ready >= wanted:
                up_s = time.monotonic() - began
                break
            time.sleep(1.0)
        peak_pods = role_pods()
        down_s = None
        if b > a:
            while time.monotonic() - stopped < SCALE_DOWN_TIMEOUT_S:
                wanted, ready = look()
                try:
                    pods = serving_pods(run.kube, run.topo.namespace, run.set_name)
                except ApiError:
                    time.sleep(1.0)
                    continue
                going = any(
                    p["metadata"].get("deletionTimestamp")
                    for p in pods
                    if p["metadata"]["labels"].get(topology.DS_ROLE) == role
                )
                if wanted == a and ready == a and not going:
                    down_s = time.monotonic() - stopped
                    break
                time.sleep(1.0)
        after_pods = role_pods()
        status_replicas = (run.kube.get(scaler_path).get("status") or {}).get("replicas")
        # The scenario beside the scale-down ends before the stand-in it may read goes.
        beside_lines, beside_failures = beside.result() if beside is not None else ([], [])
        pool.shutdown()
        results = read_results(out)
        failed = sum(1 for r in results if r.get("outcome") != "served")
        ready_s = up_s if up_s is not None else time.monotonic() - began
        lines = [
            scaling.scale_line(role, a, b, ready_s, down_s),
            contract.scale_contract_line(
                role, before_pods, peak_pods, after_pods, scaler, ready_s, down_s, status_replicas
            ),
            f"day-two: scale: {hpa_name} -> {scaling.ROLE_SCALER_KIND} {scaler}: metric "
            f"{scaling.metric_summary(hpa, peak)}; burst {len(results)} requests "
            f"({BURST.per_second:g}/s of ~{BURST.prompt_words} words), {failed} failed; "
            f"scale-down window {scaling.scale_down_window(hpa)} s (rendered)",
        ]
        return [*lines, *beside_lines], [
            *scaling.scale_failures(role, a, b, maximum, down_s, failed, len(results), up_s is not None),
            *beside_failures,
        ]
    finally:
        run.procs.stop("gateway-scale")
        for obj in reversed(aggregation):
            with contextlib.suppress(ApiError):
                run.kube.delete(obj)
        run.procs.stop("metrics-adapter")
        forward.close()
