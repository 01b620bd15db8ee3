"""`make day-two` (docs/day-two.md): day two under traffic in one replay, first slice: a
rolling upgrade under steady agent traffic with the rollout screener on, then the same kind of
upgrade with it off (the negative control).

    python -m devtools.daytwo [STACK] [--load-seconds=S]

1. The stack is rendered three times: as it is (revision a), and with decode `maxNumSeqs`
   lowered twice (revisions b and c: a role's setting, so every role's pod template and the
   DisaggregatedSet's revision change, as a `model.revision` or image change would on vLLM).
2. The twin comes up with the stack's nodes; kwok keeps them Ready but runs no pod on the
   serving node group's nodes (devtools/twin/cluster.py `without_pods_on`): the process kubelet
   does (devtools/daytwo/kubelet.py). The real LWS controller runs (devtools/twin/lws.py).
3. Revision a's rendering is applied (server-side, as e2e applies it): the LWS controller makes
   the groups, the scheduler binds them, the process kubelet starts simulators and routing
   sidecars in per-pod network namespaces and readies them after the simulated load.
4. Two endpoint pickers with the rendered flags and config (devtools/dataplane/run.py), watching
   the pods through the API server, behind the gateway stand-in; steady agent traffic starts.
5. Revision b's rendering is applied while the traffic runs; the rollout is followed until every
   pod is of b and Ready and no pod of a is left. The `upgrade:` line.
6. The pickers restart with the rollout screener's revision gating off
   (devtools/router_check/check.py `without_gating`) and revision c is rolled out the same way.
   The `upgrade (screener off):` line.

The upgrade is applied as rendered manifests, not through `pulumi up` (the engine run,
devtools/twin/engine.py, is not wired into this replay yet).
"""

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from devtools import source_snapshot
from devtools.dataplane import build, netns, replay, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import figures
from devtools.daytwo.kubelet import ProcessKubelet
from devtools.router_check.check import without_gating
from devtools.twin import cluster, lws_checks, manifests, nodes
from devtools.twin.kube import ApiError, Kube, wait_for
from llmd_fleet.cli.paths import CHECKOUT

DEFAULT_STACK = "day-two"
# How long a new pod of the process kubelet loads before its readiness probe may pass: the
# harness's figure, inside the stack's declared `serving.modelLoadMinutes` (1 minute on day-two),
# and long enough that each rollout step keeps both revisions serving for the 30 s.
DEFAULT_LOAD_S = 40.0
# The revisions: decode `maxNumSeqs` as rendered (a), then these (b, then c).
NEXT_MAX_NUM_SEQS = (24, 16)
# Traffic before each upgrade starts, and after its rollout ends, inside the measured window.
LEAD_S = 8.0
TAIL_S = 5.0
# The longest a rollout may take before the run fails (every step waits a load).
ROLLOUT_TIMEOUT_S = 600.0


