"""The figures of a data-plane run, from the gateway stand-in's results and the simulators' own
metrics (pure functions; `lines` prints one line per figure, starting with its word)."""

import re
import statistics
from collections import Counter, defaultdict
from typing import Any

# The simulator's prefix-cache counters, without vLLM's `_total` suffix (llm-d-inference-sim
# v0.10.2 pkg/llm-d-inference-sim/metrics.go PrefixCacheHitsMetricName/QueriesMetricName).
HITS = "vllm:prefix_cache_hits"
QUERIES = "vllm:prefix_cache_queries"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def metric_sum(text: str, name: str) -> float:
    """Sum of every sample of `name` (all label sets) in a Prometheus text exposition."""
    total = 0.0
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            total += float(m.group(3))
    return total


def hit_rate(before: list[str], after: list[str]) -> float | None:
    """Prefix-cache hit rate over the run: hits / queries, deltas of the counters summed over
    every engine scraped."""
    hits = sum(metric_sum(t, HITS) for t in after) - sum(metric_sum(t, HITS) for t in before)
    queries = sum(metric_sum(t, QUERIES) for t in after) - sum(metric_sum(t, QUERIES) for t in before)
    return hits / queries if queries > 0 else None


def new_session_requests(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first turns of agent sessions and sub-agents whose program's prefix was sent before
    (an earlier session of the same program, or the sub-agent's parent): what only
    prefix-aware routing can send to an endpoint already holding that prefix (session affinity
    has no session to follow yet). The first session of each program is left out: no endpoint can
    hold its prefix. Order is the replay's (start time)."""
    firsts = sorted(
        (r for r in results if r["turn"] == 0 and r["phase"] in ("agent", "subagent")),
        key=lambda r: (r["start_ms"], r["session"]),
    )
    seen: set[str] = set()
    out = []
    for r in firsts:
        if r["phase"] == "subagent" or r["program"] in seen:
            out.append(r)
        seen.add(r["program"])
    return out


def token_hit_rate(results: list[dict[str, Any]]) -> float | None:
    """Cached prompt tokens / prompt tokens over the served requests whose response carried the
    engine's usage (None when none did)."""
    counted = [
        r
        for r in results
        if r["outcome"] == "served" and r.get("prompt_tokens") and r.get("cached_tokens") is not None
    ]
    prompt = sum(r["prompt_tokens"] for r in counted)
    return sum(r["cached_tokens"] for r in counted) / prompt if prompt else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ttft(results: list[dict[str, Any]], phases: tuple[str, ...] = ("agent", "subagent")) -> float | None:
    return _median([r["ttft_ms"] for r in results if r["outcome"] == "served" and r["phase"] in phases])


def stickiness(results: list[dict[str, Any]]) -> float | None:
    """Share of later turns that land on the decode endpoint of the session's first turn."""
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        if r["phase"] == "agent" and r["outcome"] == "served":
            by_session[r["session"]].append(r)
    same = total = 0
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"])
        first = turns[0]["destination"]
        for r in turns[1:]:
            total += 1
            same += r["destination"] == first
    return same / total if total else None


def pd(
    results: list[dict[str, Any]], prefill_endpoints: set[str], decode_endpoints: set[str]
) -> dict[str, Any]:
    served = [r for r in results if r["outcome"] == "served"]
    disagg = [r for r in served if r["prefill"]]
    fresh = [r for r in served if r["phase"] == "batch"]
    return {
        "fresh": {"served": len(fresh), "disaggregated": sum(bool(r["prefill"]) for r in fresh)},
        "served": len(served),
        "disaggregated": len(disagg),
        "share": len(disagg) / len(served) if served else None,
        "prefill_on_prefill_endpoint": sum(r["prefill"] in prefill_endpoints for r in disagg),
        "decode_on_decode_endpoint": sum(r["destination"] in decode_endpoints for r in served),
    }


def outcome(r: dict[str, Any]) -> str:
    """dispatched (the picker named an endpoint), rejected (flow control or admission said no:
    saturated, no endpoints), shed (taken out of a queue: evicted, TTL expired) or failed (no
    picker answered, the picker was shutting down, or the endpoint failed). Reasons are the
    picker's x-llm-d-request-dropped-reason values (llm-d-router v0.10.0
    pkg/common/error/error.go)."""
    if r["outcome"] == "served":
        return "dispatched"
    if r["outcome"] == "rejected":
        reason = r.get("reason") or ""
        if reason.startswith("evicted") or reason == "rejected-ttl-expired":
            return "shed"
        if reason in ("rejected-shutting-down", "rejected-context-cancelled"):
            return "failed"
        return "rejected"
    return "failed"


def flow_control(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Outcomes by band and by program of the overload replay's requests (the overload is a
    phase of its own), and the median time the picker held the dispatched ones of each band
    (flow control's queue plus scheduling)."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    held: dict[str, list[float]] = defaultdict(list)
    for r in results:
        table[f"band {r['band']}"][outcome(r)] += 1
        table[f"program {r['program']}"][outcome(r)] += 1
        if outcome(r) == "dispatched":
            held[r["band"]].append(r["pick_ms"])
    return {
        "counts": {k: dict(v) for k, v in sorted(table.items())},
        "held_median_ms": {band: _median(v) for band, v in sorted(held.items())},
    }


KV_USAGE = "vllm:kv_cache_usage_perc"


def saturation(scrapes: list[str], queue_depth: int, kv_threshold: float) -> float | None:
    """The pool's saturation as the rendered detector computes it from one scrape of every
    engine: the mean over endpoints of max(waiting / queueDepthThreshold, KV use /
    kvCacheUtilThreshold) (llm-d-router v0.10.0
    pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/detector.go)."""
    ratios = [
        max(metric_sum(t, WAITING) / queue_depth, metric_sum(t, KV_USAGE) / kv_threshold)
        for t in scrapes
        if t.strip()
    ]
    return sum(ratios) / len(ratios) if ratios else None


def peak_saturation(samples: list[dict[str, Any]], queue_depth: int, kv_threshold: float) -> float | None:
    values = [v for s in samples if (v := saturation(s["scrapes"], queue_depth, kv_threshold)) is not None]
    return max(values, default=None)


def failover(
    results: list[dict[str, Any]], killed_at_ms: float | None, killed: str | None = None
) -> dict[str, Any]:
    """Requests started after the leader was stopped that were not routed (no picker answered,
    the stopped picker refused them while shutting down, or the endpoint failed), and seconds
    from the stop until a request is routed again by another picker."""
    if killed_at_ms is None:
        return {"failed": None, "resume_s": None}
    after = [r for r in results if r["start_ms"] >= killed_at_ms]
    lost = [r for r in after if outcome(r) == "failed"]
    routed = [
        r["start_ms"] + r["pick_ms"] for r in after if outcome(r) == "dispatched" and r["picker"] != killed
    ]
    causes: dict[str, int] = {}
    for r in lost:
        cause = failure_cause(r)
        causes[cause] = causes.get(cause, 0) + 1
    return {
        "failed": len(lost),
        "resume_s": (min(routed) - killed_at_ms) / 1000 if routed else None,
        "causes": causes,
    }


# Why a request of the failover replay was lost, and the upstream reference that says why the
# pinned versions lose it (docs/day-two.md, "Router failover"). A stopped leader goes NotServing and
# keeps its ext_proc server for the drain window (llm-d-router cmd/epp/runner/runner.go at the pinned tag,
# --drain-timeout, llm-d-router#1885), but its flow controller is built on the context SIGTERM
# cancels (runner.go, fccontroller.NewFlowController(ctx, ...)), so a request that reaches it
# before the gateway stops sending there is refused `rejected-shutting-down` (503,
# pkg/epp/requestcontrol/admission.go). With no picker ready at all (between the old leader
# leaving the endpoints and the standby passing readiness), fail-open under leader election is
# llm-d-router#2051.
def failure_limits() -> dict[str, str]:
    """The upstream reference of each cause, at the pinned versions."""
    from llmd_fleet.versions import versions

    router, simulator = versions().image("endpoint-picker").tag, versions().image("inference-sim").tag
    return {
        "shutting-down": f"llm-d-router {router} pkg/epp/requestcontrol/admission.go: flow control stops at "
        "SIGTERM while the picker drains",
        "no-picker": "llm-d-router#2051: no picker ready during the leader hand-over",
        "endpoint": f"llm-d-inference-sim {simulator}: the endpoint failed the routed request",
    }


def failure_cause(r: dict[str, Any]) -> str:
    """shutting-down (the stopped picker refused it), no-picker (no picker routed it) or endpoint
    (routed, then the endpoint failed)."""
    if r.get("reason") in ("rejected-shutting-down", "rejected-context-cancelled"):
        return "shutting-down"
    if r["outcome"] == "unrouted":
        return "no-picker"
    return "endpoint"


def failover_limit(fo: dict[str, Any]) -> str:
    """` (limit: upstream <reference>)` naming the most frequent cause of the lost requests, or ""
    when none was lost."""
    causes: dict[str, int] = fo.get("causes") or {}
    if not fo.get("failed") or not causes:
        return ""
    cause = max(sorted(causes), key=lambda c: causes[c])
    return f" (limit: upstream {failure_limits()[cause]})"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def _fc_line(fc: dict[str, Any], bands: dict[str, str]) -> str:
    counts = fc["counts"]

    def row(key: str) -> str:
        c = counts.get(key, {})
        return (
            f"{c.get('dispatched', 0)} dispatched/{c.get('rejected', 0)} rejected/"
            f"{c.get('shed', 0)} shed/{c.get('failed', 0)} failed"
        )

    names = list(dict.fromkeys(bands.values()))
    band_rows = [f"{b} {row('band ' + b)}" for b in names if f"band {b}" in counts]
    program_rows = [f"{k.removeprefix('program ')} {row(k)}" for k in counts if k.startswith("program ")]
    held = fc["held_median_ms"]
    return (
        "flow control: under overload "
        + ", ".join(band_rows)
        + "; by program "
        + ", ".join(program_rows)
        + "; held median "
        + ", ".join(f"{b} {_ms(held.get(b))}" for b in names)
        + ("" if fc.get("peak_saturation") is None else f"; peak saturation {fc['peak_saturation']:.2f}")
    )


def lines(report: dict[str, Any]) -> list[str]:
    r, b = report["rendered"], report.get("baseline", {})
    pdf = r["pd"]
    fo = r.get("failover")
    return [
        f"hit rate: rendered {_pct(r['hit_rate'])} baseline {_pct(b.get('hit_rate'))}",
        f"hit rate (new sessions): rendered {_pct(r.get('new_session_hit_rate'))} "
        f"baseline {_pct(b.get('new_session_hit_rate'))}",
        f"ttft: rendered {_ms(r['ttft_ms'])} baseline {_ms(b.get('ttft_ms'))} (median, agent turns)",
        f"stickiness: {_pct(r['stickiness'])}",
        f"p/d: {_pct(pdf['share'])} disaggregated ({pdf['disaggregated']}/{pdf['served']}), "
        f"prefill on a prefill endpoint {pdf['prefill_on_prefill_endpoint']}/{pdf['disaggregated']}",
        _fc_line(r["flow_control"], report["bands"])
        if "flow_control" in r
        else "flow control: not run"
        + (f" ({r['flow_control_not_run']})" if "flow_control_not_run" in r else ""),
        "failover: "
        + (
            "not run"
            if fo is None or fo["failed"] is None
            else f"{fo['failed']} failed, "
            + ("never resumed" if fo["resume_s"] is None else f"{fo['resume_s']:.1f} s")
            + failover_limit(fo)
        ),
        *status_lines(report.get("status")),
    ]


def status_lines(status: dict[str, Any] | None) -> list[str]:
    """What `llmd-fleet status STACK --request` printed inside the run, one `status:` line each."""
    if status is None:
        return ["status: not run"]
    return [f"status: {line}" for line in status["lines"]] or ["status: printed nothing"]


def figures(
    results: list[dict[str, Any]],
    before: list[str],
    after: list[str],
    prefill: set[str],
    decode: set[str],
) -> dict[str, Any]:
    """The steady replay's figures (hit rate over that replay alone)."""
    return {
        "requests": len(results),
        "hit_rate": hit_rate(before, after),
        "new_session_hit_rate": token_hit_rate(new_session_requests(results)),
        "ttft_ms": ttft(results),
        "stickiness": stickiness(results),
        "pd": pd(results, prefill, decode),
    }


WAITING = "vllm:num_requests_waiting"


def time_series(samples: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """From the gateway's periodic scrapes (t_ms, one exposition per engine): the hit rate of
    each interval (hits / queries of the counters' deltas; intervals without queries are
    skipped) and the requests waiting in the engines' queues."""
    hit: list[tuple[float, float]] = []
    waiting: list[tuple[float, float]] = []
    prev: tuple[float, float] | None = None
    for s in samples:
        t = s["t_ms"] / 1000
        hits = sum(metric_sum(x, HITS) for x in s["scrapes"])
        queries = sum(metric_sum(x, QUERIES) for x in s["scrapes"])
        waiting.append((t, sum(metric_sum(x, WAITING) for x in s["scrapes"])))
        if prev is not None and queries > prev[1]:
            hit.append((t, (hits - prev[0]) / (queries - prev[1])))
        prev = (hits, queries)
    return {"hit rate": hit, "waiting": waiting}


def svg(series: dict[str, list[tuple[float, float]]], title: str, width: int = 640, height: int = 240) -> str:
    """A plain line chart (x seconds, y share 0..1) of each series; no plotting dependency."""
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    xmax = max((x for pts in series.values() for x, _ in pts), default=1.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="10" y="14">{title}</text>',
        f'<line x1="40" y1="{height - 20}" x2="{width - 10}" y2="{height - 20}" stroke="#888"/>',
        f'<line x1="40" y1="20" x2="40" y2="{height - 20}" stroke="#888"/>',
    ]
    for i, (name, pts) in enumerate(series.items()):
        colour = colours[i % len(colours)]
        coords = " ".join(
            f"{40 + (width - 50) * x / xmax:.1f},{height - 20 - (height - 40) * y:.1f}" for x, y in pts
        )
        parts.append(f'<polyline fill="none" stroke="{colour}" points="{coords}"/>')
        parts.append(f'<text x="{width - 160}" y="{30 + 14 * i}" fill="{colour}">{name}</text>')
    parts.append(f'<text x="{width - 60}" y="{height - 5}">{xmax:.0f} s</text></svg>')
    return "\n".join(parts) + "\n"


def _yielded(c: dict[str, int]) -> int:
    return c.get("rejected", 0) + c.get("shed", 0)


def checks(report: dict[str, Any]) -> list[str]:
    """What the run must show, from what the rendered config does (empty: pass):
    - the rendered scorers beat the baseline on hit rate, and session affinity on stickiness;
    - they beat it on the new sessions' hit rate too (first turns of sessions and sub-agents
      sharing an earlier request's prefix, `new_session_requests`): session affinity cannot help
      there, only prefix-aware routing finds the endpoint that holds the shared prefix;
    - the prefix-based P/D decider disaggregated the fresh long prompts (the replay makes them
      twice its nonCachedTokens) and sent every prefill to a prefill endpoint; with no prefix
      match information it disaggregates nothing;
    - the overload drove the pool to the admitter's shedding point (the wave is sized for it);
      the interactive band (priority >= 0: never shed by the admitter, its queue far from its
      limits) is dispatched whole, and batch yields: some of it rejected or shed, or held longer
      than interactive;
    - after the leader stops, routing resumes."""
    r, b = report["rendered"], report["baseline"]
    failures = []
    if r["hit_rate"] is None or b["hit_rate"] is None or r["hit_rate"] <= b["hit_rate"]:
        failures.append("the rendered config does not beat the baseline on hit rate")
    new_r, new_b = r.get("new_session_hit_rate"), b.get("new_session_hit_rate")
    if new_r is None or new_b is None or new_r <= new_b:
        failures.append(
            "the rendered config does not beat the baseline on the new sessions' hit rate"
            f" (prefix reuse across sessions: {_pct(new_r)} against {_pct(new_b)})"
        )
    if r["stickiness"] is None or b["stickiness"] is None or r["stickiness"] <= b["stickiness"]:
        failures.append("the rendered config does not beat the baseline on session stickiness")
    status = report.get("status")
    if status is not None and not status.get("answered"):
        failures.append(
            "llmd-fleet status --request: the request through the Gateway was not answered"
            " (HTTP 200 with content)"
        )
    pdf = r["pd"]
    fresh = pdf.get("fresh", {})
    if not pdf["disaggregated"] or fresh.get("disaggregated", 0) < 0.9 * fresh.get("served", 0):
        failures.append(f"the P/D decider did not disaggregate the long fresh prompts ({fresh})")
    if pdf["prefill_on_prefill_endpoint"] != pdf["disaggregated"]:
        failures.append("a prefill went to an endpoint that is not a prefill endpoint")
    if "flow_control" in r:  # not in the broken run's short form (the steady replay only)
        failures += _flow_control_checks(r["flow_control"], report["bands"])
    if "failover" in r and (r["failover"]["failed"] is None or r["failover"]["resume_s"] is None):
        failures.append("routing did not resume after the leader stopped")
    return failures


def _flow_control_checks(fc: dict[str, Any], bands: dict[str, str]) -> list[str]:
    failures = []
    peak, shed_at = fc.get("peak_saturation"), fc.get("shed_at")
    if shed_at is not None and (peak is None or peak < shed_at):
        failures.append(f"the overload did not saturate the pool (peak {peak}, sheds at {shed_at:.2f})")
    counts = fc["counts"]
    inter, batch = (counts.get(f"band {bands[k]}", {}) for k in ("interactive", "batch"))
    if not inter.get("dispatched") or _yielded(inter) or inter.get("failed"):
        failures.append(f"under overload the interactive band was not served whole ({inter})")
    held = fc["held_median_ms"]
    held_i, held_b = held.get(bands["interactive"]), held.get(bands["batch"])
    held_longer = held_i is not None and held_b is not None and held_b > held_i
    if not _yielded(batch) and not held_longer:
        failures.append(f"under overload batch did not yield ({batch}, held {held_b} vs {held_i} ms)")
    return failures
