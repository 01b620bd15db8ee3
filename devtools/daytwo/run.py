"""`make day-two` (docs/day-two.md): day two under traffic in one replay: a rolling upgrade
under steady agent traffic with the rollout screener on, then the same kind of upgrade with it
off (the negative control), then a canary shifted and rolled back, then faults under steady
traffic.

    python -m devtools.daytwo [STACK] [--load-seconds=S] [--apply-manifests] [--without-models]
                              [--only=PHASE,...]

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
   simulated load. The real Prometheus (step 10) runs from before this `pulumi up`, and the
   KEDA stand-in makes each ScaledObject's HPA and runs the first pass of KEDA's scale loop
   against it (deploy.py). e2e's `controller:` line for the set (devtools/daytwo/contract.py).
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
7. The canary (devtools/daytwo/canary_phase.py): under steady traffic through the gateway
   stand-in routing by the applied HTTPRoute's weighted backendRefs, the stack with
   `serving.canary` at weight 0 is applied; the canary's DisaggregatedSet comes up through the
   LWS controller and the process kubelet and its own pickers start; the weight is raised to
   CANARY_WEIGHT and measured; the canary is rolled back (revision c's rendering applied, what it
   no longer has deleted). The `canary:` line.
8. Faults under one steady traffic stream (devtools/daytwo/faults_phase.py, one function per
   scenario): the leader picker stopped (`failover:`), a decode worker's node lost (`node
   loss:`, and e2e's `node loss:` line with a spare node), a decode node drained in place of a
   GPU device taint (a DeviceTaintRule evicts through ResourceClaims, which this stack's pods do
   not hold; `gpu loss:`).
9. The output-id stand-in goes in front of every simulator for step 11's Responses phase
   (`mend_engines`). Scaling (devtools/daytwo/scale_phase.py, the pure parts in scaling.py): the
   HPA KEDA would make from the rendered ScaledObject (applied beside it: the twin runs no KEDA)
   scales the role's DisaggregatedSetRoleScaler on the trigger's query, served from the live
   Prometheus by an external-metrics stand-in behind the API server's aggregation layer; a burst
   of long prompts raises it, and the role comes back down after the rendered cooldown. The
   `scale:` line, and e2e's `scale:` line from the same scaling.
10. A real Prometheus (devtools/daytwo/prometheus.py, alerts.py) scrapes from step 3 on;
    during step 9's scale-down window (no traffic runs then either) both pickers are stopped
    until the router's alerts fire and restarted until they resolve (the `alert:` lines), and
    promtool evaluates the other rendered alerts over the series the run scraped.
11. Beside step 10 (`beside_alerts`): the Responses phase on the deployment's pods through
    two more replicas of its picker Deployment at addresses of their own, holding the lease the
    stopped pickers gave up until it ends (responses_phase.py `run_beside`); then, each in a
    namespace of its own on the twin with pickers of its own, the multi-model reference
    (models_phase.py) and onprem-h100 scaled with precise prefix routing (reference_phase.py).
    Without the faults phase (`--only`), the Responses phase runs after the routing figures,
    through the deployment's pickers.

The last line, `day-two: seconds:`, gives each part's wall seconds (`Clock`).

With --without-models the multi-model phase is left out (`make dataplane-reference` runs it
alone); --only=PHASE,... runs only the named phases after step 2 (PHASE_ORDER).

What the phases share (the rendering, the serving set's pods, the gateway stand-in's results,
the timings) is devtools/daytwo/serving.py.

With --apply-manifests every revision is applied as its rendered manifests (server-side)
instead of by `pulumi up`.
"""

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from devtools import source_snapshot
from devtools.dataplane import build, netns, replay, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import (
    alerts,
    canary_phase,
    contract,
    deploy,
    faults_phase,
    figures,
    models_phase,
    operator_config,
    prometheus,
    reference_phase,
    responses_phase,
    routing,
    scale_phase,
    scaling,
)
from devtools.daytwo.kubelet import ProcessKubelet
from devtools.daytwo.serving import (
    LEAD_S,
    ROLLOUT_TIMEOUT_S,
    TAIL_S,
    read_results,
    render,
    replay_gateway,
    serving_nodes,
    serving_pods,
    settled,
)
from devtools.router_check.check import without_gating
from devtools.twin import cluster, lws_checks, manifests
from devtools.twin.kube import ApiError, Kube, wait_for
from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.core.problems import ConfigError

DEFAULT_STACK = "day-two"
# The revisions: decode `maxNumSeqs` as rendered (a), then these (b, then c).
NEXT_MAX_NUM_SEQS = (24, 16)


