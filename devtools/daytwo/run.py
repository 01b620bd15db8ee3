"""`make day-two` (docs/day-two.md): day two under traffic in one replay: a rolling upgrade
under steady agent traffic with the rollout screener on, then the same kind of upgrade with it
off (the negative control), then a canary shifted and rolled back, then faults under steady
traffic.

    python -m devtools.daytwo [STACK] [--load-seconds=S] [--apply-manifests] [--without-models]

1. The stack is rendered three times: as it is (revision a), and with decode `maxNumSeqs`
   changed twice (revisions b and c: a role's setting, so every role's pod template and the
   DisaggregatedSet's revision change, as a `model.revision` or image change would on vLLM).
2. The twin comes up with the stack's nodes; kwok keeps them Ready but runs no pod on the
   serving node group's nodes (devtools/twin/cluster.py `without_pods_on`): the process kubelet
   does (devtools/daytwo/kubelet.py). The real LWS controller runs (devtools/twin/lws.py).
3. Revision a is deployed by `pulumi up` of the stack (devtools/daytwo/deploy.py: the real
   Pulumi CLI, Python language host and Kubernetes provider, as `make e2e`'s engine run): the
   LWS controller makes the groups, the scheduler binds them, the process kubelet starts
   simulators and routing sidecars in per-pod network namespaces and readies them after the
   simulated load. e2e's `controller:` line for the set (devtools/daytwo/contract.py).
   Then `make dataplane`'s routing figures and `make dataplane-broken`'s negative control on
   these pods (devtools/daytwo/routing.py).
4. Two endpoint pickers with the rendered flags and config (devtools/dataplane/run.py), watching
   the pods through the API server, behind the gateway stand-in; steady agent traffic starts.
5. Revision b by `pulumi up` of the edited stack while the traffic runs; the rollout is followed
   until every pod is of b and Ready and no pod of a is left. The `upgrade:` line, and e2e's
   `rollout:` line from the same rollout.
6. The pickers restart with the rollout screener's revision gating off
   (devtools/router_check/check.py `without_gating`) and revision c is rolled out the same way.
   The `upgrade (screener off):` line.
7. The canary (`Replay.canary`): under steady traffic through the gateway stand-in routing by the
   applied HTTPRoute's weighted backendRefs, the stack with `serving.canary` at weight 0 is
   applied; the canary's DisaggregatedSet comes up through the LWS controller and the process
   kubelet and its own pickers start; the weight is raised to CANARY_WEIGHT and measured; the
   canary is rolled back (revision c's rendering applied, what it no longer has deleted). The
   `canary:` line.
8. Faults under one steady traffic stream (`Replay.faults`, one method per scenario): the leader
   picker stopped (`failover:`), a decode worker's node lost (`node loss:`, and e2e's `node
   loss:` line with a spare node), a decode node drained in place of a GPU device taint (a
   DeviceTaintRule evicts through ResourceClaims, which this stack's pods do not hold; `gpu
   loss:`).
9. Scaling (`Replay.scale`, devtools/daytwo/scaling.py): the HPA KEDA would make from the
   rendered ScaledObject (applied beside it: the twin runs no KEDA) scales the role's
   DisaggregatedSetRoleScaler on the trigger's query, served from the live Prometheus by an
   external-metrics stand-in behind the API server's aggregation layer; a burst of long prompts
   raises it, and the role comes back down after the rendered cooldown. The `scale:` line, and
   e2e's `scale:` line from the same scaling.
10. A real Prometheus (devtools/daytwo/prometheus.py, alerts.py) scrapes from step 3's end on;
    during step 9's scale-down window (no traffic runs then either) both pickers are stopped
    until the router's alerts fire and restarted until they resolve (the `alert:` lines), and
    promtool evaluates the other rendered alerts over the series the run scraped.
11. Last, the Responses phase on the replay's deployment (devtools/daytwo/responses_phase.py),
    the multi-model reference in a namespace of its own on its twin (models_phase.py), and
    onprem-h100 scaled with precise prefix routing in another (reference_phase.py).

With --without-models the multi-model phase is left out (`make dataplane-reference` runs it
alone); --only=PHASE,... runs only the named phases after step 2 (PHASE_ORDER).

With --apply-manifests every revision is applied as its rendered manifests (server-side)
instead of by `pulumi up`.
"""

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devtools import source_snapshot
from devtools.dataplane import build, multimodel, netns, replay, topology
from devtools.dataplane import report as replay_report
from devtools.dataplane import run as dataplane
from devtools.daytwo import (
    alerts,
    contract,
    deploy,
    figures,
    models_phase,
    prometheus,
    reference_phase,
    responses_phase,
    routing,
    scaling,
)
from devtools.daytwo.kubelet import ProcessKubelet
from devtools.router_check.check import without_gating
from devtools.twin import cluster, lws_checks, manifests, nodes, pki
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
# Faults under traffic: steady traffic before the first fault and between two (each fault's
# window ends when its scenario has recovered), how long the failover window runs, and the longest
# a lost group may take to come back (one simulated load plus scheduling).
FAULT_GAP_S = 8.0
FAILOVER_WINDOW_S = 20.0
RECOVERY_TIMEOUT_S = 240.0
FAULT_TRAFFIC_S = 900.0
# The canary (`Replay.canary`, docs/day-two.md "Canary under traffic"): its share of the route
# while it is measured, its revision (a `model.revision`: the simulator downloads nothing, and
# the only `imageTag` pinned for it is the stable one's), one instance of each role (the
# stack's 3 spare nodes), how long the shifted share is measured (about 400 requests at the steady
# ~7 a second: 4 standard deviations of a 20% split are then about 8 points), and how often the
# stand-in looks for a rewritten route table (the window starts once it has re-read it).
CANARY_WEIGHT = 20
CANARY_REVISION = "canary-day-two"
CANARY_INSTANCES = {"prefill": 1, "decode": 1}
CANARY_WINDOW_S = 60.0
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


