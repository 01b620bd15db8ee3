"""Step 4 of the checks with the real LWS controller (devtools/twin/lws_checks.py): node loss.

A decode worker's node is cordoned, its pod deleted (as a drain or the pod garbage collector
does) and the Node deleted: RecreateGroupOnPodRestart recreates the whole group. With a spare
node the group comes back Ready; without one, one pod stays Pending until the node returns. It
prints the `node loss:` line.
"""

import time
from typing import Any

from devtools.twin import nodes
from devtools.twin.kube import ApiError, Kube
from devtools.twin.lws_checks import (
    GRACE_FINALIZER,
    Fleet,
    Reporter,
    as_a_kubelet_finishes,
    group_key,
    group_name,
    groups,
    is_ready,
    node_loss_line,
    pick_victim,
    poll,
    spare_node_detail,
)

# How long a group without a node must stay Pending before the node is given back.
PENDING_HOLD_S = 5.0


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
        poll(f"the LWS controller deleting leader {group_name(group_key(pod))}", leader_going, 60)
    finally:
        kube.request("PATCH", path, {"metadata": {"finalizers": meta.get("finalizers") or None}}, merge)

    def gone() -> bool:
        try:
            return bool(kube.get(path)["metadata"]["uid"] != meta["uid"])
        except ApiError as error:
            return error.code == 404

    poll(f"pod {meta['name']} deleted", gone, 60)
    kube.request("DELETE", f"/api/v1/nodes/{node}")
    return node


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
        poll(f"spare node {spare.name} Ready", lambda: _node_ready(kube, spare.name), 120)

    done: set[tuple[str, str]] = set()
    for with_spare in (True, False) if spare_case else (False,):
        victim = pick_victim(fleet, role, done)
        key = group_key(victim)
        done.add(key)
        old = {p["metadata"]["uid"] for p in groups(fleet.pods()).get(key, [])}
        started = time.monotonic()
        lost = _lose_node(kube, victim)

        def members(key: tuple[str, str] = key) -> list[dict[str, Any]]:
            return groups(fleet.pods()).get(key, [])

        def recreated(old: set[str] = old) -> bool:
            as_a_kubelet_finishes(kube, fleet.namespace)
            now = members()
            return len(now) == size and not ({p["metadata"]["uid"] for p in now} & old)

        try:
            poll(f"group {group_name(key)} recreated", recreated, 180)
        except TimeoutError as error:
            report.check(False, str(error))
            continue
        if with_spare:
            try:
                poll(
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
            poll(f"group {group_name(key)}: {size - 1} Ready, 1 Pending", one_pending, 180)
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
            poll(
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