def declared_load_seconds(root: Path, stack: str) -> float:
    """How long a new pod of the process kubelet loads before its readiness probe may pass: the
    stack's own `serving.modelLoadMinutes` (15 s on day-two, long enough that each rollout step
    keeps both revisions serving for MIN_OVERLAP_S), so what the scaler's cooldown, the alerts and
    the probes were rendered for is what the replay waits."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    return float(stack_config(read_stack_file(root / "stacks", stack)).serving.model_load_seconds)


def variant(text: str, max_num_seqs: int) -> str:
    """The stack file with decode `maxNumSeqs` set to `max_num_seqs` (pure)."""
    doc = yaml.safe_load(text)
    doc["config"]["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] = max_num_seqs
    return str(yaml.safe_dump(doc, sort_keys=False))


def lead_problem(tag: str, before: str, after: str, began: float, first_ready: float | None) -> str | None:
    """What is wrong with an upgrade's start (pure): revision `after` served (its first pod turned
    Ready at `first_ready`) less than LEAD_S after the traffic began, so the window does not hold
    revision `before` serving alone first; or no pod of it turned Ready at all."""
    if first_ready is None:
        return f"{tag}: no pod of revision {after} turned Ready in the process kubelet"
    lead = first_ready - began
    if lead < LEAD_S:
        return (
            f"{tag}: revision {after} served {lead:.1f} s after the steady traffic began, before "
            f"{LEAD_S:.0f} s of it against revision {before} alone: the rollout's start is not measured"
        )
    return None


def established(kube: Kube, crd: dict[str, Any]) -> bool:
    conditions = (kube.read(crd).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def ready_decode(pods: list[dict[str, Any]], size: int) -> int:
    """Decode groups (any revision) whose `size` pods are all Ready. Pure."""
    by_group = lws_checks.groups(p for p in pods if p["metadata"]["labels"].get(topology.DS_ROLE) == "decode")
    return sum(
        1 for members in by_group.values() if len(members) == size and all(map(lws_checks.is_ready, members))
    )


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
        # The running pickers' config and addresses (`pickers`).
        self.picker_state: tuple[str, list[str]] | None = None

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
        revisions: list[tuple[Path, Path]] = []
        for tag, stack_text in (
            ("a", text),
            *((chr(ord("b") + i), variant(text, n)) for i, n in enumerate(NEXT_MAX_NUM_SEQS)),
        ):
            stacks_dir = self.run_dir / f"stacks-{tag}"
            stacks_dir.mkdir(parents=True)
            (stacks_dir / f"Pulumi.{self.stack}.yaml").write_text(stack_text)
            revisions.append((stacks_dir, self.run_dir / f"render-{tag}"))
        # Every rendering the run reads, made now, two at a time, while the machine is idle
        # (`serving.rendered_into`): the three revisions, then what the later phases read.
        later: list[Callable[[], object]] = [
            lambda: canary_phase.rendered(self, len(NEXT_MAX_NUM_SEQS), 0),
            lambda: canary_phase.rendered(self, len(NEXT_MAX_NUM_SEQS), canary_phase.CANARY_WEIGHT),
            lambda: responses_phase.rendered_reference(self),
            lambda: models_phase.render_models(self),
            lambda: reference_phase.render_reference(self),
        ]
        with ThreadPoolExecutor(2, thread_name_prefix="render") as pool:
            self.renders = list(pool.map(lambda pair: render(pair[0], self.stack, pair[1]), revisions))
            list(pool.map(lambda job: job(), later))
        self.render_dirs = [out for _, out in revisions]
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
        """The replay's Prometheus and its configuration's generator before the twin starts: from
        the tool cache, built here (their cold build times printed by `ensure`), or waited for on
        the cache's lock while another process (CI's background builds) builds them; the wait is
        printed."""
        began = time.monotonic()
        self.bins["prometheus"] = prometheus.ensure()
        self.bins["operator-config"] = operator_config.ensure()
        waited = time.monotonic() - began
        if waited >= 1.0:
            print(
                f"day-two: Prometheus and prometheus-operator's config generator ready after "
                f"{waited:.0f} s (built here, or waited for on the tool cache's lock)"
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
        spaces = [
            (dataplane.GATEWAY_NS, dataplane.GATEWAY_IP),
            *dataplane.picker_spaces(self.topo.picker.replicas),
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
        # Prometheus and alerts (alerts.py) before the first `pulumi up`, as a cluster's Prometheus
        # runs before a fleet is deployed: KEDA's scale loop queries it when a ScaledObject
        # appears (deploy.py `_first_pass`). Scraping from here to the end.
        self.monitor = alerts.start(self)
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
            self.deployer = deploy.Deployer(
                self.renders,
                max_num_seqs,
                self.root,
                self.stack,
                self.by_engine,
                self.monitor.instant if self.monitor is not None else lambda expr: None,
            )
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
        """The pickers with `config_text`, once a warm-up request is routed; their addresses. The
        ones running are kept when every one of them still runs with that config (a phase that
        measures the same rendering after another); otherwise they are replaced (between two
        measurements: nothing in flight) and started afresh, logged under `tag`."""
        running = [proc for name, proc in self.procs.items if name.startswith("picker-")]
        state = self.picker_state
        alive = len(running) == self.topo.picker.replicas and all(p.poll() is None for p in running)
        if state is not None and state[0] == config_text and alive:
            addresses = state[1]
        else:
            self.procs.stop("picker-", grace=dataplane.PICKER_SWAP_GRACE_S)
            addresses = self.start_pickers(config_text, tag)
            self.picker_state = (config_text, addresses)
        self.warm(addresses, tag)
        return addresses

    def warm(self, addresses: list[str], tag: str) -> None:
        """Until a request through the pickers at `addresses` is routed and served."""
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

        # Each attempt is a one-request replay (its own gateway stand-in, a 5 s timeout): a short
        # interval finds the pickers ready within a second of it, not two.
        wait_for(f"{tag}: a request routed", routed, 120, 0.5)

    def restart_picker(self, index: int, tag: str) -> None:
        """Picker `index`, stopped by a fault, started again with the config the others run (its
        Deployment recreates it), so the next phase finds every picker running."""
        assert self.picker_state is not None
        self.start_pickers(self.picker_state[0], tag, only={index})

    def start_pickers(
        self,
        config_text: str,
        tag: str,
        spaces: Sequence[tuple[str, str]] | None = None,
        only: Collection[int] | None = None,
        name_prefix: str = "picker-",
    ) -> list[str]:
        """`dataplane.start_pickers` on this replay's topology, tools, twin and logs; their
        addresses."""
        return dataplane.start_pickers(
            self.procs,
            self.topo,
            config_text,
            self.bins,
            self.run_dir,
            self.kubeconfig,
            self.logs,
            tag,
            spaces,
            only,
            name_prefix,
        )

    def model(self) -> str:
        return next(
            names[-1]
            for p in self.topo.pods
            for c in p.containers
            if (names := topology.served_names(c.args))
        )

    def bands(self) -> dict[str, str]:
        return replay.bands_of(self.topo.objectives)

    def upgrade(self, tag: str, config_text: str, before: str, target: int) -> figures.Upgrade:
        """The pickers with `config_text`, steady traffic through them, and at once `pulumi up`
        of the rendering `target`. The rollout is followed to the end. The new revision must
        serve no sooner than LEAD_S after the traffic started (checked: `lead_problem`), so the
        window holds the old revision serving alone first; the engine's program run and diff
        and one simulated load come before that, so there is no wait of its own."""
        assert self.kubelet is not None and self.deployer is not None
        pickers = self.pickers(config_text, tag)
        argv, out = replay_gateway(
            self, tag, pickers, figures.steady(self.model(), self.bands(), ROLLOUT_TIMEOUT_S)
        )
        self.procs.start(f"gateway-{tag}", argv, self.logs)
        began = time.monotonic()
        deployed = self.deployer.start(target)
        watch = contract.RolloutWatch.begin(
            self.kube, self.topo.serving_set, serving_pods(self.kube, self.topo.namespace, self.set_name)
        )
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
        problem = lead_problem(tag, before, after, began, self.kubelet.first_ready(after))
        if problem:
            self.failures.append(problem)
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


# The replay's phases (`--only` runs some of them after the deployment and its `controller:`
# line): the routing figures on revision a; the upgrades with the canary, the faults and the
# scaling with the alerts (one phase: each starts from what the one before it left); the
# Responses phase, the multi-model phase and the precise-routing reference, each with pickers of
# its own, which run beside the alerts' fault (no traffic runs through the deployment's pickers
# then) when the faults phase runs, and in this order after the routing figures otherwise.
PHASE_ORDER = ("routing", "responses", "faults", "models", "reference")
# A phase: its lines and its failures.
Phase = Callable[["Replay"], tuple[list[str], list[str]]]
# A phase that runs beside the alerts' fault with pickers of its own: the lease their fault gives up.
LeaseBorrower = Callable[["Replay", alerts.LeaseHandoff], tuple[list[str], list[str]]]


class Clock:
    """Wall seconds per part of the replay, printed last (`day-two: seconds: prepare 4, deploy
    96, ...`; parts run beside each other joined by `+`): the figures docs/twin.md's CI time
    ledger records for the replay."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.parts: list[tuple[str, float]] = []
        self.mark = now()

    def lap(self, part: str) -> None:
        now = self.now()
        self.parts.append((part, now - self.mark))
        self.mark = now

    def line(self) -> str:
        return "day-two: seconds: " + ", ".join(f"{part} {s:.0f}" for part, s in self.parts)


