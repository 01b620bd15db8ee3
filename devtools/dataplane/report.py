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
    return {
        "served": len(served),
        "disaggregated": len(disagg),
        "share": len(disagg) / len(served) if served else None,
        "prefill_on_prefill_endpoint": sum(r["prefill"] in prefill_endpoints for r in disagg),
        "decode_on_decode_endpoint": sum(r["destination"] in decode_endpoints for r in served),
    }


def flow_control(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Outcome counts by band and by program (served = dispatched and answered)."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        table[f"band {r['band']}"][r["outcome"]] += 1
        table[f"program {r['program']}"][r["outcome"]] += 1
    return {k: dict(v) for k, v in sorted(table.items())}


def queue_wait(results: list[dict[str, Any]], band: str, phase: str | None = None) -> float | None:
    """Median time the picker held a request (flow control's queue plus scheduling)."""
    return _median(
        [
            r["pick_ms"]
            for r in results
            if r["band"] == band and (phase is None or r["phase"] == phase) and r["outcome"] == "served"
        ]
    )


def failover(results: list[dict[str, Any]], killed_at_ms: float | None) -> dict[str, Any]:
    """Requests not served after the leader was stopped, and seconds until the first request
    started after the stop was routed again."""
    if killed_at_ms is None:
        return {"failed": None, "resume_s": None}
    after = sorted((r for r in results if r["start_ms"] >= killed_at_ms), key=lambda r: r["start_ms"])
    failed = sum(r["outcome"] in ("unrouted", "failed") for r in after)
    routed = [r for r in after if r["outcome"] in ("served", "rejected")]
    resume = (routed[0]["start_ms"] + routed[0]["pick_ms"] - killed_at_ms) / 1000 if routed else None
    return {"failed": failed, "resume_s": resume}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def lines(report: dict[str, Any]) -> list[str]:
    r, b = report["rendered"], report.get("baseline", {})
    pdf = r["pd"]
    fc = r["flow_control"]
    inter, batch = report["bands"]["interactive"], report["bands"]["batch"]

    def band(name: str) -> str:
        c = fc.get(f"band {name}", {})
        failed = c.get("unrouted", 0) + c.get("failed", 0)
        return f"{name} {c.get('served', 0)} served/{c.get('rejected', 0)} rejected/{failed} failed"

    fo = r["failover"]
    return [
        f"hit rate: rendered {_pct(r['hit_rate'])} baseline {_pct(b.get('hit_rate'))}",
        f"ttft: rendered {_ms(r['ttft_ms'])} baseline {_ms(b.get('ttft_ms'))} (median, agent turns)",
        f"stickiness: {_pct(r['stickiness'])}",
        f"p/d: {_pct(pdf['share'])} disaggregated ({pdf['disaggregated']}/{pdf['served']}), "
        f"prefill on a prefill endpoint {pdf['prefill_on_prefill_endpoint']}/{pdf['disaggregated']}",
        f"flow control: {band(inter)}, {band(batch)}; held median "
        f"{_ms(r['wait_interactive_ms'])} interactive vs {_ms(r['wait_batch_ms'])} batch under overload",
        "failover: "
        + (
            "not run"
            if fo["failed"] is None
            else f"{fo['failed']} failed, "
            + ("never resumed" if fo["resume_s"] is None else f"{fo['resume_s']:.1f} s")
        ),
    ]


def figures(
    results: list[dict[str, Any]],
    before: list[str],
    after: list[str],
    prefill: set[str],
    decode: set[str],
    killed_at_ms: float | None,
    bands: dict[str, str],
) -> dict[str, Any]:
    overload_start = min((r["start_ms"] for r in results if r["phase"] == "overload"), default=None)
    under = [r for r in results if overload_start is not None and r["start_ms"] >= overload_start]
    return {
        "requests": len(results),
        "hit_rate": hit_rate(before, after),
        "ttft_ms": ttft(results),
        "stickiness": stickiness(results),
        "pd": pd(results, prefill, decode),
        "flow_control": flow_control(results),
        "wait_interactive_ms": queue_wait(under, bands["interactive"]),
        "wait_batch_ms": queue_wait(under, bands["batch"]),
        "failover": failover(results, killed_at_ms),
    }


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
