"""The day-two replay's figures and lines (docs/day-two.md), from the gateway stand-in's
per-request results and the process kubelet's addresses. Pure."""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from devtools.dataplane import replay
from devtools.dataplane import report as replay_report
from devtools.daytwo.kubelet import Endpoint

# What an upgrade must show to count as two revisions serving together (issue 52).
MIN_OVERLAP_S = 30.0
MIN_OVERLAP_REQUESTS = 200


@dataclass(frozen=True)
class Upgrade:
    stack: str
    before: str
    after: str
    requests: int
    failed: int
    cross_pairs: int
    disaggregated: int
    min_ready_decode: int
    decode_instances: int
    planned_min_decode: int
    """The rendered decode rollout's promise: replicas - maxUnavailable (lws_checks.planned_minimum)."""
    seconds: float
    overlap_s: float
    overlap_requests: int
    unknown: int
    """Served requests whose endpoint the kubelet never gave out (must be 0)."""


def _address(host_port: str) -> str:
    return host_port.rsplit(":", 1)[0]


def revision_of(host_port: str, endpoints: Mapping[str, Endpoint]) -> str | None:
    found = endpoints.get(_address(host_port))
    return found.revision if found else None


def upgrade(
    stack: str,
    before: str,
    after: str,
    results: list[dict[str, Any]],
    endpoints: Mapping[str, Endpoint],
    ready_decode: Iterable[int],
    decode_instances: int,
    planned_min_decode: int,
    seconds: float,
) -> Upgrade:
    """One upgrade's figures: failed = every request not served (the steady traffic is far below
    saturation, so nothing is shed by design); a cross-revision pair = a disaggregated request
    whose prefill and decode endpoints are pods of two revisions; the overlap = from the first
    request a pod of `after` served to the last one a pod of `before` served (by start time),
    and the requests started in it."""
    served = [r for r in results if r["outcome"] == "served"]
    failed = sum(1 for r in results if r["outcome"] != "served")
    unknown = sum(1 for r in served if revision_of(r["destination"], endpoints) is None)
    disagg = [r for r in served if r.get("prefill")]
    cross = sum(
        1 for r in disagg if revision_of(r["prefill"], endpoints) != revision_of(r["destination"], endpoints)
    )
    starts_after = [r["start_ms"] for r in served if revision_of(r["destination"], endpoints) == after]
    starts_before = [r["start_ms"] for r in served if revision_of(r["destination"], endpoints) == before]
    overlap_s, overlap_n = 0.0, 0
    if starts_after and starts_before:
        lo, hi = min(starts_after), max(starts_before)
        if hi > lo:
            overlap_s = (hi - lo) / 1000
            overlap_n = sum(1 for r in results if lo <= r["start_ms"] <= hi)
    samples = list(ready_decode)
    return Upgrade(
        stack,
        before,
        after,
        len(results),
        failed,
        cross,
        len(disagg),
        min(samples) if samples else 0,
        decode_instances,
        planned_min_decode,
        seconds,
        overlap_s,
        overlap_n,
        unknown,
    )


def upgrade_line(u: Upgrade) -> str:
    return (
        f"upgrade: {u.stack} revision {u.before} -> {u.after}: {u.failed} failed of {u.requests} requests, "
        f"{u.cross_pairs} cross-revision pairs, ready decode >= {u.min_ready_decode}/{u.decode_instances} "
        f"throughout ({u.seconds:.1f} s)"
    )


def screener_off_line(u: Upgrade) -> str:
    return f"upgrade (screener off): {u.stack}: {u.cross_pairs} cross-revision pairs"


def detail_line(tag: str, u: Upgrade) -> str:
    """What the contract line leaves out: the overlap and the disaggregated requests."""
    return (
        f"day-two: {tag}: revisions {u.before} and {u.after} served together for {u.overlap_s:.1f} s "
        f"and {u.overlap_requests} requests; {u.disaggregated} disaggregated requests"
    )


