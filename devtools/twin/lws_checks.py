"""What `make e2e` asserts when the real LWS controller runs in the twin (devtools/twin/lws.py), read
from the API server, and the figure lines it prints:

    controller: pods created by the LWS controller N/N ...
    rollout: decode minimum ready X of Y instances, S s ...
    disruption: decode second eviction refused (HTTP 429) while group <name> was down ...
    node loss: group <name> recreated ...
    scale: prefill A -> B -> A ...

Each line starts with its word at the start of the line, so a script can pick it out; without the
controller each says `<word>: not run: <why>`.

1. controller: the DisaggregatedSet's pods are the controller's (owner chain pod -> StatefulSet ->
   [leader pod -> StatefulSet ->] LeaderWorkerSet -> DisaggregatedSet), every group complete,
   pods bound and Ready, claims allocated, GPU/NIC pairing as with the stand-in;
2. rollout: a decode-only template change (an annotation on decode's pod template) rolls out to
   completion; ready decode instances (groups with every pod Ready) are sampled throughout and
   must not drop below replicas - maxUnavailable; prefill pods replaced are counted (the
   controller's revision hashes every role's template, so it rolls prefill too). The role's
   PodDisruptionBudget is sampled too: the rollout deletes pods (it does not evict them), so it
   completes while the budget allows no disruption;
3. disruption: a decode pod evicted through the Eviction API (as a drain does) takes its whole
   group down; while that group is down, evicting a pod of another decode group is refused with
   HTTP 429 (the role's PodDisruptionBudget), a prefill eviction is still allowed (dry run), and
   once the group is Ready again an eviction in decode is allowed again (dry run);
4. node loss: a decode worker's node is cordoned, its pod deleted (as a drain or the pod
   garbage collector does) and the Node deleted: RecreateGroupOnPodRestart recreates the whole
   group. With a spare node the group comes back Ready; without one, one pod stays Pending until
   the node returns;
5. scale: the autoscale stack (External scaling) replaces the fixed one; each role's
   DisaggregatedSetRoleScaler is driven through its /scale subresource as KEDA's HPA drives it
   (first to the ScaledObject's minReplicaCount, then one up and back), and whole groups come
   and go.
"""

import copy
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from devtools.twin import lws, nodes
from devtools.twin.kube import ApiError, Kube, wait_for

WORDS = ("controller", "rollout", "disruption", "node loss", "scale")
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
DS_ROLE = "disaggregatedset.x-k8s.io/role"
DS_REVISION = "disaggregatedset.x-k8s.io/revision"
DS_NAME = "disaggregatedset.x-k8s.io/name"
LWS_API = "leaderworkerset.x-k8s.io/v1"
DS_API = "disaggregatedset.x-k8s.io/v1"
ROLLOUT_ANNOTATION = "llmd-fleet.io/twin-rollout"
# Holds a deleted pod Terminating as a kubelet's grace period would (kwok has none).
GRACE_FINALIZER = "llmd-fleet.io/twin-grace-period"
AUTOSCALE_STACK = "onprem-h100-autoscale"
POLL_S = 0.5
GROUPS_TIMEOUT_S = 600
ROLLOUT_TIMEOUT_S = 900
# How long a group without a node must stay Pending before the node is given back.
PENDING_HOLD_S = 5.0
# What `make e2e --without-day-two-checks` (CI) prints in place of the checks `make day-two` runs
# under traffic with the real controller: the `rollout:` line and the `node loss:` line with a
# spare node (the replay prints both in this format; docs/day-two.md).
DAY_TWO_CHECKS = (
    "rollout and node loss with a spare node",
    "not run here (--without-day-two-checks): `make day-two` runs both under traffic",
)
# Step 5 under --without-day-two-checks: `make day-two` scales prefill by the twin's HPA controller
# (through the same DisaggregatedSetRoleScaler /scale) and prints a `scale:` line of this shape.
DAY_TWO_SCALE = (
    "External scaling",
    "not run here (--without-day-two-checks): `make day-two` scales prefill through its "
    "DisaggregatedSetRoleScaler /scale by the HPA controller under a burst and prints this `scale:` line",
)


class Reporter(Protocol):
    def figure(self, name: str, value: str) -> None: ...
    def check(self, ok: bool, message: str) -> None: ...
    def line(self, text: str) -> None: ...


# ---------------------------------------------------------------------------------------------
# Figure lines (pure)


def not_run_lines(why: str) -> list[str]:
    return [f"{word}: not run: {why}" for word in WORDS]


def controller_line(created: int, expected: int, detail: str) -> str:
    return f"controller: pods created by the LWS controller {created}/{expected} ({detail})"


def rollout_line(min_ready: int, instances: int, seconds: float, detail: str) -> str:
    return f"rollout: decode minimum ready {min_ready} of {instances} instances, {seconds:.0f} s ({detail})"


def disruption_line(role: str, group: str, detail: str) -> str:
    return f"disruption: {role} second eviction refused (HTTP 429) while group {group} was down ({detail})"


def node_loss_line(group: str, detail: str) -> str:
    return f"node loss: group {group} recreated {detail}"


def scale_line(role: str, start: int, up: int, detail: str) -> str:
    return f"scale: {role} {start} -> {up} -> {start} {detail}"