# Scaling (docs/day-two.md, "Scaling"): the burst, the longest it runs before the role must have
# scaled up (HPA sync 15 s, the leader picker's scrape, one simulated load), and the longest the
# role may take to come back once it stops (the rendered cooldown, one scale-down period, a sync
# and the pods' termination).
# The backlog it holds: 5 requests/s x ~0.4 s to a first token (16,000 tokens: 20 ms + 16,000 x
# 20 us of simulated prefill, the KV transfer and one decode step) x 16,000 tokens, over the
# rendered 100,000 tokens/s = ~0.3 s, six times the 0.05 s per instance target of 3 instances.
BURST = scaling.Burst(per_second=5.0, seconds=150.0, prompt_words=16000, max_tokens=8)
# Once the HPA has scaled up, how long past the burst's end the new instance may take to turn Ready.
SCALE_UP_GRACE_S = 90.0
SCALE_DOWN_TIMEOUT_S = 420.0


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


# The server-side apply of rendered objects (deploy.py), for scenarios that apply objects directly.
apply_all = deploy.apply_all


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


@dataclass(frozen=True)
class Window:
    """One fault on the fault replay's clock (ms from the gateway stand-in's start)."""

    what: str
    """The stopped picker's address, or the lost node."""
    at_ms: float
    until_ms: float
    addresses: frozenset[str]
    """The lost group's pod addresses (node loss)."""
    recovered_s: float


def failover_figures(results: list[dict[str, Any]], w: Window) -> dict[str, Any]:
    """The data-plane twin's failover figures (devtools/dataplane/report.py `failover`) over the
    requests started in the failover window only (later faults are not its)."""
    inside = [r for r in results if r["start_ms"] <= w.until_ms]
    return replay_report.failover(inside, w.at_ms, w.what)


def groups_on(pods: list[dict[str, Any]], node: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every live group with a pod on `node`, with all its members (a lost node takes each whole
    group down: `RecreateGroupOnPodRestart`). Pure."""
    by_group = lws_checks.groups(pods)
    return {
        k: members
        for k, members in by_group.items()
        if any(p["spec"].get("nodeName") == node for p in members)
    }


def not_ready_status() -> dict[str, Any]:
    """A Node status whose Ready condition is Unknown, as the node lifecycle controller marks a
    node whose kubelet stopped posting (`NodeStatusUnknown`)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ]
        }
    }