def upgrade_failures(u: Upgrade) -> list[str]:
    out = []
    if u.failed:
        out.append(f"upgrade: {u.failed} of {u.requests} requests failed")
    if u.cross_pairs:
        out.append(f"upgrade: {u.cross_pairs} requests paired a prefill and a decode of two revisions")
    if u.unknown:
        out.append(f"upgrade: {u.unknown} requests served by an address no pod had")
    if u.min_ready_decode < u.planned_min_decode:
        out.append(
            f"upgrade: ready decode fell to {u.min_ready_decode}/{u.decode_instances}, below the rendered "
            f"rollout's minimum {u.planned_min_decode} (replicas - maxUnavailable)"
        )
    if u.overlap_s < MIN_OVERLAP_S or u.overlap_requests < MIN_OVERLAP_REQUESTS:
        out.append(
            f"upgrade: two revisions served together for {u.overlap_s:.1f} s and {u.overlap_requests} "
            f"requests, less than {MIN_OVERLAP_S:.0f} s and {MIN_OVERLAP_REQUESTS}"
        )
    return out


def screener_off_failures(u: Upgrade) -> list[str]:
    if u.cross_pairs > 0:
        return []
    return [
        f"upgrade (screener off): no cross-revision pair in {u.disaggregated} disaggregated requests: "
        "the check could not have failed"
    ]


# The steady agent traffic: replay.generate's sessions in segments of SEGMENT_MS, each with its
# own programs' prompts (a new seed), for as long as the upgrade may take; the gateway stand-in
# is stopped once it is done. About 7 requests a second (8 sessions x 5 turns, a burst of 2 and 2
# batch requests every 6 s), far below local-sim's 316-request saturation wave.
STEADY = replay.Shape(
    sessions=8,
    turns=5,
    turn_gap_ms=1200,
    bursts=1,
    burst_size=2,
    batch=2,
    prompt_words=1500,
    turn_words=120,
    max_tokens=16,
)
SEGMENT_MS = 6000


