"""Step 5 of the checks with the real LWS controller (devtools/twin/lws_checks.py): scale.

The autoscale stack (External scaling) replaces the fixed one; each role's
DisaggregatedSetRoleScaler is driven through its /scale subresource as KEDA's HPA drives it
(first to the ScaledObject's minReplicaCount, then one up and back), and whole groups come and
go. It prints one `scale:` line per role.
"""

import functools
import time
from collections.abc import Callable
from typing import Any

from devtools.twin.kube import ApiError, Kube
from devtools.twin.lws_checks import (
    AUTOSCALE_STACK,
    DS_API,
    GROUPS_TIMEOUT_S,
    Fleet,
    Reporter,
    all_groups_ready,
    group_key,
    groups,
    poll,
    scale_line,
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
    poll("the fixed DisaggregatedSet's pods gone", lambda: not fleet.pods(), 300)
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

    poll("the controller's DisaggregatedSetRoleScalers", scalers_there, 60)
    seeds = {r: kube.get(_scaler_path(ns, f"{scaled.name}-{r}"))["spec"].get("replicas") for r in external}
    report.figure("DisaggregatedSetRoleScalers created by the controller (seed replicas)",
                  ", ".join(f"{scaled.name}-{r} {seeds[r]}" for r in external))  # fmt: skip
    wanted = {r: minimum.get(f"{scaled.name}-{r}", 1) for r in external}
    for role, replicas in wanted.items():
        _set_scale(kube, ns, f"{scaled.name}-{role}", replicas)
    try:
        poll(
            f"{wanted} groups Ready at minReplicaCount",
            lambda: all_groups_ready(scaled, wanted),
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
            poll(f"{role} at {start + 1} groups", functools.partial(all_groups_ready, scaled, up), 300)
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
            poll(f"{role} back at {start} groups", lambda: all_groups_ready(scaled, wanted), 300)
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