class Replay:
    """Everything one `make day-two` starts, stopped in `close`."""

    def __init__(self, root: Path, stack: str, load_seconds: float, by_engine: bool = True) -> None:
        self.root = root
        self.stack = stack
        self.load_seconds = load_seconds
        self.by_engine = by_engine
        self.deployer: deploy.Deployer | None = None
        self.rollouts: dict[str, str] = {}  # e2e's `rollout:` line per upgrade (contract.py)
        self.run_dir = root / "build" / "daytwo"
        self.procs = dataplane.Processes([])
        self.forwarder: netns.Forwarder | None = None
        self.kubelet: ProcessKubelet | None = None
        self.failures: list[str] = []
        self.monitor: prometheus.Monitor | None = None  # Prometheus and alerts (alerts.py)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
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
        # An External role has no replicas: it runs at its HPA's minReplicas.
        starting = scaling.starting_replicas(self.renders[0], self.set_name)
        self.expected = {
            r["name"]: int(r["spec"].get("replicas") or starting[r["name"]])
            * int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
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
        self.prepare_prometheus()

    def prepare_prometheus(self) -> None:
        """The replay's Prometheus before the twin starts: from the tool cache, built here (its
        cold build time printed by prometheus.ensure), or waited for on the cache's lock while
        another process (CI's background builds) builds it; the wait is printed."""
        began = time.monotonic()
        self.bins["prometheus"] = prometheus.ensure()
        waited = time.monotonic() - began
        if waited >= 1.0:
            print(
                f"day-two: Prometheus ready after {waited:.0f} s "
                "(built here, or waited for on the tool cache's lock)"
            )

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
            mend=self.run_dir / "responses" / "records",
        )
        (self.run_dir / "responses" / "records").mkdir(parents=True, exist_ok=True)
        self.kubelet.start()
        self.start_deployer()
        began = time.monotonic()
        assert self.deployer is not None
        self.deployer.deploy(0)
        self.revision_a = wait_for(
            "revision a's pods Ready",
            lambda: settled(serving_pods(self.kube, self.topo.namespace, self.set_name), self.expected),
            timeout=ROLLOUT_TIMEOUT_S,
            interval=0.5,
        )
        self.ready_a_s = time.monotonic() - began
        print(
            f"day-two: {self.stack}: revision {self.revision_a}: "
            f"{sum(self.expected.values())} pods Ready in {self.ready_a_s:.1f} s"
        )

    def start_deployer(self) -> None:
        """`pulumi up` through the engine (deploy.py), or the rendered objects applied."""
        max_num_seqs: list[int | None] = [None, *NEXT_MAX_NUM_SEQS]
        try:
            self.deployer = deploy.Deployer(self.renders, max_num_seqs, self.root, self.stack, self.by_engine)
        except Exception as error:  # a build, the engine's setup: the run cannot go on
            raise cluster.TwinError(f"the Pulumi engine could not be set up: {error}") from None

    # --- e2e's controller lines from the replay (contract.py): `controller:` after revision a,
    # `rollout:` from the screener-on upgrade, `node loss:` with a spare node from the node loss.

    def controller_contract(self) -> tuple[str, list[str]]:
        """e2e's `controller:` line for revision a's groups, and its failure if the controller did
        not make every pod."""
        fleet = lws_checks.Fleet(self.kube, self.topo.serving_set)
        pods = [p for p in fleet.pods() if not p["metadata"].get("deletionTimestamp")]
        lws = fleet.lws()
        roles = fleet.lws_roles(lws)
        owners = [*lws, *self.kube.list("apps/v1", "StatefulSet", self.topo.namespace)]
        sizes = fleet.sizes
        line, created = contract.controller_line(
            pods,
            owners,
            self.set_name,
            self.expected,
            sizes,
            {r: fleet.ready_groups(r, pods, roles) for r in sizes},
            self.ready_a_s,
        )
        total = sum(self.expected.values())
        return line, [] if created == total else [
            f"controller: {created} of {total} pods made by the LWS controller"
        ]

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
        assert self.deployer is not None
        watch = contract.RolloutWatch.begin(
            self.kube, self.topo.serving_set, serving_pods(self.kube, self.topo.namespace, self.set_name)
        )
        began = time.monotonic()
        deployed = self.deployer.start(target)
        samples: list[int] = []
        after = None
        while time.monotonic() - began < ROLLOUT_TIMEOUT_S:
            try:
                pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
            except ApiError:
                time.sleep(0.5)
                continue
            samples.append(ready_decode(pods, self.decode_size))
            watch.sample()
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
        deployed()
        self.rollouts[tag] = contract.rollout_line(
            min(samples) if samples else 0,
            self.decode_instances,
            self.planned_min_decode,
            seconds,
            watch.samples,
            True,
            contract.replaced_pods(
                watch.before,
                {p["metadata"]["uid"] for p in serving_pods(self.kube, self.topo.namespace, self.set_name)},
                "decode",
                self.expected,
            ),
            watch.budget,
            watch.budget_closed,
        )
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

    # --- The canary under steady agent traffic (docs/day-two.md, "Canary under traffic").

    def canary(self, live: int) -> tuple[list[str], list[str]]:
        """A canary beside the live revision (rendering `live`), under steady traffic through the
        gateway stand-in routing by the applied HTTPRoute: the stack with `serving.canary` at
        weight 0 applied, the canary's set brought up by the LWS controller and the process
        kubelet and its own pickers started; then CANARY_WEIGHT applied and measured for
        CANARY_WINDOW_S; then rolled back: the live rendering applied again and what it no
        longer has deleted, until the canary's pods are gone. Returns (lines, failures)."""
        assert self.kubelet is not None
        if self.kubelet._next_host >= CANARY_FIRST_HOST:
            raise cluster.TwinError(
                f"canary: the process kubelet has given out addresses up to host {CANARY_FIRST_HOST}"
            )
        tag = chr(ord("a") + live)
        text = (self.run_dir / f"stacks-{tag}" / f"Pulumi.{self.stack}.yaml").read_text()
        renders: dict[int, list[dict[str, Any]]] = {}
        for weight in (0, CANARY_WEIGHT):
            stacks_dir = self.run_dir / f"stacks-canary-{weight}"
            stacks_dir.mkdir(parents=True, exist_ok=True)
            (stacks_dir / f"Pulumi.{self.stack}.yaml").write_text(canary_variant(text, weight))
            renders[weight] = render(stacks_dir, self.stack, self.run_dir / f"render-canary-{weight}")
        stable_pool = self.topo.pool["metadata"]["name"]
        canary_topo = next(
            t
            for t in topology.pool_topologies(self.run_dir / f"render-canary-{CANARY_WEIGHT}")
            if t.pool["metadata"]["name"] != stable_pool
        )
        canary_pool = canary_topo.pool["metadata"]["name"]
        canary_set = canary_topo.serving_set["metadata"]["name"]
        canary_expected = {
            r["name"]: int(r["spec"]["replicas"]) * int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
            for r in canary_topo.serving_set["spec"]["roles"]
        }
        route_obj = next(o for o in renders[0] if o["kind"] == "HTTPRoute")
        stable_pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
        stable_revision = settled(stable_pods, self.expected)
        stable_before = {p["metadata"]["uid"] for p in stable_pods}

        stable = self.pickers(self.topo.picker.config, "canary")
        health_port = next(
            a.split("=")[1] for a in self.topo.picker.args if a.startswith("--grpc-health-port=")
        )
        pickers = {stable_pool: stable}
        health = {
            stable_pool: [f"{ip}:{health_port}" for ip in dataplane.PICKER_IPS[: self.topo.picker.replicas]]
        }
        table_file = self.run_dir / "canary-routes.json"

        gateway_log = self.logs / "gateway-canary.log"

        def reloads() -> int:
            text = gateway_log.read_text() if gateway_log.exists() else ""
            return text.count("gateway: routes reloaded")

        def write_table(wait: bool = True) -> None:
            """The stand-in's table from the HTTPRoute as the API server has it (as the gateway's
            controller translates the applied route), replaced in one rename; with `wait`, until
            the running stand-in has re-read it."""
            before = reloads()
            table = multimodel.route_rules([self.kube.read(route_obj)], pickers, health)
            tmp = table_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(table, indent=2) + "\n")
            tmp.replace(table_file)
            if wait:
                wait_for("the gateway stand-in re-reading its routes", lambda: reloads() > before, 30, 0.1)

        write_table(wait=False)
        entries = figures.steady(self.model(), self.bands(), ROLLOUT_TIMEOUT_S)
        replay_file = self.run_dir / "replay-canary.jsonl"
        replay_file.write_text(replay.write(entries))
        out = self.run_dir / "canary"
        out.mkdir(parents=True, exist_ok=True)
        self.procs.start(
            "gateway-canary",
            [
                *netns.exec_prefix(dataplane.GATEWAY_NS),
                str(self.bins["gateway"]),
                f"--routes={table_file}",
                f"--routes-reload={ROUTES_RELOAD_S}s",
                f"--replay={replay_file}",
                f"--out={out}",
                "--pick-deadline=15s",
                f"--probe-period={self.topo.picker.probe_period_s}s",
                f"--probe-failures={self.topo.picker.probe_failures}",
            ],
            self.logs,
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
            time.sleep(LEAD_S)
            # 1. The canary at weight 0 (docs/day-two.md: a canary starts without traffic).
            began = time.monotonic()
            apply_all(self.kube, renders[0])
            write_table()
            for i, (name, ip) in enumerate([*spaces, render_space]):
                netns.attach(name, ip, CANARY_FIRST_VETH + i)
            if canary_topo.renderer:
                netns.write_hosts([n for n, _ in spaces], {canary_topo.renderer.host: render_space[1]})
                self.procs.start(
                    "canary-render",
                    [
                        *netns.exec_prefix(render_space[0]),
                        str(self.bins["simulator"]),
                        *dataplane.renderer_args(canary_topo.renderer),
                    ],
                    self.logs,
                )
            forwarder = netns.Forwarder(
                [n for n, _ in spaces], "127.0.0.1", cluster.load_state(self.root).ports["apiserver"]
            )
            canary_pickers = self.canary_pickers(canary_topo, [ip for _, ip in spaces])
            revision = wait_for(
                "the canary's pods Ready",
                lambda: settled(serving_pods(self.kube, self.topo.namespace, canary_set), canary_expected),
                timeout=ROLLOUT_TIMEOUT_S,
                interval=0.5,
            )
            canary_health = [f"{ip}:{health_port}" for _, ip in spaces]
            self.routed_by(canary_pickers, canary_health, canary_topo.picker, "canary-warm")
            up_s = time.monotonic() - began
            pickers[canary_pool] = canary_pickers
            health[canary_pool] = canary_health
            write_table()
            # 2. The canary's weight, measured for CANARY_WINDOW_S.
            apply_all(self.kube, renders[CANARY_WEIGHT])
            write_table()
            shift_at = now_ms()
            time.sleep(CANARY_WINDOW_S)
            shift_until = now_ms()
            # 3. Rolled back: the live rendering again (the route back to the stable pool first),
            # then what it no longer has deleted, as `pulumi up` without `serving.canary` does.
            rollback_at = now_ms()
            gone_began = time.monotonic()
            apply_all(self.kube, self.renders[live])
            write_table()
            for obj in reversed(pruned(renders[CANARY_WEIGHT], self.renders[live])):
                self.kube.delete(obj)
            wait_for(
                "the canary's pods gone",
                lambda: not serving_pods(self.kube, self.topo.namespace, canary_set),
                RECOVERY_TIMEOUT_S,
                0.5,
            )
            gone_s = time.monotonic() - gone_began
            time.sleep(TAIL_S)
            rollback_until = now_ms()
            stable_after = {
                p["metadata"]["uid"] for p in serving_pods(self.kube, self.topo.namespace, self.set_name)
            }
        finally:
            self.procs.stop("gateway-canary")
            self.procs.stop("canary-")
            if forwarder is not None:
                forwarder.close()
            for name, _ in [*spaces, render_space]:
                netns.detach(name)
        results = read_results(out)
        (self.run_dir / "canary-endpoints.json").write_text(
            json.dumps({ip: vars(e) for ip, e in self.kubelet.endpoints.items()}, indent=2) + "\n"
        )
        shifted = [r for r in results if shift_at <= r["start_ms"] <= shift_until]
        c = figures.canary(
            self.stack,
            CANARY_WEIGHT,
            revision,
            stable_revision or "",
            canary_pool,
            shifted,
            figures.in_flight(results, rollback_at, rollback_until),
            self.kubelet.endpoints,
            stable_before,
            stable_after,
        )
        return [figures.canary_line(c), figures.canary_detail(c, up_s, gone_s)], figures.canary_failures(c)

    def canary_pickers(self, topo: topology.Topology, ips: list[str]) -> list[str]:
        """The canary pool's endpoint pickers, as the rendered canary Deployment runs them (its
        flags, config, env and replicas), each in its own namespace at `ips[i]`."""
        config_file = self.run_dir / "config-canary-pool" / "epp.yaml"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(topo.picker.config)
        port = next(a.split("=")[1] for a in topo.picker.args if a.startswith("--grpc-port="))
        addresses = []
        for i, ip in enumerate(ips):
            name = f"{topo.picker.name}-{i}"
            env = {
                "KUBECONFIG": str(self.kubeconfig),
                "NAMESPACE": topo.namespace,
                "POD_NAME": name,
                **topo.picker.env,
            }
            argv = [
                *netns.exec_prefix(f"canary-picker-{i}", hostname=name),
                str(self.bins["epp"]),
                *dataplane.picker_args(topo.picker.args, config_file),
            ]
            self.procs.start(f"canary-picker-{i}", argv, self.logs, env)
            addresses.append(f"{ip}:{port}")
        return addresses

    def routed_by(self, pickers: list[str], health: list[str], picker: topology.Picker, tag: str) -> None:
        """Wait until one request is routed and served through `pickers` alone (the stand-in in
        picker mode, probing `health` as the rendered readiness probe does)."""
        warm_file = self.run_dir / f"warm-{tag}.jsonl"
        first = figures.steady(self.model(), self.bands(), 1)[0]
        warm_file.write_text(replay.write([{**first, "id": "warmup", "session": "warmup"}]))
        warm = self.run_dir / f"warm-{tag}"
        warm.mkdir(parents=True, exist_ok=True)

        def routed() -> bool:
            proc = self.procs.start(
                f"gateway-{tag}",
                [
                    *netns.exec_prefix(dataplane.GATEWAY_NS),
                    str(self.bins["gateway"]),
                    f"--pickers={','.join(pickers)}",
                    f"--replay={warm_file}",
                    f"--out={warm}",
                    "--pick-deadline=5s",
                    f"--health={','.join(health)}",
                    f"--probe-period={picker.probe_period_s}s",
                    f"--probe-failures={picker.probe_failures}",
                ],
                self.logs,
            )
            proc.wait(timeout=120)
            self.procs.stop(f"gateway-{tag}")
            return any(r["outcome"] == "served" for r in read_results(warm))

        wait_for(f"{tag}: a request routed by the canary's pickers", routed, 120, 2)

    # --- Faults under steady agent traffic (docs/day-two.md, "Faults under traffic"): one gateway
    # stand-in, one traffic stream; each scenario is one method that injects its fault, waits for
    # the recovery and returns its window on the gateway's clock. `faults` runs them in order.

    def faults(self) -> tuple[list[str], list[str]]:
        """The pickers restart with the rendered config (rollout screener on); steady traffic
        runs through every fault scenario in turn. Returns (contract lines, failures)."""
        assert self.kubelet is not None
        pickers = self.pickers(self.topo.picker.config, "faults")
        entries = figures.steady(self.model(), self.bands(), FAULT_TRAFFIC_S)
        replay_file = self.run_dir / "replay-faults.jsonl"
        replay_file.write_text(replay.write(entries))
        out = self.run_dir / "faults"
        out.mkdir(parents=True, exist_ok=True)
        argv = dataplane.gateway_argv(
            self.bins,
            pickers,
            self.topo.picker,
            f"--replay={replay_file}",
            f"--out={out}",
            "--pick-deadline=15s",
        )
        self.procs.start("gateway-faults", argv, self.logs)
        clock = out / "start_unix_ms"
        wait_for("the fault replay's clock", clock.exists, 30, 0.1)
        start_ms = float(clock.read_text())

        def now_ms() -> float:
            return time.time() * 1000 - start_ms

        time.sleep(FAULT_GAP_S)
        failover = self.failover_fault(pickers, now_ms)
        time.sleep(FAULT_GAP_S)
        before_loss = serving_pods(self.kube, self.topo.namespace, self.set_name)
        node = self.node_loss_fault(now_ms)
        spare_lines = self.node_loss_contract(before_loss, node)
        time.sleep(FAULT_GAP_S)
        gpu = self.gpu_loss_fault(now_ms)
        time.sleep(FAULT_GAP_S)
        self.procs.stop("gateway-faults")
        results = read_results(out)
        (self.run_dir / "faults-endpoints.json").write_text(
            json.dumps({ip: vars(e) for ip, e in self.kubelet.endpoints.items()}, indent=2) + "\n"
        )
        lines: list[str] = []
        failures: list[str] = []
        fo = failover_figures(results, failover)
        lines.append(figures.failover_line(fo))
        failures += figures.failover_failures(fo)
        lost = figures.loss(node.what, node.at_ms, node.until_ms, results, node.addresses, node.recovered_s)
        lines.append(figures.node_loss_line(lost))
        lines.append(figures.loss_detail("node loss", lost))
        lines += spare_lines
        failures += figures.loss_failures("node loss", lost)
        moved = figures.loss(gpu.what, gpu.at_ms, gpu.until_ms, results, gpu.addresses, gpu.recovered_s)
        lines.append(figures.gpu_loss_line(moved))
        lines.append(figures.loss_detail("gpu loss", moved))
        lines.append(
            f"day-two: gpu loss: not a DeviceTaintRule: the {self.stack} stack's pods hold no "
            "ResourceClaim (acceleratorAllocation none, no ResourceSlice), and the device-taint "
            f"eviction controller evicts only pods whose claims hold a tainted device, so {gpu.what}'s "
            "decode pod was drained instead (cordon, then the Eviction API)"
        )
        failures += figures.loss_failures("gpu loss", moved)
        return lines, failures

    def failover_fault(self, pickers: list[str], now_ms: Callable[[], float]) -> "Window":
        """The leader endpoint picker is stopped (SIGTERM, as a rollout or an eviction stops it;
        devtools/dataplane/phases.py does the same in the data-plane twin); the standby takes over.
        The window runs FAILOVER_WINDOW_S."""
        who = dataplane.leader(self.kube, self.topo.namespace)
        index = next(
            (i for i in range(self.topo.picker.replicas) if who == f"{self.topo.picker.name}-{i}"), None
        )
        if index is None:
            raise cluster.TwinError(f"failover: no picker holds the leader lease (holder {who!r})")
        at_ms = now_ms()
        stopping = threading.Thread(target=self.procs.stop, args=(f"picker-{index}-",), daemon=True)
        stopping.start()
        time.sleep(FAILOVER_WINDOW_S)
        return Window(pickers[index], at_ms, now_ms(), frozenset(), FAILOVER_WINDOW_S)

    def node_loss_fault(self, now_ms: Callable[[], float]) -> "Window":
        """A decode worker's node dies: the processes of every serving pod on it stop at once (the
        process kubelet no longer acts for it), the Node turns NotReady and is cordoned, and its
        pods are deleted as the node lifecycle controller's eviction does (here at once, not
        after the pods' 300 s unreachable toleration); once the LWS controller has restarted
        their groups the pods are force-deleted with the Node (no kubelet will ever finish them).
        The window ends when every group that had a pod there is back with new pods, all Ready."""
        assert self.kubelet is not None
        pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
        decode = [
            p
            for p in pods
            if p["metadata"]["labels"].get(topology.DS_ROLE) == "decode"
            and p["metadata"]["labels"].get(lws_checks.WORKER_INDEX, "0") != "0"
            and lws_checks.is_ready(p)
        ]
        victim = sorted(decode, key=lambda p: p["metadata"]["name"])[-1]
        node = str(victim["spec"]["nodeName"])
        # Every serving pod on the node dies with it (with no GPUs the scheduler may put a
        # prefill pod beside the decode worker), and with each its whole group.
        on_node = [p for p in pods if p["spec"].get("nodeName") == node]
        members = groups_on(pods, node)
        keys = sorted(members)
        old = {p["metadata"]["uid"] for group in members.values() for p in group}
        addresses = frozenset(str(p["status"]["podIP"]) for group in members.values() for p in group)
        namespace = victim["metadata"]["namespace"]
        at_ms = now_ms()
        began = time.monotonic()
        self.kubelet.lose_node(node)
        merge = "application/merge-patch+json"
        self.kube.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}, merge)
        self.kube.request("PATCH", f"/api/v1/nodes/{node}/status", not_ready_status(), merge)
        for p in on_node:
            self.kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}")

        def leaders_going() -> bool:
            for k in keys:
                try:
                    found = self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{lws_checks.group_name(k)}")
                except ApiError as error:
                    if error.code == 404:
                        continue
                    raise
                if found["metadata"]["uid"] in old and not found["metadata"].get("deletionTimestamp"):
                    return False
            return True

        names = ", ".join(lws_checks.group_name(k) for k in keys)
        wait_for(f"node loss: the LWS controller restarting {names}", leaders_going, 60, 0.2)
        for p in on_node:
            self.kube.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}",
                {"gracePeriodSeconds": 0, "preconditions": {"uid": p["metadata"]["uid"]}},
            )
        self.kube.request("DELETE", f"/api/v1/nodes/{node}")

        def back() -> bool:
            now = lws_checks.groups(serving_pods(self.kube, self.topo.namespace, self.set_name))
            return all(
                len(now.get(k, [])) == len(members[k])
                and not ({p["metadata"]["uid"] for p in now.get(k, [])} & old)
                and all(map(lws_checks.is_ready, now.get(k, [])))
                for k in keys
            )

        wait_for(f"node loss: {names} back and Ready", back, RECOVERY_TIMEOUT_S, 0.5)
        return Window(node, at_ms, now_ms(), addresses, time.monotonic() - began)

    def node_loss_contract(self, before: list[dict[str, Any]], w: "Window") -> list[str]:
        """e2e's `node loss:` line with a spare node for each group the lost node took down: the
        spare nodes are those of the serving node groups that ran no pod of the set before."""
        used = {p["spec"].get("nodeName") for p in before}
        spare = {n for n in serving_nodes(self.root / "stacks", self.stack) if n not in used and n != w.what}
        after = serving_pods(self.kube, self.topo.namespace, self.set_name)
        return contract.node_loss_lines(w.what, before, after, spare, w.recovered_s)

    def gpu_loss_fault(self, now_ms: Callable[[], float]) -> "Window":
        """A decode node's GPU goes bad. A DRA DeviceTaintRule acts only through ResourceClaims
        (Kubernetes v1.34 pkg/controller/devicetainteviction evicts pods whose allocated claims
        hold a tainted device; the scheduler skips tainted devices when it allocates a claim), and
        this stack's pods hold none (kind local: acceleratorAllocation none, no ResourceSlice;
        docs/day-two.md, "Faults under traffic"), so the node is drained as an operator does with
        a failed GPU: cordoned (the node.kubernetes.io/unschedulable taint),
        its decode pod evicted through the Eviction API (retried while the role's
        PodDisruptionBudget refuses). The window ends when the group is back with new pods, all
        Ready, none on that node."""
        pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
        decode = [
            p
            for p in pods
            if p["metadata"]["labels"].get(topology.DS_ROLE) == "decode"
            and p["metadata"]["labels"].get(lws_checks.WORKER_INDEX, "0") != "0"
            and lws_checks.is_ready(p)
        ]
        victim = sorted(decode, key=lambda p: p["metadata"]["name"])[0]
        key = lws_checks.group_key(victim)
        members = lws_checks.groups(pods)[key]
        old = {p["metadata"]["uid"] for p in members}
        addresses = frozenset(str(p["status"]["podIP"]) for p in members)
        node = str(victim["spec"]["nodeName"])
        at_ms = now_ms()
        began = time.monotonic()
        merge = "application/merge-patch+json"
        self.kube.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}, merge)
        wait_for(
            f"gpu loss: {victim['metadata']['name']} evicted",
            lambda: lws_checks.eviction(self.kube, victim)[0] in (200, 201, 404),
            RECOVERY_TIMEOUT_S,
            1.0,
        )

        def back() -> bool:
            now = lws_checks.groups(serving_pods(self.kube, self.topo.namespace, self.set_name)).get(key, [])
            return (
                len(now) == len(members)
                and not ({p["metadata"]["uid"] for p in now} & old)
                and all(map(lws_checks.is_ready, now))
                and all(p["spec"].get("nodeName") != node for p in now)
            )

        wait_for(
            f"gpu loss: group {lws_checks.group_name(key)} moved and Ready", back, RECOVERY_TIMEOUT_S, 0.5
        )
        return Window(node, at_ms, now_ms(), addresses, time.monotonic() - began)

    # --- Scaling (docs/day-two.md, "Scaling"): the HPA KEDA would make, against an
    # external-metrics stand-in serving the trigger's query from the live Prometheus.

    def scale(
        self, meanwhile: Callable[[], tuple[list[str], list[str]]] | None = None
    ) -> tuple[list[str], list[str]]:
        """A burst of long prompts until the HPA has scaled the autoscaled role up and the new
        instance is Ready; then no traffic until it is back at its minimum. `meanwhile`, a
        scenario that needs no traffic either (the alerts' fault), runs in a thread beside the
        scale-down's wait: the rendered stabilization window is waited in full, not twice.
        Returns (contract lines, failures), `meanwhile`'s after the scaling's."""
        objects = [o for o in self.renders[0] if o["kind"] == "ScaledObject"]
        if not objects:
            alone = meanwhile() if meanwhile is not None else ([], [])
            return [f"scale: not run: the {self.stack} stack autoscales no role", *alone[0]], alone[1]
        scaled = objects[0]
        role = scaling.role_of(scaled, self.set_name)
        hpa = scaling.keda_hpa(scaled)
        a, maximum = int(hpa["spec"]["minReplicas"]), int(hpa["spec"]["maxReplicas"])
        ns, hpa_name = hpa["metadata"]["namespace"], hpa["metadata"]["name"]
        scaler = hpa["spec"]["scaleTargetRef"]["name"]
        size = next(
            int(r["spec"]["leaderWorkerTemplate"].get("size", 1))
            for r in self.topo.serving_set["spec"]["roles"]
            if r["name"] == role
        )
        binary = scaling.ensure()
        forward = scaling.IntoNamespace(prometheus.NS, prometheus.IP, prometheus.PORT)
        aggregation: list[dict[str, Any]] = []
        try:
            config = self.run_dir / "metrics-adapter.json"
            config.write_text(
                json.dumps(
                    {
                        "prometheus": f"http://127.0.0.1:{forward.port}",
                        "metrics": scaling.adapter_metrics(self.renders[0]),
                    },
                    indent=2,
                )
                + "\n"
            )
            certs = pki.Pki(cluster.twin_dir(self.root) / "pki")
            cert, key = pki.serving_cert(
                certs, "metrics-adapter", (f"{scaling.ADAPTER_NAME}.{scaling.ADAPTER_NAMESPACE}.svc",)
            )
            port = cluster.free_port()
            self.procs.start(
                "metrics-adapter",
                scaling.adapter_argv(binary, port, config, cert, key, self.kubeconfig),
                self.logs,
            )
            aggregation = scaling.aggregation_objects(port, certs.ca_cert.read_bytes())
            for obj in aggregation:
                self.kube.apply(obj)
            wait_for(
                f"APIService {scaling.APISERVICE_NAME} Available",
                lambda: scaling.available(
                    self.kube.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{scaling.APISERVICE_NAME}")
                ),
                120,
                1.0,
            )
            pickers = self.pickers(self.topo.picker.config, "scale")
            template = figures.steady(self.model(), self.bands(), 1)[0]
            replay_file = self.run_dir / "replay-scale.jsonl"
            replay_file.write_text(replay.write(scaling.burst_entries(template, BURST)))
            out = self.run_dir / "scale"
            out.mkdir(parents=True, exist_ok=True)
            argv = dataplane.gateway_argv(
                self.bins,
                pickers,
                self.topo.picker,
                f"--replay={replay_file}",
                f"--out={out}",
                "--pick-deadline=15s",
            )
            hpa_path = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{hpa_name}"
            scaler_path = (
                f"/apis/{scaling.ROLE_SCALER_API}/namespaces/{ns}/disaggregatedsetrolescalers/{scaler}"
            )
            peak: list[str] = []

            last = (a, a)

            def look() -> tuple[int, int]:
                """(the scaler's replicas, the role's groups Ready and not going), the HPA's metric
                kept; the last answer again while the API server does not answer."""
                nonlocal last
                try:
                    status = self.kube.get(hpa_path).get("status") or {}
                    peak.extend(scaling.current_values(status))
                    wanted = int(self.kube.get(scaler_path)["spec"].get("replicas") or 0)
                    pods = [
                        p
                        for p in serving_pods(self.kube, self.topo.namespace, self.set_name)
                        if p["metadata"]["labels"].get(topology.DS_ROLE) == role
                    ]
                except ApiError:
                    return last
                last = (wanted, scaling.ready_groups(pods, size))
                return last

            def role_pods() -> list[dict[str, Any]]:
                return [
                    p
                    for p in serving_pods(self.kube, self.topo.namespace, self.set_name)
                    if p["metadata"]["labels"].get(topology.DS_ROLE) == role
                ]

            before_pods = role_pods()
            self.procs.start("gateway-scale", argv, self.logs)
            began = time.monotonic()
            b = a
            up_s = None
            while time.monotonic() - began < BURST.seconds + SCALE_UP_GRACE_S:
                wanted, ready = look()
                b = max(b, wanted)
                if wanted > a and ready >= wanted:
                    up_s = time.monotonic() - began
                    break
                time.sleep(1.0)
            self.procs.stop("gateway-scale")
            if up_s is None:
                up_s = time.monotonic() - began
            peak_pods = role_pods()
            stopped = time.monotonic()
            down_s = None
            pool = ThreadPoolExecutor(1, thread_name_prefix="beside-scale-down")
            beside = pool.submit(meanwhile) if meanwhile is not None else None
            if b > a:
                while time.monotonic() - stopped < SCALE_DOWN_TIMEOUT_S:
                    wanted, ready = look()
                    try:
                        pods = serving_pods(self.kube, self.topo.namespace, self.set_name)
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
            status_replicas = (self.kube.get(scaler_path).get("status") or {}).get("replicas")
            # The scenario beside the scale-down ends before the stand-in it may read goes.
            beside_lines, beside_failures = beside.result() if beside is not None else ([], [])
            pool.shutdown()
            results = read_results(out)
            failed = sum(1 for r in results if r.get("outcome") != "served")
            lines = [
                scaling.scale_line(role, a, b, up_s, down_s),
                contract.scale_contract_line(
                    role, before_pods, peak_pods, after_pods, scaler, up_s, down_s, status_replicas
                ),
                f"day-two: scale: {hpa_name} -> {scaling.ROLE_SCALER_KIND} {scaler}: metric "
                f"{scaling.metric_summary(hpa, peak)}; burst {len(results)} requests "
                f"({BURST.per_second:g}/s of ~{BURST.prompt_words} words), {failed} failed; "
                f"scale-down window {scaling.scale_down_window(hpa)} s (rendered)",
            ]
            return [*lines, *beside_lines], [
                *scaling.scale_failures(role, a, b, maximum, down_s, failed, len(results)),
                *beside_failures,
            ]
        finally:
            self.procs.stop("gateway-scale")
            for obj in reversed(aggregation):
                with contextlib.suppress(ApiError):
                    self.kube.delete(obj)
            self.procs.stop("metrics-adapter")
            forward.close()