def variant(text: str, max_num_seqs: int) -> str:
    """The stack file with decode `maxNumSeqs` set to `max_num_seqs` (pure)."""
    doc = yaml.safe_load(text)
    doc["config"]["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] = max_num_seqs
    return str(yaml.safe_dump(doc, sort_keys=False))


def established(kube: Kube, crd: dict[str, Any]) -> bool:
    conditions = (kube.read(crd).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def render(stacks_dir: Path, stack: str, out: Path) -> list[dict[str, Any]]:
    subprocess.run(
        [
            str(Path(sys.executable).with_name("llmd-fleet")),
            "--stacks-dir",
            str(stacks_dir),
            "render",
            stack,
            "--out",
            str(out),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return topology.load_manifests(out)


def apply_all(kube: Kube, objects: list[dict[str, Any]]) -> None:
    namespaced: dict[str, bool] = {}
    for obj in objects:
        key = f"{obj['apiVersion']}/{obj['kind']}"
        if key not in namespaced:
            namespaced[key] = kube.resource(obj["apiVersion"], obj["kind"]).namespaced
    for obj in manifests.apply_order(objects, namespaced):
        kube.apply(obj)


def serving_nodes(stacks_dir: Path, stack: str) -> list[str]:
    """The nodes of the node groups the serving roles run on (the process kubelet's)."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    config = stack_config(read_stack_file(stacks_dir, stack))
    groups = {config.serving.roles.prefill.node_group, config.serving.roles.decode.node_group}
    return [n for g in sorted(groups) for n in nodes.node_names(g, config.fleet.node_groups[g].count)]


def serving_pods(kube: Kube, namespace: str, set_name: str) -> list[dict[str, Any]]:
    return kube.list("v1", "Pod", namespace, f"{topology.DS_NAME}={set_name}")


def settled(pods: list[dict[str, Any]], revision_count: dict[str, int]) -> str | None:
    """The one revision every pod has when the set is settled (the expected number of pods per
    role, all Ready, none terminating), else None. Pure."""
    if any(p["metadata"].get("deletionTimestamp") for p in pods):
        return None
    revisions = {p["metadata"]["labels"].get(topology.DS_REVISION) for p in pods}
    roles: dict[str, int] = {}
    for p in pods:
        roles[p["metadata"]["labels"].get(topology.DS_ROLE, "")] = (
            roles.get(p["metadata"]["labels"].get(topology.DS_ROLE, ""), 0) + 1
        )
    if len(revisions) != 1 or roles != revision_count or not all(lws_checks.is_ready(p) for p in pods):
        return None
    return next(iter(revisions)) or None


def ready_decode(pods: list[dict[str, Any]], size: int) -> int:
    """Decode groups (any revision) whose `size` pods are all Ready. Pure."""
    by_group = lws_checks.groups(p for p in pods if p["metadata"]["labels"].get(topology.DS_ROLE) == "decode")
    return sum(
        1 for members in by_group.values() if len(members) == size and all(map(lws_checks.is_ready, members))
    )


def read_results(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # the line being written when the stand-in stopped
            continue
    return rows


class Replay:
    """Everything one `make day-two` starts, stopped in `close`."""

    def __init__(self, root: Path, stack: str, load_seconds: float) -> None:
        self.root = root
        self.stack = stack
        self.load_seconds = load_seconds
        self.run_dir = root / "build" / "daytwo"
        self.procs = dataplane.Processes([])
        self.forwarder: netns.Forwarder | None = None
        self.kubelet: ProcessKubelet | None = None
        self.failures: list[str] = []

    def close(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        self.procs.stop()
        if self.forwarder is not None:
            self.forwarder.close()
        netns.teardown()
        cluster.down(self.root)

    def prepare(self) -> None:
        subprocess.run(["rm", "-rf", str(self.run_dir)], check=True)
        self.logs = self.run_dir / "logs"
        self.logs.mkdir(parents=True)
        text = (self.root / "stacks" / f"Pulumi.{self.stack}.yaml").read_text()
        self.renders: list[list[dict[str, Any]]] = []
        self.render_dirs: list[Path] = []
        for tag, stack_text in (
            ("a", text),
            *((chr(ord("b") + i), variant(text, n)) for i, n in enumerate(NEXT_MAX_NUM_SEQS)),
        ):
            stacks_dir = self.run_dir / f"stacks-{tag}"
            stacks_dir.mkdir(parents=True)
            (stacks_dir / f"Pulumi.{self.stack}.yaml").write_text(stack_text)
            out = self.run_dir / f"render-{tag}"
            self.renders.append(render(stacks_dir, self.stack, out))
            self.render_dirs.append(out)
        self.topo = topology.topology(self.render_dirs[0])
        self.set_name = self.topo.serving_set["metadata"]["name"]
        roles = self.topo.serving_set["spec"]["roles"]
        self.expected = {
            r["name"]: int(r["spec"]["replicas"]) * int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
            for r in roles
        }
        decode = next(r for r in roles if r["name"] == "decode")
        self.decode_instances = int(decode["spec"]["replicas"])
        self.decode_size = int(decode["spec"]["leaderWorkerTemplate"].get("size", 1))
        self.planned_min_decode = lws_checks.planned_minimum(decode["spec"])
        self.bins: dict[str, Path] = {}
        for target in (build.ROUTER, build.SIMULATOR):
            folder = build.ensure(target)
            for b in target.binaries:
                self.bins["simulator" if b == "llm-d-inference-sim" else b] = folder / b

    def start(self) -> None:
        node_names = serving_nodes(self.root / "stacks", self.stack)
        state = cluster.up(self.stack, root=self.root, kubelet_nodes=node_names)
        self.kube = cluster.client(self.root)
        crds = manifests.vendored_crds()
        for crd in crds:
            self.kube.apply(crd)
        wait_for(
            "CRDs Established",
            lambda: all(established(self.kube, c) for c in crds),
            timeout=90,
            interval=0.5,
        )
        report = manifests.Report()
        controller = lws_checks.start_controller(state, self.kube, report)
        if controller is None:
            raise cluster.TwinError(
                "the LWS controller is not running: " + "; ".join(report.failures or report.lines)
            )
        spaces = [(dataplane.GATEWAY_NS, dataplane.GATEWAY_IP)] + [
            (f"picker-{i}", dataplane.PICKER_IPS[i]) for i in range(self.topo.picker.replicas)
        ]
        if self.topo.renderer:
            spaces.append((dataplane.RENDER_NS, dataplane.RENDER_IP))
        netns.setup(spaces)
        if self.topo.renderer:
            netns.write_hosts([name for name, _ in spaces], {self.topo.renderer.host: dataplane.RENDER_IP})
            dataplane.start_renderer(self.procs, self.topo.renderer, self.bins, self.logs)
        self.forwarder = netns.Forwarder(
            [f"picker-{i}" for i in range(self.topo.picker.replicas)], "127.0.0.1", state.ports["apiserver"]
        )
        self.kubeconfig = cluster.twin_dir(self.root) / "kubeconfig"
        self.kubelet = ProcessKubelet(
            lambda: cluster.client(self.root),
            self.topo,
            frozenset(node_names),
            self.bins,
            self.logs,
            self.load_seconds,
            topology.kv_blocks_per_rank(self.topo.picker.config),
        )
        self.kubelet.start()
        began = time.monotonic()
        apply_all(self.kube, self.renders[0])
        self.revision_a = wait_for(
            "revision a's pods Ready",
            lambda: settled(serving_pods(self.kube, self.topo.namespace, self.set_name), self.expected),
            timeout=ROLLOUT_TIMEOUT_S,
            interval=0.5,
        )
        print(
            f"day-two: {self.stack}: revision {self.revision_a}: "
            f"{sum(self.expected.values())} pods Ready in {time.monotonic() - began:.1f} s"
        )

    def pickers(self, config_text: str, tag: str) -> list[str]:
        self.procs.stop("picker-")
        addresses = dataplane.start_pickers(
            self.procs, self.topo, config_text, self.bins, self.run_dir, self.kubeconfig, self.logs, tag
        )
        warm = self.run_dir / f"warm-{tag}"
        model = self.model()
        warm_file = self.run_dir / f"warm-{tag}.jsonl"
        first = figures.steady(model, self.bands(), 1)[0]
        warm_file.write_text(replay.write([{**first, "id": "warmup", "session": "warmup"}]))

        def routed() -> bool:
            results = dataplane.run_replay(
                self.procs, self.bins, addresses, warm_file, warm, [], self.logs, self.topo.picker, "5s"
            )
            return any(r["outcome"] == "served" for r in results)

        wait_for(f"{tag}: a request routed", routed, 120, 2)
        return addresses

    def model(self) -> str:
        return next(
            names[-1]
            for p in self.topo.pods
            for c in p.containers
            if (names := topology.served_names(c.args))
        )

    def bands(self) -> dict[str, str]:
        return replay.bands_of(self.topo.objectives)

    def upgrade(self, tag: str, pickers: list[str], before: str, target: int) -> figures.Upgrade:
        """Steady traffic; the rendering `target` applied after LEAD_S; followed to the end."""
        assert self.kubelet is not None
        entries = figures.steady(self.model(), self.bands(), ROLLOUT_TIMEOUT_S)
        replay_file = self.run_dir / f"replay-{tag}.jsonl"
        replay_file.write_text(replay.write(entries))
        out = self.run_dir / tag
        out.mkdir(parents=True, exist_ok=True)
        argv = dataplane.gateway_argv(
            self.bins,
            pickers,
            self.topo.picker,
            f"--replay={replay_file}",
            f"--out={out}",
            "--pick-deadline=15s",
        )
        self.procs.start(f"gateway-{tag}", argv, self.logs)
        time.sleep(LEAD_S)
        began = time.monotonic()
        apply_all(self.kube, self.renders[target])
        samples: list[int] = []
        after = None
        while time.monotonic() - began < ROLLOUT_TIMEOUT_S:
            try:
                pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
            except ApiError:
                time.sleep(0.5)
                continue
            samples.append(ready_decode(pods, self.decode_size))
            done = settled(pods, self.expected)
            if done is not None and done != before:
                after = done
                break
            time.sleep(0.5)
        seconds = time.monotonic() - began
        time.sleep(TAIL_S)
        self.procs.stop(f"gateway-{tag}")
        if after is None:
            raise TimeoutError(f"{tag}: the rollout did not settle in {ROLLOUT_TIMEOUT_S:.0f} s")
        results = read_results(out)
        (self.run_dir / f"{tag}-endpoints.json").write_text(
            json.dumps({ip: vars(e) for ip, e in self.kubelet.endpoints.items()}, indent=2) + "\n"
        )
        return figures.upgrade(
            self.stack,
            before,
            after,
            results,
            self.kubelet.endpoints,
            samples,
            self.decode_instances,
            self.planned_min_decode,
            seconds,
        )


def main(argv: Sequence[str]) -> int:
    positional = [a for a in argv if not a.startswith("--")]
    stack = positional[0] if positional else DEFAULT_STACK
    load_seconds = DEFAULT_LOAD_S
    for a in argv:
        if a.startswith("--load-seconds="):
            try:
                load_seconds = float(a.split("=", 1)[1])
            except ValueError:
                load_seconds = -1
            if load_seconds <= 0:
                print(
                    f"day-two: --load-seconds: {a.split('=', 1)[1]!r} is not a positive number of seconds",
                    file=sys.stderr,
                )
                return 2
        elif a.startswith("--"):
            print(f"day-two: unknown flag {a} (allowed: --load-seconds=S)", file=sys.stderr)
            return 2
    if not (CHECKOUT / "stacks" / f"Pulumi.{stack}.yaml").is_file():
        print(f"day-two: no stack file stacks/Pulumi.{stack}.yaml", file=sys.stderr)
        return 2
    started = time.monotonic()
    run = Replay(CHECKOUT, stack, load_seconds)
    try:
        run.prepare()
    except source_snapshot.SnapshotMissing as error:
        print(f"day-two: not run: {error}")
        return 0
    failures: list[str] = []
    try:
        run.start()
        print(f"day-two: simulated model load per pod: {load_seconds:.1f} s (process kubelet)")
        pickers = run.pickers(run.topo.picker.config, "screener-on")
        on = run.upgrade("screener-on", pickers, run.revision_a, 1)
        print(figures.upgrade_line(on))
        print(figures.detail_line("screener on", on))
        failures += figures.upgrade_failures(on)
        pickers = run.pickers(without_gating(run.topo.picker.config), "screener-off")
        off = run.upgrade("screener-off", pickers, on.after, 2)
        print(figures.screener_off_line(off))
        print(figures.detail_line("screener off", off))
        failures += figures.screener_off_failures(off)
        if run.kubelet is not None:
            failures += run.kubelet.errors
    except (cluster.TwinError, build.BuildError, TimeoutError, ApiError) as error:
        print(f"day-two: failed: {error}", file=sys.stderr)
        return 1
    finally:
        run.close()
    print(f"day-two: {stack} in {time.monotonic() - started:.0f} s; logs {run.run_dir}")
    for failure in failures:
        print(f"day-two: FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0
