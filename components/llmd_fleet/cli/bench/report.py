"""The summary of a benchmark run, from inference-perf's report files.

    llmd-fleet bench-summary DIR|LOG|-

reads either a directory holding inference-perf's report files or the bench Job's log
(`kubectl logs job/<name>-bench`, or `-` for standard input), which carries the summary and
per-stage report files between REPORT_MARKER lines (llmd_fleet/cli/bench/workload.py). Per
stage and for the whole run it prints requests/min, input and output tokens/min (client side),
median input and output tokens (the shape the run realised), p90 TTFT (client side and the
engines' histogram), p90 queue time and the preemption count (the engines' counters, through
Prometheus).

The report format is inference-perf's (reportgen/base.py at the pinned release):
`summary_lifecycle_metrics.json` and `stage_<n>_lifecycle_metrics.json` are `ResponsesSummary`
documents of `summarize_requests` (`successes.throughput.requests_per_sec`,
`input_tokens_per_sec`, `output_tokens_per_sec`; `successes.latency.time_to_first_token.p90`;
`successes.prompt_tokens.median`, `successes.output_tokens.median`; `failures.count`;
`load_summary.concurrency`), `summary_prometheus_metrics.json` and
`stage_<n>_prometheus_metrics.json` those of `summarize_prometheus_metrics`
(`successes.request_queue_time.p90`, `successes.time_to_first_token.p90`, and
`successes.num_preemptions_total.mean`, the increase of vLLM's `vllm:num_preemptions_total` over
the window: inference-perf's vLLM client queries the family `vllm:num_preemptions` under both the
bare and the `_total` name, and the metric catalogue lists it as exposed with `_total`).
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmd_fleet.cli.bench.workload import REPORT_END, REPORT_MARKER

PREEMPTION_METRIC = "vllm:num_preemptions_total"
"""The counter the preemption count is the increase of (its family in the metric catalogue is
`vllm:num_preemptions`)."""
_REPORT_NAME = re.compile(r"^(summary|stage_[0-9]{1,4})_(lifecycle|prometheus)_metrics\.json$")
MAX_REPORT_BYTES = 64 * 1024 * 1024


class ReportError(Exception):
    """The input holds no inference-perf report the summary can read (bad input: exit 2)."""


@dataclass(frozen=True)
class Row:
    """One line of the summary: a stage, or the whole run."""

    label: str
    agents: int | None
    requests_per_min: float | None
    input_tokens_per_min: float | None
    output_tokens_per_min: float | None
    median_input_tokens: float | None
    median_output_tokens: float | None
    failures: int | None
    ttft_p90_s: float | None
    server_ttft_p90_s: float | None
    queue_p90_s: float | None
    preemptions: float | None


def _dig(document: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _per_min(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else number * 60


def read_log(text: str) -> dict[str, Any]:
    """Report file name -> parsed JSON, from the bench Job's log."""
    reports: dict[str, Any] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is not None:
            reports[name] = _parse(name, "\n".join(lines))

    for line in text.splitlines():
        if line.startswith(REPORT_MARKER) or line.strip() == REPORT_END:
            close()
            name, lines = None, []
            if line.startswith(REPORT_MARKER):
                name = line.removeprefix(REPORT_MARKER).removesuffix(" <==").strip()
            continue
        if name is not None:
            lines.append(line)
    close()
    return reports


def read_directory(directory: Path) -> dict[str, Any]:
    """Report file name -> parsed JSON, from a directory of inference-perf report files."""
    reports: dict[str, Any] = {}
    for path in sorted(directory.iterdir()):
        if _REPORT_NAME.fullmatch(path.name) and path.is_file():
            if path.stat().st_size > MAX_REPORT_BYTES:
                raise ReportError(
                    f"{path}: larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB, not a summary report"
                )
            reports[path.name] = _parse(path.name, path.read_text(errors="replace"))
    return reports


# What a report's JSON may hold: integers of at most 18 digits (a count or a token total; a longer
# one is no measurement, and Python refuses to read beyond 4300) and nesting at most 64 levels
# deep (inference-perf's reports nest 4).
MAX_INT_DIGITS = 18
MAX_DEPTH = 64