# The replay's phases in the order they run (`--only` runs some of them after the deployment and
# its `controller:` line): the routing figures, the upgrades with the canary, the faults and the
# scaling with the alerts (one phase: each starts from what the one before it left), the
# Responses phase and the multi-model phase; last the precise-routing reference, whose pickers take
# the replay's pickers' namespaces (reference_phase.py).
PHASE_ORDER = ("routing", "faults", "responses", "models", "reference")


def _faults(run: Replay) -> list[str]:
    """The upgrades, the canary, the faults, then the scaling with the alerts, in that order:
    each starts from the revision and the nodes the one before it left. Prints their lines and
    returns the failures."""
    failures: list[str] = []
    # Prometheus and alerts (devtools/daytwo/alerts.py): scraping from here to the end.
    run.monitor = alerts.start(run)
    pickers = run.pickers(run.topo.picker.config, "screener-on")
    on = run.upgrade("screener-on", pickers, run.revision_a, 1)
    print(figures.upgrade_line(on))
    print(figures.detail_line("screener on", on))
    print(run.rollouts["screener-on"])
    failures += figures.upgrade_failures(on)
    pickers = run.pickers(without_gating(run.topo.picker.config), "screener-off")
    off = run.upgrade("screener-off", pickers, on.after, 2)
    print(figures.screener_off_line(off))
    print(figures.detail_line("screener off", off))
    failures += figures.screener_off_failures(off)
    # The canary beside revision c, shifted and rolled back (before the faults, which take
    # nodes away).
    canary_lines, canary_failures = run.canary(len(NEXT_MAX_NUM_SEQS))
    print("\n".join(canary_lines))
    failures += canary_failures
    fault_lines, fault_failures = run.faults()
    for line in fault_lines:
        print(line)
    failures += fault_failures
    # Scaling, then Prometheus and alerts: the fault that fires the router's alerts needs no
    # traffic, as the scale-down's stabilization window does; it runs during that window.
    monitor = run.monitor
    scale_lines, scale_failures = run.scale(
        lambda: alerts.pickers_down(run, monitor, without_gating(run.topo.picker.config))
    )
    print("\n".join(scale_lines))
    failures += scale_failures
    return failures