def rollout_detail(
    minimum: int,
    samples: int,
    completed: bool,
    role: str,
    replaced: dict[str, tuple[int, int]],
    budget: str | None,
    budget_closed: int,
) -> str:
    """The parenthesis of a `rollout:` line: `replaced` is, per other role, (pods replaced, pods);
    `budget` the role's PodDisruptionBudget (None without one) and `budget_closed` the samples in
    which it allowed no eviction."""
    replaced_text = ", ".join(f"{n} of {total} {r} pods replaced" for r, (n, total) in replaced.items())
    why = (
        f" (the controller's revision is one hash over every role's template, so a {role}-only change "
        "rolls every role)"
        if sum(n for n, _ in replaced.values())
        else ""
    )
    held = (
        f"; PodDisruptionBudget {budget} allowed no eviction in {budget_closed} of "
        f"{samples} samples (a rollout deletes, it does not evict)"
        if budget is not None
        else "; no PodDisruptionBudget for the role"
    )
    return (
        f"planned minimum {minimum}; {samples} samples; {'completed' if completed else 'NOT completed'}; "
        f"{replaced_text}{why}{held}"
    )


def spare_node_detail(old: int, size: int, lost: str, seconds: float, on_spare: int, spare: str) -> str:
    """The detail of a `node loss:` line whose group came back on a spare node."""
    return (
        f"with a spare node: {old} pods replaced by {size} new ones after {lost} was lost, "
        f"all Ready in {seconds:.0f} s ({on_spare} on the spare {spare})"
    )


# ---------------------------------------------------------------------------------------------
# Reading pods and groups (pure)


def is_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def group_key(pod: dict[str, Any]) -> tuple[str, str]:
    labels = pod["metadata"].get("labels", {})
    return labels.get(LWS_NAME, ""), labels.get(GROUP_INDEX, "")


def group_name(key: tuple[str, str]) -> str:
    """A group is named as its leader pod: `<lws>-<group index>`."""
    return f"{key[0]}-{key[1]}"