class _Unreadable(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Unreadable(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _depth(document: Any) -> int:
    """Nesting depth, iteratively (a deep document must not exhaust the stack here either)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack += [(child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)]
    return deepest


def _parse(name: str, text: str) -> Any:
    """A report's JSON, or ReportError (one line) when it is not JSON, holds an integer too long to
    be a measurement or nests deeper than MAX_DEPTH."""
    if not _REPORT_NAME.fullmatch(name):
        return None  # a report this summary does not read (per-request, session, validation)
    try:
        document = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{name}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except _Unreadable as exc:
        raise ReportError(f"{name}: not an inference-perf report: {exc}") from None
    except RecursionError:
        raise ReportError(
            f"{name}: not an inference-perf report: nested deeper than {MAX_DEPTH} levels"
        ) from None
    if _depth(document) > MAX_DEPTH:
        raise ReportError(f"{name}: not an inference-perf report: nested deeper than {MAX_DEPTH} levels")
    return document


def _row(label: str, lifecycle: Any, prometheus: Any) -> Row:
    ok = _dig(lifecycle, "successes")
    server = _dig(prometheus, "successes")
    agents = _dig(lifecycle, "load_summary", "concurrency")
    failures = _dig(lifecycle, "failures", "count")
    return Row(
        label=label,
        agents=agents if isinstance(agents, int) and not isinstance(agents, bool) else None,
        requests_per_min=_per_min(_dig(ok, "throughput", "requests_per_sec")),
        input_tokens_per_min=_per_min(_dig(ok, "throughput", "input_tokens_per_sec")),
        output_tokens_per_min=_per_min(_dig(ok, "throughput", "output_tokens_per_sec")),
        median_input_tokens=_number(_dig(ok, "prompt_tokens", "median")),
        median_output_tokens=_number(_dig(ok, "output_tokens", "median")),
        failures=failures if isinstance(failures, int) and not isinstance(failures, bool) else None,
        ttft_p90_s=_number(_dig(ok, "latency", "time_to_first_token", "p90")),
        server_ttft_p90_s=_number(_dig(server, "time_to_first_token", "p90")),
        queue_p90_s=_number(_dig(server, "request_queue_time", "p90")),
        preemptions=_number(_dig(server, "num_preemptions_total", "mean")),
    )


def summarize(reports: dict[str, Any]) -> list[Row]:
    """One row per stage (in stage order), then the whole run."""
    stages = sorted(
        {
            int(m[1])
            for name in reports
            if (m := re.fullmatch(r"stage_([0-9]+)_lifecycle_metrics\.json", name))
        }
    )
    rows = [
        _row(
            f"stage {stage}",
            reports.get(f"stage_{stage}_lifecycle_metrics.json"),
            reports.get(f"stage_{stage}_prometheus_metrics.json"),
        )
        for stage in stages
    ]
    if "summary_lifecycle_metrics.json" in reports:
        rows.append(
            _row(
                "all",
                reports["summary_lifecycle_metrics.json"],
                reports.get("summary_prometheus_metrics.json"),
            )
        )
    if not rows:
        raise ReportError(
            "no inference-perf lifecycle report (summary_lifecycle_metrics.json or "
            "stage_<n>_lifecycle_metrics.json) found"
        )
    return rows


def _fmt(value: float | int | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}{unit}"


def table(rows: list[Row]) -> str:
    header = (
        "| stage | agents | requests/min | input tokens/min | output tokens/min | median input | "
        "median output | failed | p90 TTFT | p90 TTFT (engines) | p90 queue time | preemptions |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r.label} | {_fmt(r.agents)} | {_fmt(r.requests_per_min, digits=1)} | "
            f"{_fmt(r.input_tokens_per_min)} | {_fmt(r.output_tokens_per_min)} | "
            f"{_fmt(r.median_input_tokens)} | {_fmt(r.median_output_tokens)} | {_fmt(r.failures)} | "
            f"{_fmt(r.ttft_p90_s, ' s', 2)} | {_fmt(r.server_ttft_p90_s, ' s', 2)} | "
            f"{_fmt(r.queue_p90_s, ' s', 2)} | {_fmt(r.preemptions)} |"
        )
    if all(r.preemptions is None for r in rows):
        lines.append(
            f"\npreemptions: not measured (no Prometheus report: the stack has no Prometheus, or "
            f"it did not answer); the count is the increase of {PREEMPTION_METRIC}"
        )
    return "\n".join(lines)


def read(source: str, stdin_text: str | None = None) -> dict[str, Any]:
    """The reports of `source`: `-` (stdin_text), a directory, or a log file."""
    if source == "-":
        return read_log(stdin_text or "")
    path = Path(source)
    if path.is_dir():
        return read_directory(path)
    if not path.is_file():
        raise ReportError(f"{source}: no such file or directory")
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise ReportError(f"{source}: larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB, not a bench log")
    return read_log(path.read_text(errors="replace"))
