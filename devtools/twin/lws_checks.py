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

This module holds what the checks share (the labels, the figure lines, reading pods and groups,
the `Fleet` against the API server), steps 1 to 3 and the controller's start; step 4 is
lws_node_loss.py, step 5 lws_scale.py, and lws_steps.py runs them in `make e2e`'s order.
"""

import copy
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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


def poll(what: str, check: Callable[[], Any], timeout: float) -> Any:
    return wait_for(what, check, timeout, POLL_S)


def _wanted(ds: dict[str, Any]) -> dict[str, int]:
    return {r["name"]: int(r["spec"].get("replicas", 1)) for r in ds["spec"]["roles"]}


def all_groups_ready(fleet: Fleet, wanted: dict[str, int]) -> bool:
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
        poll(
            f"{expected} pods in complete, Ready groups",
            lambda: all_groups_ready(fleet, wanted),
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
        poll(f"the {role} template change rolled out", done, ROLLOUT_TIMEOUT_S)
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


def as_a_kubelet_finishes(kube: Kube, namespace: str) -> int:
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


def pick_victim(fleet: Fleet, role: str, skip: set[tuple[str, str]]) -> dict[str, Any]:
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
            poll(
                f"the {each} PodDisruptionBudget counting {count} healthy pods",
                functools.partial(_budget_open, fleet, each, count),
                120,
            )
    except TimeoutError as error:
        report.check(False, str(error))
        return
    first = pick_victim(fleet, role, set())
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
        poll(f"the LWS controller deleting leader {group_name(key)}", leader_going, 60)
    except TimeoutError as error:
        report.check(False, f"disruption: {error}")
        return
    finally:
        kube.request("PATCH", path, {"metadata": {"finalizers": meta.get("finalizers") or None}}, merge)
    # While that group is down: a pod of another group of the role, and one of each other role.
    second = pick_victim(fleet, role, {key})
    refused, refusal = eviction(kube, second)
    allowed_others = {r: eviction(kube, _ready_pod(fleet, r), dry_run=True)[0] for r in others}
    closed = (fleet.budget(role) or {}).get("status") or {}

    def back() -> bool:
        as_a_kubelet_finishes(kube, fleet.namespace)
        now = groups(fleet.pods()).get(key, [])
        return (
            len(now) == size
            and not ({p["metadata"]["uid"] for p in now} & old)
            and all(is_ready(p) for p in now)
        )

    try:
        poll(f"group {group_name(key)} recreated and Ready", back, 180)
        poll(f"the {role} PodDisruptionBudget open again", lambda: _budget_open(fleet, role, pods), 120)
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


# ---------------------------------------------------------------------------------------------
# Starting the controller (`make e2e` through lws_steps.py, `make day-two`)


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