def run_phases(run: "Replay", phases: Sequence[Phase]) -> tuple[list[str], list[str]]:
    """The phases one after the other; their lines and failures."""
    lines: list[str] = []
    failures: list[str] = []
    for phase in phases:
        phase_lines, phase_failures = phase(run)
        lines += phase_lines
        failures += phase_failures
    return lines, failures


def beside_alerts(
    run: "Replay",
    monitor: prometheus.Monitor,
    phases: Sequence[Phase],
    borrower: LeaseBorrower | None = None,
) -> Callable[[], tuple[list[str], list[str]]]:
    """The alerts' fault (both pickers stopped until the router's alerts fire, then restarted until
    they resolve: about three minutes in which no traffic runs through them) in one thread; in the
    caller's, `borrower` first, with the lease the fault's pickers give up (alerts.py
    `LeaseHandoff`: the fault restarts them once the borrower is done), then `phases`, which share
    nothing with the deployment's pickers, one after the other. The alerts' lines first."""

    def both() -> tuple[list[str], list[str]]:
        handoff = alerts.LeaseHandoff() if borrower is not None else None
        config = without_gating(run.topo.picker.config)
        with ThreadPoolExecutor(1, thread_name_prefix="alerts") as pool:
            fault = pool.submit(alerts.pickers_down, run, monitor, config, handoff)
            lines: list[str] = []
            failures: list[str] = []
            if borrower is not None and handoff is not None:
                lines, failures = borrower(run, handoff)
            more_lines, more_failures = run_phases(run, phases)
            alert_lines, alert_failures = fault.result()
        return [*alert_lines, *lines, *more_lines], [*alert_failures, *failures, *more_failures]

    return both