def groups(pods: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Live (not terminating) LWS pods by group."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or LWS_NAME not in pod["metadata"].get("labels", {}):
            continue
        out.setdefault(group_key(pod), []).append(pod)
    return out


def ready_groups(pods: Iterable[dict[str, Any]], lws_roles: dict[str, str], role: str, size: int) -> int:
    """Groups of `role` (LWS name -> role) with all `size` pods Ready: serving instances."""
    return sum(
        1
        for key, members in groups(pods).items()
        if lws_roles.get(key[0]) == role and len(members) == size and all(is_ready(p) for p in members)
    )


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((o for o in obj["metadata"].get("ownerReferences", []) if o.get("controller")), None)


def owned_by_set(pod: dict[str, Any], by_uid: dict[str, dict[str, Any]], ds_name: str) -> bool:
    """Whether the pod's controller chain (pod -> StatefulSet -> [leader pod -> StatefulSet ->]
    LeaderWorkerSet) ends at the DisaggregatedSet `ds_name`."""
    current = pod
    for _ in range(6):
        owner = controller_of(current)
        if owner is None:
            return False
        if owner.get("kind") == "DisaggregatedSet":
            return bool(owner.get("name") == ds_name)
        parent = by_uid.get(owner.get("uid", ""))
        if parent is None:
            return False
        current = parent
    return False


def planned_minimum(role_spec: dict[str, Any]) -> int:
    """replicas - maxUnavailable (an integer, or a percentage rounded down as Kubernetes does)."""
    replicas = int(role_spec.get("replicas", 1))
    config = (role_spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    unavailable = config.get("maxUnavailable", 1)
    if isinstance(unavailable, str) and unavailable.endswith("%"):
        unavailable = replicas * int(unavailable[:-1]) // 100
    return max(0, replicas - int(unavailable))


def decode_only_change(ds: dict[str, Any], role: str, value: str) -> dict[str, Any]:
    """The DisaggregatedSet with one annotation added to `role`'s pod templates (worker, and
    leader when it has one): a template change of that role alone."""
    changed = copy.deepcopy(ds)
    for item in changed["spec"]["roles"]:
        if item["name"] != role:
            continue
        template = item["spec"]["leaderWorkerTemplate"]
        for key in ("workerTemplate", "leaderTemplate"):
            if key in template:
                meta = template[key].setdefault("metadata", {})
                meta.setdefault("annotations", {})[ROLLOUT_ANNOTATION] = value
    return changed


# ---------------------------------------------------------------------------------------------
# Against the API server


@dataclass
class Fleet:
    """The DisaggregatedSet under test and what the checks read repeatedly."""

    kube: Kube
    ds: dict[str, Any]
    sizes: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.sizes = {
            r["name"]: int(r["spec"]["leaderWorkerTemplate"].get("size", 1)) for r in self.ds["spec"]["roles"]
        }

    @property
    def namespace(self) -> str:
        return str(self.ds["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.ds["metadata"]["name"])

    def pods(self) -> list[dict[str, Any]]:
        return self.kube.list("v1", "Pod", self.namespace, selector=LWS_NAME)

    def lws(self) -> list[dict[str, Any]]:
        return [
            item
            for item in self.kube.list(LWS_API, "LeaderWorkerSet", self.namespace)
            if item["metadata"].get("labels", {}).get(DS_NAME) == self.name
        ]

    def lws_roles(self, lws: list[dict[str, Any]] | None = None) -> dict[str, str]:
        return {i["metadata"]["name"]: i["metadata"]["labels"].get(DS_ROLE, "") for i in (lws or self.lws())}

    def budget(self, role: str) -> dict[str, Any] | None:
        """The role's PodDisruptionBudget as the server has it (status included): the one whose
        selector names this set and role (the controller's labels), None without one."""
        for pdb in self.kube.list("policy/v1", "PodDisruptionBudget", self.namespace):
            wanted = (pdb.get("spec") or {}).get("selector", {}).get("matchLabels") or {}
            if wanted.get(DS_NAME) == self.name and wanted.get(DS_ROLE) == role:
                # A list's items carry no apiVersion and kind; reading the object back needs them.
                return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", **pdb}
        return None

    def ready_groups(self, role: str, pods: list[dict[str, Any]] | None = None,
                     roles: dict[str, str] | None = None) -> int:  # fmt: skip
        return ready_groups(
            pods if pods is not None else self.pods(), roles or self.lws_roles(), role, self.sizes[role]
        )


def _poll(what: str, check: Callable[[], Any], timeout: float) -> Any:
    return wait_for(what, check, timeout, POLL_S)


def _wanted(ds: dict[str, Any]) -> dict[str, int]:
    return {r["name"]: int(r["spec"].get("replicas", 1)) for r in ds["spec"]["roles"]}


def _all_groups_ready(fleet: Fleet, wanted: dict[str, int]) -> bool:
    pods, roles = fleet.pods(), fleet.lws_roles()
    live = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp"))
    expected = sum(wanted[r] * fleet.sizes[r] for r in wanted)
    return live == expected and all(fleet.ready_groups(r, pods, roles) == n for r, n in wanted.items())


def controller_pods(fleet: Fleet, report: Reporter) -> None:
    """Step 1: the controller creates every group; placement as the stand-in's check."""
    wanted = _wanted(fleet.ds)
    expected = sum(wanted[r] * fleet.sizes[r] for r in wanted)
    started = time.monotonic()
    try:
        _poll(
            f"{expected} pods in complete, Ready groups",
            lambda: _all_groups_ready(fleet, wanted),
            GROUPS_TIMEOUT_S,
        )
    except TimeoutError as error:
        report.check(False, str(error))
    seconds = time.monotonic() - started
    kube = fleet.kube
    pods = [p for p in fleet.pods() if not p["metadata"].get("deletionTimestamp")]
    lws = fleet.lws()
    sets = kube.list("apps/v1", "StatefulSet", fleet.namespace)
    by_uid = {o["metadata"]["uid"]: o for o in (*pods, *lws, *sets)}
    created = sum(1 for p in pods if owned_by_set(p, by_uid, fleet.name))
    webhook_labelled = sum(1 for p in pods if WORKER_INDEX in p["metadata"].get("labels", {}))
    roles = fleet.lws_roles(lws)
    detail = ", ".join(
        f"{wanted[r] * fleet.sizes[r]} {r} in {fleet.ready_groups(r, pods, roles)} groups of {fleet.sizes[r]}"
        for r in wanted
    )
    report.line(controller_line(created, expected, f"{detail}; {seconds:.0f} s to all Ready"))
    report.figure("LeaderWorkerSets made by the DisaggregatedSet controller", ", ".join(sorted(roles)))
    report.figure("pods labelled by the LWS pod webhook (worker index)", f"{webhook_labelled}/{len(pods)}")
    report.check(created == expected, f"{created} of {expected} pods were created by the LWS controller")
    report.check(webhook_labelled == len(pods), "not every LWS pod went through the LWS pod webhook")
    placement(kube, fleet.namespace, pods, report)


def placement(kube: Kube, namespace: str, pods: list[dict[str, Any]], report: Reporter) -> None:
    """Pods bound and Ready, claims allocated, GPU/NIC pairs on one PCIe root, one pod per node."""
    bound = [p for p in pods if p["spec"].get("nodeName")]
    ready = [p for p in pods if is_ready(p)]
    uids = {p["metadata"]["uid"] for p in pods}
    claims = [
        c
        for c in kube.list("resource.k8s.io/v1", "ResourceClaim", namespace)
        if {o.get("uid") for o in c["metadata"].get("ownerReferences", [])} & uids
    ]
    allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
    violations = nodes.pairing_violations(allocated, kube.list("resource.k8s.io/v1", "ResourceSlice"))
    used = Counter(p["spec"]["nodeName"] for p in bound)
    pairs = sum(
        1
        for claim in allocated
        for result in claim["status"]["allocation"]["devices"]["results"]
        if result["request"].startswith("gpu-")
    )
    report.figure("pods bound / pods", f"{len(bound)}/{len(pods)}")
    report.figure("pods Ready (kwok) / pods", f"{len(ready)}/{len(pods)}")
    report.figure("claims allocated / claims", f"{len(allocated)}/{len(claims)}")
    report.figure("GPU/NIC pairs checked", str(pairs))
    report.figure("GPU/NIC pairing violations", str(len(violations)))
    report.figure("GPU nodes in use", f"{len(used)} (one pod per node: {all(n == 1 for n in used.values())})")
    for problem in violations[:5]:
        print(f"    {problem}")
    report.check(len(bound) == len(pods), f"{len(pods) - len(bound)} pods not bound")
    report.check(len(allocated) == len(pods) == len(claims), "not every pod's claim is allocated")
    report.check(not violations, f"{len(violations)} pairing violations")
    report.check(all(n == 1 for n in used.values()), "two pods share a node")


def rollout(fleet: Fleet, report: Reporter, role: str = "decode") -> None:
    """Step 2: a change to `role`'s template alone rolls out; ready instances of `role` sampled."""
    spec = next(r["spec"] for r in fleet.ds["spec"]["roles"] if r["name"] == role)
    instances, minimum = int(spec.get("replicas", 1)), planned_minimum(spec)
    wanted = _wanted(fleet.ds)
    before = fleet.pods()
    before_roles = fleet.lws_roles()
    before_lws = set(before_roles)
    others_before = {p["metadata"]["uid"]: before_roles.get(group_key(p)[0], "") for p in before}
    changed = decode_only_change(fleet.ds, role, "1")
    started = time.monotonic()
    fleet.kube.apply(changed)
    min_ready = instances
    samples = 0
    budget = fleet.budget(role)
    # Samples in which the role's PodDisruptionBudget allowed no eviction: the rollout deletes
    # pods, which no budget holds back, so it goes on through them.
    budget_closed = 0

    def done() -> bool:
        nonlocal min_ready, samples, budget_closed
        if budget is not None:
            status = fleet.kube.read(budget).get("status") or {}
            budget_closed += int(status.get("disruptionsAllowed", 0) == 0)
        pods, lws = fleet.pods(), fleet.lws()
        roles = fleet.lws_roles(lws)
        min_ready = min(min_ready, fleet.ready_groups(role, pods, roles))
        samples += 1
        names = {i["metadata"]["name"] for i in lws}
        if names & before_lws or not names:
            return False
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        expected = sum(wanted[r] * fleet.sizes[r] for r in wanted)
        return len(live) == len(pods) == expected and all(
            fleet.ready_groups(r, pods, roles) == n for r, n in wanted.items()
        )

    try:
        _poll(f"the {role} template change rolled out", done, ROLLOUT_TIMEOUT_S)
        completed = True
    except TimeoutError as error:
        report.check(False, str(error))
        completed = False
    seconds = time.monotonic() - started
    fleet.ds = changed
    after = {p["metadata"]["uid"] for p in fleet.pods()}
    replaced = Counter(r for uid, r in others_before.items() if uid not in after)
    detail = rollout_detail(
        minimum,
        samples,
        completed,
        role,
        {r: (replaced[r], wanted[r] * fleet.sizes[r]) for r in wanted if r != role},
        budget["metadata"]["name"] if budget is not None else None,
        budget_closed,
    )
    report.line(rollout_line(min_ready, instances, seconds, detail))
    report.check(
        min_ready >= minimum, f"ready {role} instances dropped to {min_ready}, below the planned {minimum}"
    )


def eviction(kube: Kube, pod: dict[str, Any], dry_run: bool = False) -> tuple[int, str]:
    """Evict `pod` through the Eviction API (policy/v1, as `kubectl drain` and the clouds' node
    upgrades do): the HTTP status and, when refused, the server's reason."""
    meta = pod["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction"
    try:
        kube.request("POST", path, body)
    except ApiError as error:
        status = error.status if isinstance(error.status, dict) else {}
        causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
        return error.code, "; ".join(m for m in [status.get("message", str(error)), *causes] if m)
    return 201, ""


def _ready_pod(fleet: Fleet, role: str) -> dict[str, Any]:
    """A Ready pod of `role` (the last by name), leader or worker."""
    roles = fleet.lws_roles()
    ready = [p for p in fleet.pods() if roles.get(group_key(p)[0]) == role and is_ready(p)]
    return sorted(ready, key=lambda p: p["metadata"]["name"])[-1]


def _budget_open(fleet: Fleet, role: str, pods: int) -> bool:
    """The disruption controller has counted every pod of the role healthy and allows one eviction."""
    budget = fleet.budget(role)
    status = (budget or {}).get("status") or {}
    return bool(
        status.get("expectedPods") == pods
        and status.get("currentHealthy") == pods
        and status.get("disruptionsAllowed") == 1
    )


def disruption(fleet: Fleet, report: Reporter, role: str = "decode") -> None:
    """Step 3: the role's PodDisruptionBudget against the Eviction API, as a drain meets it."""
    kube = fleet.kube
    size, instances = fleet.sizes[role], _wanted(fleet.ds)[role]
    pods = instances * fleet.sizes[role]
    others = [r for r in fleet.sizes if r != role]
    if fleet.budget(role) is None:
        report.check(False, f"disruption: no PodDisruptionBudget selects the {role} pods")
        report.line(f"disruption: not run: the stack renders no PodDisruptionBudget for {role}")
        return
    if instances < 2:
        report.line(f"disruption: not run: {role} has {instances} group, no second one to protect")
        return
    wanted = _wanted(fleet.ds)
    try:
        # Every role's budget counts its pods healthy before the first eviction (the other
        # roles' are read by the dry runs below).
        for each in (role, *others):
            count = wanted[each] * fleet.sizes[each]
            _poll(
                f"the {each} PodDisruptionBudget counting {count} healthy pods",
                functools.partial(_budget_open, fleet, each, count),
                120,
            )
    except TimeoutError as error:
        report.check(False, str(error))
        return
    first = _victim(fleet, role, set())
    key = group_key(first)
    meta = first["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
    merge = "application/merge-patch+json"
    leader_path = f"/api/v1/namespaces/{meta['namespace']}/pods/{group_name(key)}"
    leader_uid = kube.get(leader_path)["metadata"]["uid"]
    old = {p["metadata"]["uid"] for p in groups(fleet.pods()).get(key, [])}
    # Held Terminating as a kubelet's grace period would (kwok has none): see _lose_node.
    kube.request(
        "PATCH", path, {"metadata": {"finalizers": [*meta.get("finalizers", []), GRACE_FINALIZER]}}, merge
    )
    started = time.monotonic()
    code, why = eviction(kube, first)
    report.check(code == 201, f"disruption: the first eviction in {role} was refused ({code}: {why})")
    if code != 201:
        kube.request("PATCH", path, {"metadata": {"finalizers": meta.get("finalizers") or None}}, merge)
        return

    def leader_going() -> bool:
        try:
            leader = kube.get(leader_path)
        except ApiError as error:
            return error.code == 404
        return bool(leader["metadata"]["uid"] != leader_uid or leader["metadata"].get("deletionTimestamp"))

    try:
        _poll(f"the LWS controller deleting leader {group_name(key)}", leader_going, 60)
    except TimeoutError as error:
        report.check(False, f"disruption: {error}")
        return
    finally:
        kube.request("PATCH", path, {"metadata": {"finalizers": meta.get("finalizers") or None}}, merge)
    # While that group is down: a pod of another group of the role, and one of each other role.
    second = _victim(fleet, role, {key})
    refused, refusal = eviction(kube, second)
    allowed_others = {r: eviction(kube, _ready_pod(fleet, r), dry_run=True)[0] for r in others}
    closed = (fleet.budget(role) or {}).get("status") or {}

    def back() -> bool:
        _as_a_kubelet_finishes(kube, fleet.namespace)
        now = groups(fleet.pods()).get(key, [])
        return (
            len(now) == size
            and not ({p["metadata"]["uid"] for p in now} & old)
            and all(is_ready(p) for p in now)
        )

    try:
        _poll(f"group {group_name(key)} recreated and Ready", back, 180)
        _poll(f"the {role} PodDisruptionBudget open again", lambda: _budget_open(fleet, role, pods), 120)
    except TimeoutError as error:
        report.check(False, str(error))
    seconds = time.monotonic() - started
    again, _ = eviction(kube, second, dry_run=True)
    report.figure(
        f"Eviction of {second['metadata']['name']} while {group_name(key)} was down",
        f"HTTP {refused}: {refusal}",
    )
    others_text = ", ".join(
        f"{r} eviction allowed meanwhile (dry run, HTTP {c})" for r, c in allowed_others.items()
    )
    report.line(
        disruption_line(
            role,
            group_name(key),
            f"the first eviction, of {meta['name']}, took its {size} pods down; PodDisruptionBudget "
            f"{(fleet.budget(role) or {})['metadata']['name']} healthy {closed.get('currentHealthy')}/"
            f"{closed.get('expectedPods')}, {closed.get('disruptionsAllowed')} disruptions allowed; "
            f"{others_text}; the group Ready again {seconds:.0f} s after the first eviction, then a {role} "
            f"eviction allowed again (dry run, HTTP {again})",
        )
    )
    report.check(
        refused == 429,
        f"disruption: a second {role} eviction while a group was down got HTTP {refused}, not 429",
    )
    report.check(
        all(c == 201 for c in allowed_others.values()),
        f"disruption: evictions in other roles while a {role} group was down: {allowed_others}",
    )
    report.check(again == 201, f"disruption: a {role} eviction after the group came back got HTTP {again}")


def _spare(config: Any, group: str, index: int) -> nodes.FakeNode:
    name = nodes.node_names(group, index + 1)[-1]
    return nodes.FakeNode(name, group, index, config)


def _node_objects(node: nodes.FakeNode) -> list[dict[str, Any]]:
    return [nodes.node_object(node), nodes.gpu_slice(node), nodes.nic_slice(node)]


def _node_ready(kube: Kube, name: str) -> bool:
    try:
        node = kube.get(f"/api/v1/nodes/{name}")
    except ApiError:
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
    )


def _lose_node(kube: Kube, pod: dict[str, Any]) -> str:
    """Cordon the pod's node, delete the pod and then the Node.

    A kubelet keeps a deleted pod Terminating for its grace period, which is when the LWS pod
    controller sees the deletion and deletes the group's leader. kwok has no grace period (its
    pod-delete stage removes the pod at once), so the twin holds the pod with a finalizer of its
    own until the controller has acted (the leader is being deleted), then lets it go."""
    node = str(pod["spec"]["nodeName"])
    meta = pod["metadata"]
    merge = "application/merge-patch+json"
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
    leader_path = f"/api/v1/namespaces/{meta['namespace']}/pods/{group_name(group_key(pod))}"
    leader_uid = kube.get(leader_path)["metadata"]["uid"]
    kube.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}, merge)
    kube.request(
        "PATCH", path, {"metadata": {"finalizers": [*meta.get("finalizers", []), GRACE_FINALIZER]}}, merge
    )
    kube.request("DELETE", path)

    def leader_going() -> bool:
        try:
            leader = kube.get(leader_path)
        except ApiError as error:
            return error.code == 404
        return bool(leader["metadata"]["uid"] != leader_uid or leader["metadata"].get("deletionTimestamp"))

    try:
        _poll(f"the LWS controller deleting leader {group_name(group_key(pod))}", leader_going, 60)
    finally:
        kube.request("PATCH", path, {"metadata": {"finalizers": meta.get("finalizers") or None}}, merge)

    def gone() -> bool:
        try:
            return bool(kube.get(path)["metadata"]["uid"] != meta["uid"])
        except ApiError as error:
            return error.code == 404

    _poll(f"pod {meta['name']} deleted", gone, 60)
    kube.request("DELETE", f"/api/v1/nodes/{node}")
    return node


def _as_a_kubelet_finishes(kube: Kube, namespace: str) -> int:
    """Move scheduled pods being deleted to phase Failed, as a kubelet does once it has stopped a
    deleted pod's containers; how many. kwok's stages never do: they delete at once, which does
    not finish a foreground deletion (the LWS controller deletes a group's leader so), because the
    resourceclaim controller keeps a pod's claims until the pod is terminal, and the pod waits
    for its claims."""
    moved = 0
    for pod in kube.list("v1", "Pod", namespace):
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") and pod["spec"].get("nodeName") and status.get("phase") == "Running":
            path = f"/api/v1/namespaces/{namespace}/pods/{meta['name']}/status"
            try:
                kube.request("PATCH", path, {"status": {"phase": "Failed"}}, "application/merge-patch+json")
                moved += 1
            except ApiError as error:
                if error.code not in (404, 409):
                    raise
    return moved


def _victim(fleet: Fleet, role: str, skip: set[tuple[str, str]]) -> dict[str, Any]:
    roles = fleet.lws_roles()
    candidates = [
        p
        for p in fleet.pods()
        if roles.get(group_key(p)[0]) == role
        and group_key(p) not in skip
        and p["metadata"]["labels"].get(WORKER_INDEX, "0") != "0"
        and is_ready(p)
    ]
    return sorted(candidates, key=lambda p: p["metadata"]["name"])[-1]


def node_loss(
    fleet: Fleet, node_groups: dict[str, Any], report: Reporter, role: str = "decode", spare_case: bool = True
) -> None:
    """Step 3: a node of a `role` group is lost, with a spare node (unless `spare_case` is False:
    `make day-two` loses a node under traffic with spare nodes, so CI runs that case there) and
    then without one."""
    kube = fleet.kube
    size = fleet.sizes[role]
    group, config = next(iter(sorted(node_groups.items())))
    spare = _spare(config, group, config.count)
    if spare_case:
        for obj in _node_objects(spare):
            kube.apply(obj)
        _poll(f"spare node {spare.name} Ready", lambda: _node_ready(kube, spare.name), 120)

    done: set[tuple[str, str]] = set()
    for with_spare in (True, False) if spare_case else (False,):
        victim = _victim(fleet, role, done)
        key = group_key(victim)
        done.add(key)
        old = {p["metadata"]["uid"] for p in groups(fleet.pods()).get(key, [])}
        started = time.monotonic()
        lost = _lose_node(kube, victim)

        def members(key: tuple[str, str] = key) -> list[dict[str, Any]]:
            return groups(fleet.pods()).get(key, [])

        def recreated(old: set[str] = old) -> bool:
            _as_a_kubelet_finishes(kube, fleet.namespace)
            now = members()
            return len(now) == size and not ({p["metadata"]["uid"] for p in now} & old)

        try:
            _poll(f"group {group_name(key)} recreated", recreated, 180)
        except TimeoutError as error:
            report.check(False, str(error))
            continue
        if with_spare:
            try:
                _poll(
                    f"group {group_name(key)} Ready",
                    lambda: all(is_ready(p) for p in members()) and len(members()) == size,
                    180,
                )
            except TimeoutError as error:
                report.check(False, str(error))
            seconds = time.monotonic() - started
            on_spare = sum(1 for p in members() if p["spec"].get("nodeName") == spare.name)
            report.line(
                node_loss_line(
                    group_name(key), spare_node_detail(len(old), size, lost, seconds, on_spare, spare.name)
                )
            )
            report.check(on_spare == 1, f"group {group_name(key)}: {on_spare} pods on the spare node")
            continue

        def one_pending() -> bool:
            now = members()
            pending = [p for p in now if not p["spec"].get("nodeName")]
            return len(now) == size and len(pending) == 1 and sum(1 for p in now if is_ready(p)) == size - 1

        try:
            _poll(f"group {group_name(key)}: {size - 1} Ready, 1 Pending", one_pending, 180)
        except TimeoutError as error:
            report.check(False, str(error))
            continue
        pending_from = time.monotonic()
        time.sleep(PENDING_HOLD_S)
        still = one_pending()
        held = time.monotonic() - pending_from
        report.check(still, f"group {group_name(key)}: the pod without a node did not stay Pending")
        index = int(lost.rsplit("-", 1)[-1])
        for obj in _node_objects(nodes.FakeNode(lost, group, index, config)):
            kube.apply(obj)
        returned = time.monotonic()
        try:
            _poll(
                f"group {group_name(key)} Ready after {lost} returned",
                lambda: all(is_ready(p) for p in members()) and len(members()) == size,
                180,
            )
        except TimeoutError as error:
            report.check(False, str(error))
        report.line(
            node_loss_line(
                group_name(key),
                f"without a spare node: {len(old)} pods replaced by {size} new ones after {lost} was lost; "
                f"1 stayed Pending (no node) for {held:.0f} s until {lost} returned, all Ready "
                f"{time.monotonic() - returned:.0f} s after",
            )
        )


def _scaler_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/apis/{DS_API}/namespaces/{namespace}/disaggregatedsetrolescalers/{name}{sub}"


def _set_scale(kube: Kube, namespace: str, scaler: str, replicas: int) -> None:
    """What an HPA does: write spec.replicas through the /scale subresource."""
    kube.request(
        "PATCH", _scaler_path(namespace, scaler, "/scale"), {"spec": {"replicas": replicas}},
        "application/merge-patch+json",
    )  # fmt: skip


Apply = Callable[[list[dict[str, Any]]], None]


def scale(
    kube: Kube, fleet: Fleet, objects: list[dict[str, Any]], apply_all: Apply, report: Reporter
) -> None:
    """Step 4: the autoscale stack's DisaggregatedSet (External roles) and its /scale subresources.

    `objects` is the autoscale stack's rendering; the fixed stack's DisaggregatedSet is deleted
    first (its pods gone), then `apply_all` applies the rendering."""
    kube.delete(fleet.ds)
    _poll("the fixed DisaggregatedSet's pods gone", lambda: not fleet.pods(), 300)
    apply_all(objects)
    ds = next(o for o in objects if o["kind"] == "DisaggregatedSet")
    scaled = Fleet(kube, ds)
    ns = scaled.namespace
    external = [r["name"] for r in ds["spec"]["roles"] if (r.get("scaling") or {}).get("mode") == "External"]
    minimum = {
        o["spec"]["scaleTargetRef"]["name"]: int(o["spec"].get("minReplicaCount", 1))
        for o in objects
        if o["kind"] == "ScaledObject"
        and o["spec"]["scaleTargetRef"].get("kind") == "DisaggregatedSetRoleScaler"
    }
    report.check(bool(external), f"{AUTOSCALE_STACK}: no role with scaling.mode External")

    def scalers_there() -> bool:
        for role in external:
            try:
                kube.get(_scaler_path(ns, f"{scaled.name}-{role}"))
            except ApiError:
                return False
        return True

    _poll("the controller's DisaggregatedSetRoleScalers", scalers_there, 60)
    seeds = {r: kube.get(_scaler_path(ns, f"{scaled.name}-{r}"))["spec"].get("replicas") for r in external}
    report.figure("DisaggregatedSetRoleScalers created by the controller (seed replicas)",
                  ", ".join(f"{scaled.name}-{r} {seeds[r]}" for r in external))  # fmt: skip
    wanted = {r: minimum.get(f"{scaled.name}-{r}", 1) for r in external}
    for role, replicas in wanted.items():
        _set_scale(kube, ns, f"{scaled.name}-{role}", replicas)
    try:
        _poll(
            f"{wanted} groups Ready at minReplicaCount",
            lambda: _all_groups_ready(scaled, wanted),
            GROUPS_TIMEOUT_S,
        )
    except TimeoutError as error:
        report.check(False, str(error))
        return
    for role in external:
        scaler = f"{scaled.name}-{role}"
        start, size = wanted[role], scaled.sizes[role]
        before = {group_key(p) for p in scaled.pods() if scaled.lws_roles().get(group_key(p)[0]) == role}
        began = time.monotonic()
        _set_scale(kube, ns, scaler, start + 1)
        up_ok = down_ok = True
        try:
            up = {**wanted, role: start + 1}
            _poll(f"{role} at {start + 1} groups", functools.partial(_all_groups_ready, scaled, up), 300)
        except TimeoutError as error:
            report.check(False, str(error))
            up_ok = False
        up_s = time.monotonic() - began
        roles = scaled.lws_roles()
        added = {
            k: len(v) for k, v in groups(scaled.pods()).items() if roles.get(k[0]) == role and k not in before
        }
        began = time.monotonic()
        _set_scale(kube, ns, scaler, start)
        try:
            _poll(f"{role} back at {start} groups", lambda: _all_groups_ready(scaled, wanted), 300)
        except TimeoutError as error:
            report.check(False, str(error))
            down_ok = False
        down_s = time.monotonic() - began
        after = {group_key(p) for p in scaled.pods() if scaled.lws_roles().get(group_key(p)[0]) == role}
        status = kube.get(_scaler_path(ns, scaler)).get("status", {})
        whole = list(added.values()) == [size]
        report.line(
            scale_line(
                role, start, start + 1,
                f"groups through DisaggregatedSetRoleScaler {scaler} /scale: +1 group of "
                f"{', '.join(map(str, added.values())) or 0} pods Ready in {up_s:.0f} s, "
                f"removed in {down_s:.0f} s ({'the same' if after == before else 'other'} groups remain; "
                f"scaler status.replicas {status.get('replicas')})",
            )
        )  # fmt: skip
        report.check(
            up_ok and down_ok and whole, f"scale {role}: groups added {added}, expected one of {size}"
        )


def autoscale_objects(render: Callable[[str, Path], list[dict[str, Any]]], out: Path) -> list[dict[str, Any]]:
    return render(AUTOSCALE_STACK, out)


# ---------------------------------------------------------------------------------------------
# The steps as `make e2e` runs them (devtools/twin/e2e.py calls these)


def start_controller(state: Any, kube: Kube, report: Reporter) -> "lws.Controller | None":
    """Build (or reuse) and start the LWS controller when the twin has a node side; None, with
    every figure line saying `not run: <why>`, when it cannot run (the stand-in then creates the
    DisaggregatedSet's pods). An unusable snapshot or a failed build is also a failure."""
    from devtools.twin import manifests

    if "kwok" not in state.components:
        for text in not_run_lines("API server only (no scheduler, controller manager or kwok)"):
            report.line(text)
        return None
    why = ""
    try:
        built = lws.ensure()
    except lws.SourceMissing as error:
        why = str(error)
    except lws.BuildError as error:
        report.check(False, f"LWS controller: {error}")
        why = f"the LWS controller could not be built: {str(error).splitlines()[0]}"
    if why:
        for text in not_run_lines(why):
            report.line(text)
        report.figure("DisaggregatedSet pods", "made by the twin's stand-in for the LWS controller")
        return None
    if built.seconds is not None:
        report.figure("LWS controller manager", f"built in {built.seconds:.0f} s (cold, {built.directory})")
    else:
        report.figure("LWS controller manager", f"from the cache ({built.directory})")
    if built.note:
        report.figure("LWS source snapshot", built.note)
    same, differ = lws.same_crds(built, manifests.CRD_DIR)
    report.figure(
        "vendored DisaggregatedSet CRDs equal to the controller's source", f"{same}/{same + len(differ)}"
    )
    report.check(not differ, f"schemas/crds differs from the LWS source in {', '.join(differ)}")
    try:
        controller = lws.start(state, kube, built)
    except (TimeoutError, ApiError, lws.BuildError) as error:
        report.check(False, f"LWS controller did not start: {error}")
        for text in not_run_lines(f"the LWS controller did not start ({error})"):
            report.line(text)
        return None
    report.figure(
        "LWS controller",
        f"running (webhooks on {lws.LOOPBACK}:{controller.webhook_port}, serving in "
        f"{controller.started_s:.0f} s; log {controller.log})",
    )
    return controller


def held_back(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the controller would act on at once: applied after the preflight Job, as the program
    orders it (the DisaggregatedSet depends on the preflight Job)."""
    return [o for o in objects if o["kind"] == "DisaggregatedSet"]


def serving(kube: Kube, held: list[dict[str, Any]], rules: dict[str, int], stack: str,
            report: Reporter, day_two_checks: bool = True) -> Fleet | None:  # fmt: skip
    """The held-back DisaggregatedSet through the real webhook, then steps 1 to 3. Without
    `day_two_checks` the rollout and the node loss with a spare node are left to `make day-two`,
    which runs both under traffic (DAY_TWO_CHECKS says so in the figures)."""
    from devtools.twin import cluster, manifests
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    if not held:
        report.figure("DisaggregatedSet", "none in the stack")
        return None
    ds = held[0]
    refusal = lws.webhook_refusal(kube, ds)
    report.figure(
        "DisaggregatedSet webhook refuses a rollout partition (dry run)",
        refusal.split("denied the request: ", 1)[-1] if refusal else "ACCEPTED",
    )
    report.check(bool(refusal), "the LWS DisaggregatedSet webhook accepted a rollout partition")
    kube.apply(ds)
    stored = kube.read(ds)
    added = manifests.server_added(ds, stored)
    kind = f"{ds['apiVersion']}/{ds['kind']}"
    report.figure(
        f"DisaggregatedSet {ds['metadata']['namespace']}/{ds['metadata']['name']} (after the preflight Job)",
        f"admitted by the LWS webhook, {len(added)} fields defaulted, {rules.get(kind, 0)} CEL rules passed",
    )
    fleet = Fleet(kube, ds)
    print("e2e: the LWS controller creates the DisaggregatedSet's groups")
    controller_pods(fleet, report)
    if day_two_checks:
        print("e2e: a decode-only template change rolls out")
        rollout(fleet, report)
    else:
        report.figure(*DAY_TWO_CHECKS)
    print("e2e: the decode PodDisruptionBudget against the Eviction API, as a drain meets it")
    disruption(fleet, report)
    print(
        "e2e: node loss, "
        + ("with a spare node and without one" if day_two_checks else "without a spare node")
    )
    config = stack_config(read_stack_file(cluster.PROJECT_ROOT / "stacks", stack))
    gpu_groups = {n: g for n, g in config.fleet.node_groups.items() if g.accelerator_allocation == "dra"}
    node_loss(fleet, gpu_groups, report, spare_case=day_two_checks)
    return fleet


def scale_stack(kube: Kube, fleet: Fleet, report: Reporter) -> None:
    """Step 4 with the autoscale stack's rendering."""
    from devtools.twin import cluster, manifests

    print(f"e2e: External scaling ({AUTOSCALE_STACK}) through the DisaggregatedSetRoleScalers' /scale")
    objects = manifests.render(AUTOSCALE_STACK, cluster.twin_dir() / "rendered" / AUTOSCALE_STACK)

    def apply_all(items: list[dict[str, Any]]) -> None:
        # The fabric preflight Job ran before the fixed stack's serving (step 4); a Job's pod
        # template cannot be changed, and the scaling check does not need it again.
        items = [o for o in items if o["kind"] != "Job"]
        namespaced = {
            f"{o['apiVersion']}/{o['kind']}": kube.resource(o["apiVersion"], o["kind"]).namespaced
            for o in items
        }
        for obj in manifests.apply_order(items, namespaced):
            try:
                kube.apply(obj)
            except ApiError as error:
                report.check(False, f"{AUTOSCALE_STACK}: refused: {error}")

    scale(kube, fleet, objects, apply_all, report)
