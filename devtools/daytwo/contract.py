"""`make e2e`'s controller lines from the day-two replay (docs/day-two.md, "e2e's lines from the
replay"): the replay runs the same real LWS controller, under traffic and with the process
kubelet's simulated loads, so CI runs e2e without its rollout, its node loss with a spare node
and its External scaling (`--without-day-two-checks`) and the replay prints those lines in e2e's
format, from its own upgrade, node loss and scaling (devtools/twin/lws_checks.py builds the text for each):

    controller: pods created by the LWS controller N/N (...; S s to all Ready)
    rollout: decode minimum ready X of Y instances, S s (planned minimum ...)
    node loss: group <name> recreated with a spare node: ...
    scale: prefill A -> B -> A groups through DisaggregatedSetRoleScaler <name> /scale ...

`RolloutWatch` samples what e2e's rollout samples (ready decode groups, the decode
PodDisruptionBudget) while the replay's upgrade runs; the rest is pure.
"""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devtools.twin import lws_checks
from devtools.twin.kube import ApiError, Kube


def controller_line(
    pods: list[dict[str, Any]],
    owners: Iterable[dict[str, Any]],
    set_name: str,
    expected: dict[str, int],
    sizes: dict[str, int],
    ready_groups: dict[str, int],
    seconds: float,
) -> tuple[str, int]:
    """e2e's `controller:` line for the replay's set, and how many pods the controller made.
    `owners` are the objects of the pods' owner chains (LeaderWorkerSets, StatefulSets and the
    pods themselves); `expected` is pods per role. Pure."""
    by_uid = {o["metadata"]["uid"]: o for o in (*pods, *owners)}
    created = sum(1 for p in pods if lws_checks.owned_by_set(p, by_uid, set_name))
    detail = ", ".join(
        f"{n} {r} in {ready_groups.get(r, 0)} groups of {sizes[r]}" for r, n in expected.items()
    )
    total = sum(expected.values())
    return lws_checks.controller_line(created, total, f"{detail}; {seconds:.0f} s to all Ready"), created


def replaced_pods(
    before: dict[str, str], after_uids: set[str], role: str, expected: dict[str, int]
) -> dict[str, tuple[int, int]]:
    """Per role other than `role`: (pods of `before` gone after the rollout, the role's pods).
    `before` maps each pod's uid to its role. Pure."""
    gone = Counter(r for uid, r in before.items() if uid not in after_uids)
    return {r: (gone[r], n) for r, n in expected.items() if r != role}


def rollout_line(
    min_ready: int,
    instances: int,
    minimum: int,
    seconds: float,
    samples: int,
    completed: bool,
    replaced: dict[str, tuple[int, int]],
    budget: str | None,
    budget_closed: int,
) -> str:
    """e2e's `rollout:` line (decode). Pure."""
    detail = lws_checks.rollout_detail(minimum, samples, completed, "decode", replaced, budget, budget_closed)
    return lws_checks.rollout_line(min_ready, instances, seconds, detail)


def node_loss_lines(
    lost: str,
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    spare: set[str],
    seconds: float,
) -> list[str]:
    """e2e's `node loss:` line with a spare node, one per group that had a pod on `lost`:
    `before` and `after` are the set's pods around the loss, `spare` the nodes that ran no pod of
    the set before it (the stack's spare nodes), `seconds` until every such group was back and
    Ready. Pure."""
    lines = []
    old_groups = lws_checks.groups(p for p in before if not p["metadata"].get("deletionTimestamp"))
    new_groups = lws_checks.groups(p for p in after if not p["metadata"].get("deletionTimestamp"))
    for key, members in sorted(old_groups.items()):
        if not any(p["spec"].get("nodeName") == lost for p in members):
            continue
        now = new_groups.get(key, [])
        on_spare = sorted({str(p["spec"].get("nodeName")) for p in now if p["spec"].get("nodeName") in spare})
        count = sum(1 for p in now if p["spec"].get("nodeName") in spare)
        lines.append(
            lws_checks.node_loss_line(
                lws_checks.group_name(key),
                lws_checks.spare_node_detail(
                    len(members), len(now), lost, seconds, count, ", ".join(on_spare) or "none"
                ),
            )
        )
    return lines


def scale_contract_line(
    role: str,
    before: list[dict[str, Any]],
    peak: list[dict[str, Any]],
    after: list[dict[str, Any]],
    scaler: str,
    up_s: float,
    down_s: float | None,
    status_replicas: Any,
) -> str:
    """e2e's `scale:` line from the replay's scaling: `before`, `peak` and `after` are the role's
    pods before the burst, when the HPA's new instance was Ready, and once the role was back;
    the groups the HPA added are those at `peak` that were not there before. Pure."""
    live = [lws_checks.groups(p for p in pods if not p["metadata"].get("deletionTimestamp"))
            for pods in (before, peak, after)]  # fmt: skip
    added = {k: len(v) for k, v in live[1].items() if k not in live[0]}
    start = len(live[0])
    removed = f"removed in {down_s:.0f} s" if down_s is not None else "not removed"
    return lws_checks.scale_line(
        role,
        start,
        start + len(added),
        f"groups through DisaggregatedSetRoleScaler {scaler} /scale written by the HPA controller: "
        f"+{len(added)} group of {', '.join(map(str, added.values())) or 0} pods Ready in {up_s:.0f} s, "
        f"{removed} ({'the same' if set(live[2]) == set(live[0]) else 'other'} groups remain; "
        f"scaler status.replicas {status_replicas})",
    )


@dataclass
class RolloutWatch:
    """What e2e's rollout samples, sampled during one of the replay's upgrades."""

    kube: Kube
    fleet: lws_checks.Fleet
    before: dict[str, str]
    """uid -> role of the set's pods when the upgrade started."""
    samples: int = 0
    budget_closed: int = 0
    budget: str | None = None
    _budget_obj: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def begin(cls, kube: Kube, serving_set: dict[str, Any], pods: list[dict[str, Any]]) -> "RolloutWatch":
        fleet = lws_checks.Fleet(kube, serving_set)
        before = {p["metadata"]["uid"]: p["metadata"]["labels"].get(lws_checks.DS_ROLE, "") for p in pods}
        watch = cls(kube, fleet, before)
        watch._budget_obj = fleet.budget("decode")
        watch.budget = watch._budget_obj["metadata"]["name"] if watch._budget_obj else None
        return watch

    def sample(self) -> None:
        """One sample: the decode budget's disruptionsAllowed (a rollout deletes, it does not
        evict, so it goes on while the budget allows none)."""
        self.samples += 1
        if self._budget_obj is None:
            return
        try:
            status = self.kube.read(self._budget_obj).get("status") or {}
        except ApiError:
            return
        self.budget_closed += int(status.get("disruptionsAllowed", 0) == 0)
