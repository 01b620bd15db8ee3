"""The day-two replay's figures and lines (docs/day-two.md), from the gateway stand-in's
per-request results and the process kubelet's addresses. Pure."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from devtools.dataplane import replay
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
