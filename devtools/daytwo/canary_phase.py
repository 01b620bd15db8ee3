"""The canary phase of the day-two replay (docs/day-two.md, "Canary under traffic"): a canary
beside the live revision, under steady agent traffic through the gateway stand-in routing by the
applied HTTPRoute's weighted backendRefs. The stack with `serving.canary` at weight 0 is applied;
the canary's DisaggregatedSet comes up through the LWS controller and the process kubelet and its
own pickers start (`canary_pickers`, routing checked by `routed_by`); the weight is raised to
CANARY_WEIGHT and measured; the canary is rolled back (the live rendering applied, what it no
longer has deleted). `run_phase` returns the `canary:` line and its detail, and the failures.
"""

import json
import time
from typing import TYPE_CHECKING, Any

import yaml

from devtools.dataplane import multimodel, netns, replay, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import deploy, figures
from devtools.daytwo.serving import (
    RECOVERY_TIMEOUT_S,
    ROLLOUT_TIMEOUT_S,
    TAIL_S,
    read_results,
    render,
    serving_pods,
    settled,
)
from devtools.twin import cluster
from devtools.twin.kube import wait_for

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# The canary's share of the route while it is measured, its revision (a `model.revision`: the
# simulator downloads nothing, and the only `imageTag` pinned for it is the stable one's), one
# instance of each role (the stack's 3 spare nodes), how long the shifted share is measured (about
# 300 requests at the steady ~7 a second: 4 standard deviations of a 20% split are then about 9
# points, far inside what a canary at 0% or at the whole route would be off), and how often the
# stand-in looks for a rewritten route table (the window starts once it has re-read it).
CANARY_WEIGHT = 20
CANARY_REVISION = "canary-day-two"
CANARY_INSTANCES = {"prefill": 1, "decode": 1}
CANARY_WINDOW_S = 45.0
ROUTES_RELOAD_S = 0.2
# The canary's own endpoint pickers and render stand-in: namespaces of their own on the run's pod
# network, at hosts above any the process kubelet reaches in a run (it gives out addresses from
# topology.FIRST_POD_HOST up, a run's pods take a few dozen), and veths above Prometheus' (900).
CANARY_FIRST_HOST = 240
CANARY_FIRST_VETH = 910


def canary_variant(text: str, weight: int, revision: str = CANARY_REVISION) -> str:
    """The stack file with `serving.canary` added: `weight` percent of the requests to a canary
    of `model.revision` `revision`, CANARY_INSTANCES of each role; everything else as it is
    (pure)."""
    doc = yaml.safe_load(text)
    doc["config"]["llmd-fleet:serving"]["canary"] = {
        "weight": weight,
        "modelRevision": revision,
        "instances": dict(CANARY_INSTANCES),
    }
    return str(yaml.safe_dump(doc, sort_keys=False))