def main(argv: Sequence[str]) -> int:
    positional = [a for a in argv if not a.startswith("--")]
    stack = positional[0] if positional else DEFAULT_STACK
    load_seconds = DEFAULT_LOAD_S
    by_engine = True
    with_models = True
    only = frozenset(PHASE_ORDER)
    for a in argv:
        if a == "--apply-manifests":
            by_engine = False
        elif a == "--without-models":
            with_models = False
        elif a.startswith("--only="):
            only = frozenset(p for p in a.split("=", 1)[1].split(",") if p)
            unknown = sorted(only - set(PHASE_ORDER))
            if unknown or not only:
                what = f"{','.join(unknown)} is not a phase" if unknown else "names no phase"
                print(
                    f"day-two: --only: {what} (allowed: a comma-separated list of {', '.join(PHASE_ORDER)})",
                    file=sys.stderr,
                )
                return 2
        elif a.startswith("--load-seconds="):
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
            print(
                f"day-two: unknown flag {a} (allowed: --load-seconds=S, --apply-manifests, "
                "--without-models, --only=PHASE,...)",
                file=sys.stderr,
            )
            return 2
    if not (CHECKOUT / "stacks" / f"Pulumi.{stack}.yaml").is_file():
        print(f"day-two: no stack file stacks/Pulumi.{stack}.yaml", file=sys.stderr)
        return 2
    started = time.monotonic()
    run = Replay(CHECKOUT, stack, load_seconds, by_engine)
    try:
        run.prepare()
    except source_snapshot.SnapshotMissing as error:
        print(f"day-two: not run: {error}")
        return 0
    failures: list[str] = []
    try:
        run.start()
        print(f"day-two: simulated model load per pod: {load_seconds:.1f} s (process kubelet)")
        controller_line, controller_failures = run.controller_contract()
        print(controller_line)
        failures += controller_failures
        if only != frozenset(PHASE_ORDER):
            print(f"day-two: phases: {', '.join(p for p in PHASE_ORDER if p in only)} (--only)")
        if "routing" in only:
            # The data plane's routing figures and its negative control on this deployment
            # (devtools/daytwo/routing.py), before the upgrades.
            routing_lines, routing_failures = routing.measure(run)
            print("\n".join(routing_lines))
            failures += routing_failures
        if "faults" in only:
            failures += _faults(run)
        # The Responses phase on the replay's deployment, then several models in a namespace of
        # their own on its twin (docs/day-two.md; responses_phase.py, models_phase.py).
        phases = [
            *([responses_phase.run_phase] if "responses" in only else []),
            *([models_phase.run_phase] if with_models and "models" in only else []),
            *([reference_phase.run_phase] if "reference" in only else []),
        ]
        if not with_models:
            print("day-two: models: not run here (--without-models): make dataplane-reference runs it")
        for phase in phases:
            phase_lines, phase_failures = phase(run)
            print("\n".join(phase_lines), flush=True)
            failures += phase_failures
        if run.kubelet is not None:
            failures += run.kubelet.errors
        if run.deployer is not None:
            failures += run.deployer.problems
    except (
        cluster.TwinError,
        build.BuildError,
        prometheus.BuildError,
        scaling.BuildError,
        TimeoutError,
        ApiError,
    ) as error:
        print(f"day-two: failed: {error}", file=sys.stderr)
        return 1
    finally:
        run.close()
    print(f"day-two: {stack} in {time.monotonic() - started:.0f} s; logs {run.run_dir}")
    for failure in failures:
        print(f"day-two: FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0