def steady(
    model: str, bands: dict[str, str], seconds: float, shape: replay.Shape = STEADY
) -> list[dict[str, Any]]:
    """Segments of `shape` one after another for `seconds` (ids and sessions made unique per
    segment)."""
    out: list[dict[str, Any]] = []
    segments = max(1, int(seconds * 1000 // SEGMENT_MS))
    for k in range(segments):
        for e in replay.generate(shape, model, bands, seed=100 + k):
            session = f"s{k}-{e['session']}"
            headers = {h: (session if v == e["session"] else v) for h, v in e["headers"].items()}
            out.append(
                {
                    **e,
                    "id": f"s{k}-{e['id']}",
                    "session": session,
                    "headers": headers,
                    "at_ms": e["at_ms"] + k * SEGMENT_MS,
                }
            )
    return sorted(out, key=lambda e: (e["at_ms"], e["id"]))


# Faults under the same steady traffic (docs/day-two.md, "Faults under traffic"): each scenario's
# figures come from the requests of one gateway stand-in's results, in the scenario's window.


def failover_line(fo: dict[str, Any]) -> str:
    """`failover: <F> failed, <S> s[ (limit: upstream <reference>)]`: the data-plane twin's
    measurement (devtools/dataplane/report.py `failover`) over the replay's requests."""
    if fo.get("failed") is None:
        return "failover: not run"
    resumed = "never resumed" if fo.get("resume_s") is None else f"{fo['resume_s']:.1f} s"
    return f"failover: {fo['failed']} failed, {resumed}{replay_report.failover_limit(fo)}"


def failover_failures(fo: dict[str, Any]) -> list[str]:
    """A failover fails the run when no picker routed again, or when it lost requests for a
    cause the pinned versions do not explain (the endpoint's own failure)."""
    if fo.get("failed") is None:
        return ["failover: the leader picker was never stopped"]
    out = []
    if fo.get("resume_s") is None:
        out.append("failover: no request was routed by the standby picker after the leader stopped")
    unexplained = (fo.get("causes") or {}).get("endpoint", 0)
    if unexplained:
        out.append(f"failover: {unexplained} requests failed at their endpoint, not at the picker hand-over")
    return out


@dataclass(frozen=True)
class Loss:
    """A lost group under traffic: a node (node loss) or a device (GPU loss)."""

    what: str
    """The node or device lost."""
    group_s: float
    """From the loss until the group was recreated, Ready (node loss) or on another node (GPU loss)."""
    failed: int
    requests: int
    in_flight: int
    """Requests that were on the lost group's addresses when it went (routed before, not done)."""
    routed_after: int
    """Requests the picker sent to the lost addresses after the loss (before it dropped them)."""
    failed_elsewhere: int
    """Failed requests of the window that were not on the lost group (the goal: none)."""
    stopped_routing_s: float
    """From the loss to the last request the picker sent to a lost address (0: none after)."""


def loss(
    what: str,
    at_ms: float,
    until_ms: float,
    results: list[dict[str, Any]],
    lost: AbstractSet[str],
    group_s: float,
) -> Loss:
    """Requests started in [at_ms, until_ms] and those in flight on the `lost` addresses at
    `at_ms` (the replay's clock). Pure."""

    def routed_ms(r: dict[str, Any]) -> float:
        return float(r["start_ms"]) + float(r.get("pick_ms") or 0)

    def on_lost(r: dict[str, Any]) -> bool:
        return bool(r.get("destination")) and (
            _address(r["destination"]) in lost or _address(r.get("prefill") or "") in lost
        )

    in_flight = [
        r
        for r in results
        if on_lost(r) and routed_ms(r) <= at_ms < float(r["start_ms"]) + float(r.get("total_ms") or 0)
    ]
    window = [r for r in results if at_ms <= r["start_ms"] <= until_ms]
    after = [r for r in results if on_lost(r) and routed_ms(r) > at_ms]
    counted = {r["id"]: r for r in window + in_flight}
    failed = [r for r in counted.values() if r["outcome"] != "served"]
    return Loss(
        what,
        group_s,
        len(failed),
        len(counted),
        len(in_flight),
        len(after),
        sum(1 for r in failed if not on_lost(r)),
        max((routed_ms(r) - at_ms) / 1000 for r in after) if after else 0.0,
    )


def node_loss_line(x: Loss) -> str:
    return (
        f"node loss: {x.what} under traffic: group recreated in {x.group_s:.1f} s, {x.failed} failed of "
        f"{x.requests} requests, picker stopped routing to it in {x.stopped_routing_s:.1f} s"
    )


def gpu_loss_line(x: Loss) -> str:
    return (
        f"gpu loss: {x.what} tainted: group moved in {x.group_s:.1f} s, {x.failed} failed of "
        f"{x.requests} requests"
    )


def loss_detail(kind: str, x: Loss) -> str:
    """What the contract line leaves out: what the lost group held."""
    return (
        f"day-two: {kind}: {x.in_flight} requests in flight on the lost group when it went, "
        f"{x.routed_after} routed to it before the picker dropped it, {x.failed_elsewhere} failed elsewhere"
    )


def loss_failures(kind: str, x: Loss) -> list[str]:
    """The goal: a lost group fails at most what was in flight on it, read as the requests it
    held when it went and those the picker handed it before it could know (until the pods'
    deletion reached its watch, `stopped_routing_s`): every failed request of the window must
    have been on the lost group; one anywhere else fails the run."""
    if not x.failed_elsewhere:
        return []
    return [f"{kind}: {x.failed_elsewhere} requests failed that were not on the lost group"]


# The canary under the same steady traffic (docs/day-two.md, "Canary under traffic"): the route's
# weights split each request on its own (Gateway API, gateway/routes.go chooseBackend), so the
# requests the canary serves while it has `p` percent are a binomial draw of the window's
# requests. The run fails when the measured share is more than CANARY_SIGMAS of its standard
# deviations, sqrt(p (1 - p) / N), away from p: a 1-in-15,787 chance for a correct split (two-sided
# normal tail at 4 sigma), so a failure is a wrong split, not bad luck.
CANARY_SIGMAS = 4.0


@dataclass(frozen=True)
class Canary:
    stack: str
    weight: int
    """The canary's `weight`: percent of the route's requests (p)."""
    revision: str
    """The canary DisaggregatedSet's revision (b)."""
    stable_revision: str
    requests: int
    """Requests served while the canary had its weight (N of the binomial)."""
    by_canary: int
    """Of those, served by a pod of the canary's revision."""
    failed: int
    """Requests that failed while the canary had its weight (the goal: none)."""
    crossed: int
    """Served requests whose pool and serving revision disagree (a pool's picker sent the request
    to the other pool's pods; the goal: none)."""
    unknown: int
    """Served requests whose endpoint the kubelet never gave out (the goal: none)."""
    rollback_failed: int
    rollback_requests: int
    """Requests in flight at any time from the rollback's start until the canary's pods were gone."""
    stable_replaced: int = 0
    """Stable pods gone from the start of the canary to the end of its rollback (the goal: none;
    a canary coming or going changes no stable pod template)."""


def canary(
    stack: str,
    weight: int,
    revision: str,
    stable_revision: str,
    canary_pool: str,
    shifted: list[dict[str, Any]],
    rollback: list[dict[str, Any]],
    endpoints: Mapping[str, Endpoint],
    stable_before: AbstractSet[str] = frozenset(),
    stable_after: AbstractSet[str] = frozenset(),
) -> Canary:
    """The canary's figures: `shifted` are the requests started while it had its weight,
    `rollback` those in flight during the rollback, `stable_before`/`stable_after` the stable
    pods' uids before the canary and after its rollback. Pure."""
    served = [r for r in shifted if r["outcome"] == "served"]
    revisions = [revision_of(r["destination"], endpoints) for r in served]
    crossed = sum(
        1
        for r, rev in zip(served, revisions, strict=True)
        if rev is not None and (rev == revision) != (r.get("pool") == canary_pool)
    )
    return Canary(
        stack,
        weight,
        revision,
        stable_revision,
        len(served),
        sum(1 for rev in revisions if rev == revision),
        len(shifted) - len(served),
        crossed,
        sum(1 for rev in revisions if rev is None),
        sum(1 for r in rollback if r["outcome"] != "served"),
        len(rollback),
        len(stable_before - stable_after),
    )


def in_flight(results: list[dict[str, Any]], at_ms: float, until_ms: float) -> list[dict[str, Any]]:
    """Requests running at any time in [at_ms, until_ms] on the replay's clock: started in it, or
    started before and not done by `at_ms`. Pure."""
    return [
        r
        for r in results
        if r["start_ms"] <= until_ms
        and (
            r["start_ms"] >= at_ms
            or float(r["start_ms"]) + float(r.get("pick_ms") or 0) + float(r.get("total_ms") or 0) >= at_ms
        )
    ]


def canary_share(c: Canary) -> float | None:
    """The share of the window's served requests the canary served (q, 0 to 1)."""
    return c.by_canary / c.requests if c.requests else None


def canary_tolerance(weight: int, requests: int) -> float:
    """CANARY_SIGMAS standard deviations of the share a `weight`-percent split gives `requests`
    requests (0 to 1): sqrt(p (1 - p) / N). 0 at weight 0 and 100, where the split is exact."""
    p = weight / 100
    return CANARY_SIGMAS * (p * (1 - p) / requests) ** 0.5 if requests else 0.0


def canary_line(c: Canary) -> str:
    share = canary_share(c)
    q = "n/a" if share is None else f"{100 * share:.1f}"
    return (
        f"canary: {c.stack} {c.weight}% to revision {c.revision}: {q}% of requests served by "
        f"{c.revision}; rollback: {c.rollback_failed} failed of {c.rollback_requests}"
    )


def canary_detail(c: Canary, up_s: float, gone_s: float) -> str:
    """What the contract line leaves out: the window's size, the tolerance, and how long the
    canary took to come up and to go."""
    return (
        f"day-two: canary: {c.by_canary} of {c.requests} requests served by {c.revision} (stable "
        f"{c.stable_revision}), tolerance +-{100 * canary_tolerance(c.weight, c.requests):.1f} points "
        f"({CANARY_SIGMAS:.0f} standard deviations); {c.failed} failed while shifted; canary Ready in "
        f"{up_s:.1f} s, gone {gone_s:.1f} s after the rollback began; {c.stable_replaced} stable pods "
        "replaced"
    )


def canary_failures(c: Canary) -> list[str]:
    out = []
    share = canary_share(c)
    tolerance = canary_tolerance(c.weight, c.requests)
    if share is None:
        out.append("canary: no request was served while the canary had its weight")
    elif abs(share - c.weight / 100) > tolerance:
        out.append(
            f"canary: {100 * share:.1f}% of {c.requests} requests served by {c.revision}, more than "
            f"{100 * tolerance:.1f} points ({CANARY_SIGMAS:.0f} standard deviations) from the "
            f"route's {c.weight}%"
        )
    if c.revision == c.stable_revision:
        out.append(f"canary: the canary's revision {c.revision} is the stable one's")
    if c.failed:
        out.append(f"canary: {c.failed} requests failed while the canary had its weight")
    if c.crossed:
        out.append(f"canary: {c.crossed} requests were served by the other pool's revision")
    if c.unknown:
        out.append(f"canary: {c.unknown} requests served by an address no pod had")
    if c.stable_replaced:
        out.append(f"canary: {c.stable_replaced} stable pods were replaced while the canary came and went")
    if c.rollback_failed:
        out.append(
            f"canary: {c.rollback_failed} of {c.rollback_requests} requests failed during the rollback"
        )
    return out