def object_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    return (obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def pruned(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `pulumi up` deletes going from the rendering `before` to `after`: every object of
    `before` that `after` does not have, in `before`'s order (pure)."""
    keep = {object_key(o) for o in after}
    return [o for o in before if object_key(o) not in keep]


def rendered(run: "Replay", live: int, weight: int) -> list[dict[str, Any]]:
    """The live revision's stack (revision `live`, 0 for a) with the canary at `weight`, rendered
    into the replay's folder (once: `Replay.prepare` renders both weights first)."""
    text = (run.run_dir / f"stacks-{chr(ord('a') + live)}" / f"Pulumi.{run.stack}.yaml").read_text()
    stacks_dir = run.run_dir / f"stacks-canary-{weight}"
    stacks_dir.mkdir(parents=True, exist_ok=True)
    (stacks_dir / f"Pulumi.{run.stack}.yaml").write_text(canary_variant(text, weight))
    return render(stacks_dir, run.stack, run.run_dir / f"render-canary-{weight}")


def run_phase(run: "Replay", live: int) -> tuple[list[str], list[str]]:
    """A canary beside the live revision (rendering `live`), under steady traffic through the
    gateway stand-in routing by the applied HTTPRoute: the stack with `serving.canary` at
    weight 0 applied, the canary's set brought up by the LWS controller and the process
    kubelet and its own pickers started; then CANARY_WEIGHT applied and measured for
    CANARY_WINDOW_S; then rolled back: the live rendering applied again and what it no
    longer has deleted, until the canary's pods are gone. Returns (lines, failures)."""
    assert run.kubelet is not None
    if run.kubelet._next_host >= CANARY_FIRST_HOST:
        raise cluster.TwinError(
            f"canary: the process kubelet has given out addresses up to host {CANARY_FIRST_HOST}"
        )
    renders = {weight: rendered(run, live, weight) for weight in (0, CANARY_WEIGHT)}
    stable_pool = run.topo.pool["metadata"]["name"]
    canary_topo = next(
        t
        for t in topology.pool_topologies(run.run_dir / f"render-canary-{CANARY_WEIGHT}")
        if t.pool["metadata"]["name"] != stable_pool
    )
    canary_pool = canary_topo.pool["metadata"]["name"]
    canary_set = canary_topo.serving_set["metadata"]["name"]
    canary_expected = {
        r["name"]: int(r["spec"]["replicas"]) * int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
        for r in canary_topo.serving_set["spec"]["roles"]
    }
    route_obj = next(o for o in renders[0] if o["kind"] == "HTTPRoute")
    stable_pods = serving_pods(run.kube, run.topo.namespace, run.set_name)
    stable_revision = settled(stable_pods, run.expected)
    stable_before = {p["metadata"]["uid"] for p in stable_pods}

    stable = run.pickers(run.topo.picker.config, "canary")
    health_port = next(a.split("=")[1] for a in run.topo.picker.args if a.startswith("--grpc-health-port="))
    pickers = {stable_pool: stable}
    health = {stable_pool: [f"{ip}:{health_port}" for ip in dataplane.PICKER_IPS[: run.topo.picker.replicas]]}
    table_file = run.run_dir / "canary-routes.json"

    gateway_log = run.logs / "gateway-canary.log"

    def reloads() -> int:
        text = gateway_log.read_text() if gateway_log.exists() else ""
        return text.count("gateway: routes reloaded")

    def write_table(wait: bool = True) -> None:
        """The stand-in's table from the HTTPRoute as the API server has it (as the gateway's
        controller translates the applied route), replaced in one rename; with `wait`, until
        the running stand-in has re-read it."""
        before = reloads()
        table = multimodel.route_rules([run.kube.read(route_obj)], pickers, health)
        tmp = table_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=2) + "\n")
        tmp.replace(table_file)
        if wait:
            wait_for("the gateway stand-in re-reading its routes", lambda: reloads() > before, 30, 0.1)

    write_table(wait=False)
    entries = figures.steady(run.model(), run.bands(), ROLLOUT_TIMEOUT_S)
    replay_file = run.run_dir / "replay-canary.jsonl"
    replay_file.write_text(replay.write(entries))
    out = run.run_dir / "canary"
    out.mkdir(parents=True, exist_ok=True)
    run.procs.start(
        "gateway-canary",
        [
            *netns.exec_prefix(dataplane.GATEWAY_NS),
            str(run.bins["gateway"]),
            f"--routes={table_file}",
            f"--routes-reload={ROUTES_RELOAD_S}s",
            f"--replay={replay_file}",
            f"--out={out}",
            "--pick-deadline=15s",
            f"--probe-period={run.topo.picker.probe_period_s}s",
            f"--probe-failures={run.topo.picker.probe_failures}",
        ],
        run.logs,
    )
    clock = out / "start_unix_ms"
    wait_for("the canary replay's clock", clock.exists, 30, 0.1)
    start_ms = float(clock.read_text())

    def now_ms() -> float:
        return time.time() * 1000 - start_ms

    spaces = [
        (f"canary-picker-{i}", f"{topology.POD_SUBNET}.{CANARY_FIRST_HOST + i}")
        for i in range(canary_topo.picker.replicas)
    ]
    render_space = ("canary-render", f"{topology.POD_SUBNET}.{CANARY_FIRST_HOST + len(spaces)}")
    forwarder: netns.Forwarder | None = None
    try:
        # 1. The canary at weight 0 (docs/day-two.md: a canary starts without traffic), under the
        # traffic just started: its pods' load is the stable set's lead before the shift.
        began = time.monotonic()
        deploy.apply_all(run.kube, renders[0])
        write_table()
        for i, (name, ip) in enumerate([*spaces, render_space]):
            netns.attach(name, ip, CANARY_FIRST_VETH + i)
        if canary_topo.renderer:
            netns.write_hosts([n for n, _ in spaces], {canary_topo.renderer.host: render_space[1]})
            run.procs.start(
                "canary-render",
                [
                    *netns.exec_prefix(render_space[0]),
                    str(run.bins["simulator"]),
                    *dataplane.renderer_args(canary_topo.renderer),
                ],
                run.logs,
            )
        forwarder = netns.Forwarder(
            [n for n, _ in spaces], "127.0.0.1", cluster.load_state(run.root).ports["apiserver"]
        )
        canary_addresses = canary_pickers(run, canary_topo, [ip for _, ip in spaces])
        revision = wait_for(
            "the canary's pods Ready",
            lambda: settled(serving_pods(run.kube, run.topo.namespace, canary_set), canary_expected),
            timeout=ROLLOUT_TIMEOUT_S,
            interval=0.5,
        )
        canary_health = [f"{ip}:{health_port}" for _, ip in spaces]
        routed_by(run, canary_addresses, canary_health, canary_topo.picker, "canary-warm")
        up_s = time.monotonic() - began
        pickers[canary_pool] = canary_addresses
        health[canary_pool] = canary_health
        write_table()
        # 2. The canary's weight, measured for CANARY_WINDOW_S.
        deploy.apply_all(run.kube, renders[CANARY_WEIGHT])
        write_table()
        shift_at = now_ms()
        time.sleep(CANARY_WINDOW_S)
        shift_until = now_ms()
        # 3. Rolled back: the live rendering again (the route back to the stable pool first),
        # then what it no longer has deleted, as `pulumi up` without `serving.canary` does.
        rollback_at = now_ms()
        gone_began = time.monotonic()
        deploy.apply_all(run.kube, run.renders[live])
        write_table()
        for obj in reversed(pruned(renders[CANARY_WEIGHT], run.renders[live])):
            run.kube.delete(obj)
        wait_for(
            "the canary's pods gone",
            lambda: not serving_pods(run.kube, run.topo.namespace, canary_set),
            RECOVERY_TIMEOUT_S,
            0.5,
        )
        gone_s = time.monotonic() - gone_began
        time.sleep(TAIL_S)
        rollback_until = now_ms()
        stable_after = {
            p["metadata"]["uid"] for p in serving_pods(run.kube, run.topo.namespace, run.set_name)
        }
    finally:
        run.procs.stop("gateway-canary")
        # Nothing is in flight on the canary's pickers once its pods are gone (the route went back
        # to the stable pool first): their drain window would only wait.
        run.procs.stop("canary-", grace=dataplane.PICKER_SWAP_GRACE_S)
        if forwarder is not None:
            forwarder.close()
        for name, _ in [*spaces, render_space]:
            netns.detach(name)
    results = read_results(out)
    (run.run_dir / "canary-endpoints.json").write_text(
        json.dumps({ip: vars(e) for ip, e in run.kubelet.endpoints.items()}, indent=2) + "\n"
    )
    shifted = [r for r in results if shift_at <= r["start_ms"] <= shift_until]
    c = figures.canary(
        run.stack,
        CANARY_WEIGHT,
        revision,
        stable_revision or "",
        canary_pool,
        shifted,
        figures.in_flight(results, rollback_at, rollback_until),
        run.kubelet.endpoints,
        stable_before,
        stable_after,
    )
    return [figures.canary_line(c), figures.canary_detail(c, up_s, gone_s)], figures.canary_failures(c)


