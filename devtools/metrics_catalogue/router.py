"""The endpoint picker's metric names, from llm-d-router's metric documentation at the pinned tag,
each confirmed in the tag's Go source.

    python -m devtools.metrics_catalogue router --source DIR [--commit SHA] [--write]

DIR is a checkout (or export) of llm-d-router at `[images.endpoint-picker].tag`. `DIR/docs/metrics.md`
gives every name without its subsystem prefix (`llm_d_epp_`, or the prefix its section states)
and its type; a name counts only when the Go source outside tests registers it (`Name: "<name>"`).
Without --write the result is compared with catalogue.json. The source tree is not available in CI,
so this runs when the router is bumped; the names it records are committed.
"""

import re
from pathlib import Path
from typing import Any

DOC = "docs/metrics.md"
DEFAULT_PREFIX = "llm_d_epp_"
_SECTION = re.compile(r"^(#{2,4}) (.*)$")
_PREFIX = re.compile(r"[Pp]refix `([a-z_]+_)`")
_ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (Counter|Gauge|Histogram) \|")
_HEADING_NAME = re.compile(r"^#### `([a-z0-9_]+)`")
_TYPE_LINE = re.compile(r"^\*\s+\*\*Type:\*\* (Counter|Gauge|Histogram)")
# Sections whose tables are not metrics of the current names.
_SKIPPED_SECTIONS = ("Subsystems and naming", "Deprecated series", "Related work")


def documented(text: str) -> dict[str, str]:
    """Full metric name -> type (counter, gauge, histogram) from docs/metrics.md."""
    found: dict[str, str] = {}
    prefix, skipping, pending = DEFAULT_PREFIX, False, None
    for line in text.splitlines():
        if section := _SECTION.match(line):
            level, title = len(section[1]), section[2]
            if level <= 3:
                skipping = title.startswith(_SKIPPED_SECTIONS)
                prefix = DEFAULT_PREFIX
            pending = None
            if heading := _HEADING_NAME.match(line):
                pending = heading[1]
            continue
        if skipping:
            continue
        if (stated := _PREFIX.search(line)) and not line.startswith("|"):
            prefix = stated[1]
        name, kind = None, None
        if row := _ROW.match(line):
            name, kind = row[1], row[2]
        elif pending and (typed := _TYPE_LINE.match(line)):
            name, kind = pending, typed[1]
        if name and kind:
            found[name if name.startswith(prefix) else prefix + name] = kind.lower()
            pending = None
    return found


def exposed(name: str, kind: str) -> list[str]:
    """Go's client serves a counter and a gauge under their own name (the docs name counters with
    their `_total`), a histogram as `_bucket`, `_sum`, `_count`."""
    return [name + s for s in ("_bucket", "_sum", "_count")] if kind == "histogram" else [name]


def registered_in(source: Path, full: str, prefix_candidates: tuple[str, ...]) -> str | None:
    """The Go file (outside tests) that registers the metric, or None."""
    shorts = {full.removeprefix(p) for p in prefix_candidates if full.startswith(p)} | {full}
    for path in sorted(source.rglob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        text = path.read_text(errors="replace")
        for short in shorts:
            # Collector-built series (e.g. llm_d_epp_per_endpoint_queue_size) are declared with
            # prometheus.NewDesc("<full name>", ...) in pkg/epp/metrics.
            if (
                re.search(rf'Name:\s*"{re.escape(short)}"', text)
                or re.search(rf'newDual(Counter|Histogram)\([^)]*"{re.escape(short)}"', text)
                or re.search(rf'NewDesc\(\s*"{re.escape(short)}"', text)
            ):
                return path.relative_to(source).as_posix()
    return None


def extract(source: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(name -> catalogue entry, problems) for a llm-d-router source tree."""
    docs = documented((source / DOC).read_text())
    entries: dict[str, dict[str, Any]] = {}
    problems = []
    prefixes = (DEFAULT_PREFIX, "llm_d_router_epp_", "moriio_dns_")
    for name, kind in sorted(docs.items()):
        where = registered_in(source, name, prefixes)
        if where is None:
            problems.append(f"{name}: documented in {DOC} but no Go source registers it")
            continue
        entries[name] = {
            "type": kind,
            "exposed": exposed(name, kind),
            "source": "llm-d-router",
            "file": where,
        }
    return entries, problems
