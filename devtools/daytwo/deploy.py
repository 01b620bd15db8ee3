"""How the day-two replay puts each revision into the twin (docs/day-two.md, "The upgrade").

By default through the Pulumi engine, as an operator upgrades: `pulumi up` of the stack for
revision a, then `pulumi up` of the edited stack (decode `maxNumSeqs` changed, as `variant` in
run.py edits the stack file) for each next revision, with the real Pulumi CLI, the real Python
language host (or, without its source snapshot, the Automation API's inline program) and the
Kubernetes provider, as `make e2e`'s engine run does (devtools/twin/engine.py `Engine`). With
`--apply-manifests` the rendered objects are applied server-side instead (faster, no engine).

Each `pulumi up` prints the engine's line (`engine: up <N> created (<S> s)`, then `engine: update
<N> updated, <R> replaced (<S> s)`); an upgrade that replaces anything is a failure: a role's
setting changes the DisaggregatedSet in place and the LWS controller rolls it.
"""

import copy
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from devtools.daytwo import scaling
from devtools.twin import cluster, engine_report, manifests
from devtools.twin import engine as twin_engine
from devtools.twin.kube import ApiError, Kube

SERVING_KEY = f"{twin_engine.PROJECT}:serving"
# How long the replay waits for an upgrade's `pulumi up` to return once the rollout has settled
# (the up returns when the DisaggregatedSet is patched: the provider awaits no custom resource).
UP_JOIN_S = 300.0
# How often the KEDA stand-in looks for the ScaledObjects `pulumi up` creates.
KEDA_POLL_S = 0.5
# How long after `pulumi up` returns the KEDA stand-in still waits for a ScaledObject's target to
# answer `/scale`: the DisaggregatedSet controller creates a role's scaler once the set exists.
KEDA_TARGET_WAIT_S = 60.0


def with_decode_max_num_seqs(config: Mapping[str, Any], max_num_seqs: int) -> dict[str, Any]:
    """The engine's stack config with decode `maxNumSeqs` set (the edit `variant` makes to the
    stack file, on the config the engine deploys). Pure."""
    changed = copy.deepcopy(dict(config))
    changed[SERVING_KEY]["roles"]["decode"]["maxNumSeqs"] = max_num_seqs
    return changed


def upgrade_problems(step: engine_report.Step) -> list[str]:
    """What an upgrade's `pulumi up` must not do: change nothing, or replace anything. Pure."""
    problems = []
    if step.counts.get("update", 0) < 1:
        problems.append(f"engine: {step.name}: no resource updated ({dict(step.counts)})")
    if step.replaced:
        problems.append(
            f"engine: {step.name}: {step.replaced} resources replaced (an upgrade updates in place)"
        )
    return problems


def apply_all(kube: Kube, objects: list[dict[str, Any]]) -> None:
    """The rendered objects applied server-side, namespaces and cluster-scoped objects first, and
    beside each ScaledObject the HPA KEDA's operator would make from it (the twin runs no KEDA)."""
    objects = [*objects, *scaling.keda_hpas(objects)]
    namespaced: dict[str, bool] = {}
    for obj in objects:
        key = f"{obj['apiVersion']}/{obj['kind']}"
        if key not in namespaced:
            namespaced[key] = kube.resource(obj["apiVersion"], obj["kind"]).namespaced
    for obj in manifests.apply_order(objects, namespaced):
        kube.apply(obj)


def scale_path(kube: Kube, hpa: dict[str, Any]) -> str:
    """The `/scale` subresource of the HPA's target, the path KEDA's operator and the HPA
    controller read; KeyError while the API server serves no such kind."""
    ref = hpa["spec"]["scaleTargetRef"]
    resource = kube.resource(ref["apiVersion"], ref["kind"])
    return resource.path(hpa["metadata"]["namespace"], ref["name"]) + "/scale"