def canary_pickers(run: "Replay", topo: topology.Topology, ips: list[str]) -> list[str]:
    """The canary pool's endpoint pickers, as the rendered canary Deployment runs them (its
    flags, config, env and replicas), each in its own namespace at `ips[i]`."""
    config_file = run.run_dir / "config-canary-pool" / "epp.yaml"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(topo.picker.config)
    port = next(a.split("=")[1] for a in topo.picker.args if a.startswith("--grpc-port="))
    addresses = []
    for i, ip in enumerate(ips):
        name = f"{topo.picker.name}-{i}"
        env = {
            "KUBECONFIG": str(run.kubeconfig),
            "NAMESPACE": topo.namespace,
            "POD_NAME": name,
            **topo.picker.env,
        }
        argv = [
            *netns.exec_prefix(f"canary-picker-{i}", hostname=name),
            str(run.bins["epp"]),
            *dataplane.picker_args(topo.picker.args, config_file),
        ]
        run.procs.start(f"canary-picker-{i}", argv, run.logs, env)
        addresses.append(f"{ip}:{port}")
    return addresses


def routed_by(
    run: "Replay", pickers: list[str], health: list[str], picker: topology.Picker, tag: str
) -> None:
    """Wait until one request is routed and served through `pickers` alone (the stand-in in
    picker mode, probing `health` as the rendered readiness probe does)."""
    warm_file = run.run_dir / f"warm-{tag}.jsonl"
    first = figures.steady(run.model(), run.bands(), 1)[0]
    warm_file.write_text(replay.write([{**first, "id": "warmup", "session": "warmup"}]))
    warm = run.run_dir / f"warm-{tag}"
    warm.mkdir(parents=True, exist_ok=True)

    def routed() -> bool:
        proc = run.procs.start(
            f"gateway-{tag}",
            [
                *netns.exec_prefix(dataplane.GATEWAY_NS),
                str(run.bins["gateway"]),
                f"--pickers={','.join(pickers)}",
                f"--replay={warm_file}",
                f"--out={warm}",
                "--pick-deadline=5s",
                f"--health={','.join(health)}",
                f"--probe-period={picker.probe_period_s}s",
                f"--probe-failures={picker.probe_failures}",
            ],
            run.logs,
        )
        proc.wait(timeout=120)
        run.procs.stop(f"gateway-{tag}")
        return any(r["outcome"] == "served" for r in read_results(warm))

    wait_for(f"{tag}: a request routed by the canary's pickers", routed, 120, 2)