def _faults(run: Replay, clock: Clock, beside: Sequence[Phase], borrower: LeaseBorrower | None) -> list[str]:
    """The upgrades, the canary, the faults, then the scaling with the alerts, in that order:
    each starts from the revision and the nodes the one before it left; `borrower` and `beside`
    run beside the alerts' fault (`beside_alerts`). Prints their lines and returns the failures."""
    failures: list[str] = []
    assert run.monitor is not None
    on = run.upgrade("screener-on", run.topo.picker.config, run.revision_a, 1)
    print(figures.upgrade_line(on))
    print(figures.detail_line("screener on", on))
    print(run.rollouts["screener-on"])
    failures += figures.upgrade_failures(on)
    off = run.upgrade("screener-off", without_gating(run.topo.picker.config), on.after, 2)
    print(figures.screener_off_line(off))
    print(figures.detail_line("screener off", off), flush=True)
    failures += figures.screener_off_failures(off)
    clock.lap("upgrades")
    # The canary beside revision c, shifted and rolled back (before the faults, which take
    # nodes away).
    canary_lines, canary_failures = canary_phase.run_phase(run, len(NEXT_MAX_NUM_SEQS))
    print("\n".join(canary_lines), flush=True)
    failures += canary_failures
    clock.lap("canary")
    fault_lines, fault_failures = faults_phase.run_phase(run)
    print("\n".join(fault_lines), flush=True)
    failures += fault_failures
    clock.lap("faults")
    if borrower is not None:
        # The Responses phase beside the fault reads what the output-id stand-in records, so it
        # goes in front of every simulator now, between two phases (nothing in flight), and not
        # beside the fault; the pods the scaling adds start behind it too.
        mended = mend_engines(run)
        print(
            "day-two: the output-id stand-in in front of every simulator for the Responses "
            f"phase ({mended:.1f} s)"
        )
    # Scaling, then Prometheus and alerts: the fault that fires the router's alerts needs no
    # traffic, as the scale-down's stabilization window does; it runs during that window, and
    # the phases that need nothing of the deployment run beside it.
    scale_lines, scale_failures = scale_phase.run_phase(
        run, beside_alerts(run, run.monitor, beside, borrower)
    )
    print("\n".join(scale_lines), flush=True)
    failures += scale_failures
    parts = [*([name_of(borrower)] if borrower is not None else []), *(name_of(p) for p in beside)]
    clock.lap("+".join(["scaling", "alerts", *parts]))
    return failures