class Deployer:
    """Revision `i` of the replay into the twin: `pulumi up` (engine) or a server-side apply."""

    def __init__(
        self,
        renders: list[list[dict[str, Any]]],
        max_num_seqs: list[int | None],
        root: Path,
        stack: str,
        by_engine: bool,
        query: Callable[[str], str | None] = lambda expr: None,
    ) -> None:
        self.root = root
        self.query = query
        self.looping: set[tuple[str, str]] = set()
        """The ScaledObjects (namespace, name) whose scale loop KEDA's operator has started: a
        later up that leaves one as it is starts no new loop."""
        """An instant query on the cluster's Prometheus, the answer's body (None: no answer), as
        KEDA's Prometheus scaler sends the trigger's query to its `serverAddress`."""
        self.renders = renders
        self.max_num_seqs = max_num_seqs
        """Decode `maxNumSeqs` per revision (None: as the stack file has it)."""
        self.lines: list[str] = []
        self.problems: list[str] = []
        self.engine: twin_engine.Engine | None = None
        if by_engine:
            self.engine = twin_engine.Engine(stack, root, verbose=False)
            tools = self.engine.tools
            host = (
                f"the real Python language host {tools.host.binary}"
                if tools.host is not None
                else f"the Automation API's inline program ({tools.host_absent})"
            )
            self.say(
                f"day-two: revisions by `pulumi up`: Pulumi CLI {tools.cli}, {host}, "
                f"Kubernetes provider {tools.plugin_version}"
            )

    def say(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def deploy(self, index: int) -> None:
        """Revision `index` into the twin; returns when `pulumi up` (or the apply) has."""
        if self.engine is None:
            # A client of its own: `start` runs this beside the replay's sampling.
            apply_all(cluster.client(self.root), self.renders[index])
            return
        config = self.engine.config
        wanted = self.max_num_seqs[index]
        if wanted is not None:
            config = with_decode_max_num_seqs(config, wanted)
        self.engine.write_config(config)
        # What KEDA's operator does once a ScaledObject exists (the twin runs no KEDA): its HPA,
        # server-side, as soon as the ScaledObject and its target are there, not when the whole
        # up returns.
        left = [
            o
            for o in self.renders[index]
            if o.get("apiVersion") == scaling.KEDA_API and o.get("kind") == "ScaledObject"
        ]
        returned, failed = threading.Event(), threading.Event()
        keda = threading.Thread(target=self._keda_stand_in, args=(left, returned, failed), daemon=True)
        keda.start()
        try:
            step = self.engine.up("up" if index == 0 else "update")
        except Exception as error:  # the CLI's CommandError, the host's or the provider's failure
            failed.set()
            raise cluster.TwinError(f"pulumi up of revision {index}: {error}") from None
        finally:
            returned.set()
            keda.join()
        self.say(engine_report.step_line(step))
        for obj in left:
            ref = obj["spec"]["scaleTargetRef"]
            self.problems.append(
                f"KEDA stand-in: ScaledObject {obj['metadata']['name']}: its target {ref.get('kind')} "
                f"{ref['name']} answered no /scale {KEDA_TARGET_WAIT_S:.0f} s after `pulumi up` "
                "returned, so no HPA was made"
            )
        if index == 0:
            if not step.counts.get("create"):
                self.problems.append("engine: the first up created nothing")
        else:
            self.problems += upgrade_problems(step)

    def _keda_stand_in(
        self, left: list[dict[str, Any]], returned: threading.Event, failed: threading.Event
    ) -> None:
        """KEDA's operator for each ScaledObject of `left`: once the ScaledObject is in the API
        server and its target answers `/scale`, its HPA applied server-side and the ScaledObject
        taken off `left` (kedacore/keda controllers/keda/scaledobject_controller.go checks the
        target with `checkTargetResourceIsScalable` before `ensureHPAForScaledObjectExists`
        creates the HPA, and retries until it can). An HPA made before its target could not
        scale it until the HPA controller's next sync, 15 s later. Stops when `left` is empty,
        at once when the up `failed`, or KEDA_TARGET_WAIT_S after it `returned`."""
        if not left:
            return
        kube = cluster.client(self.root)
        deadline: float | None = None
        while left and not failed.is_set():
            for obj in list(left):
                hpa = scaling.keda_hpa(obj)
                try:
                    kube.read(obj)
                    scale = kube.get(scale_path(kube, hpa))
                    kube.apply(hpa)
                except (ApiError, OSError, KeyError):  # not there yet, or not served yet
                    continue
                left.remove(obj)
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                if key not in self.looping:
                    self.looping.add(key)
                    self._first_pass(kube, obj, hpa, int((scale.get("spec") or {}).get("replicas") or 0))
            if returned.is_set():
                deadline = deadline if deadline is not None else time.monotonic() + KEDA_TARGET_WAIT_S
                if time.monotonic() > deadline:
                    return
            if left:
                failed.wait(KEDA_POLL_S)

    def _first_pass(self, kube: Kube, obj: dict[str, Any], hpa: dict[str, Any], current: int) -> None:
        """The first pass of the scale loop KEDA's operator starts once the HPA exists
        (pkg/scaling/scale_handler.go `startScaleLoop` checks the scalers at once, then every
        `pollingInterval`): the triggers read from Prometheus, and what `RequestScale` writes to
        the target's `/scale` (`scaling.keda_scale`): a role below minReplicaCount with no
        trigger active goes to minReplicaCount now, not at the HPA controller's first sync 15 s
        later. Later passes are not run: with minReplicaCount above 0 and no idleReplicaCount
        (the rendered ScaledObjects) they only hold the minimum the HPA holds too."""
        state = scaling.trigger_state(obj, self.query)
        decision = scaling.keda_scale(obj["spec"], current, state)
        ref = obj["spec"]["scaleTargetRef"]
        head = (
            f"day-two: KEDA stand-in: ScaledObject {obj['metadata']['name']}: HPA "
            f"{hpa['metadata']['name']} made; the scale loop's first pass read {'; '.join(state.values)}"
        )
        if decision is None:
            self.say(f"{head}: {ref.get('kind')} {ref['name']} left at {current}")
            return
        replicas, why = decision
        try:
            kube.request(
                "PATCH",
                scale_path(kube, hpa),
                {"spec": {"replicas": replicas}},
                "application/merge-patch+json",
            )
        except (ApiError, OSError) as error:  # the next pass would retry; the HPA still lifts it
            self.say(f"{head}: writing {replicas} to {ref['name']}/scale failed: {error}")
            return
        self.say(f"{head}: {ref.get('kind')} {ref['name']} {current} -> {replicas} ({why})")

    def start(self, index: int) -> Callable[[], None]:
        """`deploy(index)` in a thread (the replay samples the rollout meanwhile); the returned
        function waits for it and raises what it raised."""
        errors: list[BaseException] = []

        def work() -> None:
            try:
                self.deploy(index)
            except BaseException as error:  # re-raised in join
                errors.append(error)

        thread = threading.Thread(target=work, name=f"deploy-{index}", daemon=True)
        thread.start()

        def join() -> None:
            thread.join(UP_JOIN_S)
            if thread.is_alive():
                raise TimeoutError(f"revision {index}'s deploy did not return in {UP_JOIN_S:.0f} s")
            if errors:
                raise errors[0]

        return join
