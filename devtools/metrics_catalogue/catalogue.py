"""catalogue.json: every metric family the alerts and dashboards may read, with its type, the
names it is exposed under, and where it comes from; and the check that holds a PromQL expression
to it.

Sources (catalogue.json `sources` says how each was read):

- `vllm`: extracted from the pinned vLLM's own code in the parser environment
  (devtools/metrics_catalogue/vllm_extract.py); `make check-vllm` extracts again and fails on any
  difference.
- `llm-d-router`: the endpoint picker's docs/metrics.md at the pinned tag, each name confirmed in
  the tag's Go source (devtools/metrics_catalogue/router.py).
- `controller-runtime`: the leader-election gauge the endpoint picker serves from
  controller-runtime's registry (the version its go.mod requires at the pinned tag).
- `prometheus`: `up`, which every scrape adds.

The check: a name must be one of the exposed names. A counter's family name without `_total`
(what vLLM registers, and what some upstream dashboards query, so their panels stay empty) and a
histogram's base name are refused with the name to use instead.
"""

import difflib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from devtools.metrics_catalogue.promql import metric_names

CATALOGUE = Path(__file__).resolve().parent / "catalogue.json"


@dataclass(frozen=True)
class Catalogue:
    families: dict[str, dict[str, Any]]
    """Family name -> {type, exposed, source, ...}."""

    @property
    def exposed(self) -> dict[str, str]:
        """Exposed name -> its family."""
        return {name: family for family, entry in self.families.items() for name in entry["exposed"]}

    def problem(self, name: str) -> str | None:
        """Why `name` is not a metric the fleet's targets expose, or None."""
        exposed = self.exposed
        if name in exposed:
            return None
        entry = self.families.get(name)
        if entry is not None:
            kind, names = entry["type"], ", ".join(entry["exposed"])
            if kind == "counter":
                return f"{name} is a counter and is exposed as {names}: add the _total suffix"
            return f"{name} is a {kind} and is exposed as {names}"
        if name.endswith("_total") and name.removesuffix("_total") in self.families:
            entry = self.families[name.removesuffix("_total")]
            base, names = name.removesuffix("_total"), ", ".join(entry["exposed"])
            return f"{name}: {base} is a {entry['type']}, exposed as {names}"
        close = difflib.get_close_matches(name, list(exposed), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"{name} is not in the metric catalogue{hint}"

    def problems(self, expr: str) -> list[str]:
        return [p for name in sorted(metric_names(expr)) if (p := self.problem(name)) is not None]


def load(path: Path = CATALOGUE) -> Catalogue:
    return Catalogue(json.loads(path.read_text())["families"])


@cache
def catalogue() -> Catalogue:
    return load()