def mend_engines(run: Replay) -> float:
    """Every running pod's engines restarted behind the output-id stand-in, and every later pod
    started behind it (`ProcessKubelet.mending`); the seconds it took."""
    assert run.kubelet is not None
    began = time.monotonic()
    run.kubelet.restart_engines(with_mend=True)
    return time.monotonic() - began


def name_of(phase: Phase | LeaseBorrower) -> str:
    """A phase's name in PHASE_ORDER: its module's, less `_phase` (pure)."""
    return phase.__module__.rsplit(".", 1)[-1].removesuffix("_phase")


def main(argv: Sequence[str]) -> int:
    positional = [a for a in argv if not a.startswith("--")]
    stack = positional[0] if positional else DEFAULT_STACK
    load_seconds: float | None = None
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
            if not 0 < load_seconds < math.inf:
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
    try:
        declared = declared_load_seconds(CHECKOUT, stack)
    except ConfigError as error:
        print(f"day-two: {stack}: {error}", file=sys.stderr)
        return 2
    load_from = "--load-seconds" if load_seconds is not None else "serving.modelLoadMinutes"
    load_seconds = declared if load_seconds is None else load_seconds
    started = time.monotonic()
    clock = Clock()
    run = Replay(CHECKOUT, stack, load_seconds, by_engine)
    try:
        run.prepare()
    except source_snapshot.SnapshotMissing as error:
        print(f"day-two: not run: {error}")
        return 0
    clock.lap("prepare")
    failures: list[str] = []
    try:
        run.start()
        print(
            f"day-two: simulated model load per pod: {load_seconds:.1f} s (process kubelet; "
            f"{load_from}; the stack declares {declared:.1f} s)"
        )
        controller_line, controller_failures = run.controller_contract()
        print(controller_line)
        failures += controller_failures
        if only != frozenset(PHASE_ORDER):
            print(f"day-two: phases: {', '.join(p for p in PHASE_ORDER if p in only)} (--only)")
        clock.lap("deploy")
        if "routing" in only:
            # The data plane's routing figures and its negative control on this deployment
            # (devtools/daytwo/routing.py), before the upgrades.
            routing_lines, routing_failures = routing.measure(run)
            print("\n".join(routing_lines), flush=True)
            failures += routing_failures
            clock.lap("routing")
        if "responses" in only and "faults" not in only:
            # The Responses phase on the replay's deployment through its pickers
            # (responses_phase.py); with the faults phase, beside the alerts' fault instead.
            phase_lines, phase_failures = responses_phase.run_phase(run)
            print("\n".join(phase_lines), flush=True)
            failures += phase_failures
            clock.lap("responses")
        # Several models, then precise prefix routing, each in a namespace of its own on the
        # replay's twin (docs/day-two.md; models_phase.py, reference_phase.py): beside the alerts'
        # fault when the faults phase runs, else after the phases above.
        beside: list[Phase] = [
            *([models_phase.run_phase] if with_models and "models" in only else []),
            *([reference_phase.run_phase] if "reference" in only else []),
        ]
        if not with_models:
            print("day-two: models: not run here (--without-models): make dataplane-reference runs it")
        if "faults" in only:
            borrower = responses_phase.run_beside if "responses" in only else None
            failures += _faults(run, clock, beside, borrower)
        else:
            for phase in beside:
                phase_lines, phase_failures = phase(run)
                print("\n".join(phase_lines), flush=True)
                failures += phase_failures
                clock.lap(name_of(phase))
        if run.kubelet is not None:
            failures += run.kubelet.errors
        if run.deployer is not None:
            failures += run.deployer.problems
        failures += run.failures
    except (
        cluster.TwinError,
        build.BuildError,
        prometheus.BuildError,
        operator_config.BuildError,
        operator_config.GenerateError,
        scaling.BuildError,
        TimeoutError,
        ApiError,
    ) as error:
        print(f"day-two: failed: {error}", file=sys.stderr)
        return 1
    finally:
        run.close()
    print(clock.line())
    print(f"day-two: {stack} in {time.monotonic() - started:.0f} s; logs {run.run_dir}")
    for failure in failures:
        print(f"day-two: FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0
