"""How pydantic's validation errors become problems: the key path and a message with the unit."""

from collections.abc import Mapping
from typing import Any

from llmd_fleet.core.problems import PROJECT, quote

# The unit of each number, by how its key ends (checked for every numeric field by a test).
_UNIT_SUFFIXES = (
    ("GiB", "GiB"),
    ("MiB", "MiB"),
    ("Efficiency", "fraction of the NIC line rate"),
    ("Gb", "GB"),
    ("Seconds", "seconds"),
    ("Days", "days"),
    ("Minutes", "minutes"),
    ("Hours", "hours"),
    ("ParamsB", "billion parameters"),
    ("PerSecond", "requests per second"),
    ("PerToken", "bytes per token"),
    ("Tokens", "tokens"),
    ("Len", "tokens"),
    ("Cpus", "CPUs"),
    ("Parallel", "ranks"),
    ("Threads", "threads"),
    ("Utilization", "fraction of HBM"),
    ("Fraction", "fraction"),
    ("Mtu", "bytes"),
    ("Port", "port number"),
    ("Ms", "milliseconds"),
    ("Us", "microseconds"),
    ("Blocks", "blocks"),
)
_UNIT_NAMES = {
    "count": "nodes",
    "instances": "instances",
    "nodesPerInstance": "nodes",
    "layers": "layers",
    "experts": "experts",
    "expertsPerToken": "experts",
    "redundantExperts": "experts",
    "maxNumSeqs": "sequences",
    "replicas": "replicas",
    "maxRequests": "requests",
    "priority": "(priority band)",
    "cpusPerNode": "CPUs",
    "cpus": "CPUs",
    "nicsPerNode": "NICs",
    "cpusPerRank": "CPUs per data-parallel rank",
    "rdmaResourcePerPod": "resource units per pod",
    "nonCachedTokensForRemotePrefill": "tokens",
    "expectedPromptTokens": "tokens",
    "agents": "agents",
    "inputTokensP50": "tokens",
    "inputTokensP90": "tokens",
    "inputTokensP99": "tokens",
    "growthTokensPerTurn": "tokens",
    "prefixReuse": "fraction of a turn's input",
    "requestsPerAgentMinute": "requests per agent per minute",
    "samplingRatio": "fraction of traces",
    "nodeCount": "nodes",
    "iterations": "transfers",
    "maxPodsPerNode": "pods",
    "localSsdCount": "disks",
    "nvshmemHeapGiB": "GiB",
    "nicGbps": "Gb/s",
    "minInstances": "instances",
    "maxInstances": "instances",
    "prefillTokensPerSecond": "tokens per second",
    "targetKvCacheUtilization": "fraction of the KV cache",
    "cpuMillisPerRank": "millicores per data-parallel rank",
    "memoryMiBPerRank": "MiB per data-parallel rank",
    "timeFactorUnderLoad": "(slowdown factor)",
    "weight": "percent of requests",
    "prefill": "instances",
    "decode": "instances",
    "routerReplicas": "replicas",
    "rank": "(LoRA rank)",
}


def unit_of(key: str) -> str:
    """The unit a numeric config key is in, for error messages ('' when none is known)."""
    if key in _UNIT_NAMES:
        return _UNIT_NAMES[key]
    for suffix, unit in _UNIT_SUFFIXES:
        if key.endswith(suffix):
            return unit
    return ""


_BOUNDS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}


def describe(error: Mapping[str, Any], loc: tuple[Any, ...] = ()) -> str:
    """What is wrong and what is allowed, for one pydantic error."""
    kind, ctx = error["type"], error.get("ctx") or {}
    got = error.get("input")
    if kind in ("missing", "union_tag_not_found"):
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "union_tag_invalid":
        tags = [tag.strip() for tag in str(ctx.get("expected_tags", "")).split(",")]
        expected = ", ".join(tags[:-1]) + f" or {tags[-1]}" if len(tags) > 1 else tags[0]
        return f"must be one of {expected} (got {quote(ctx.get('tag'))})"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')} (got {quote(got)})"
    if kind == "value_error":
        return f"{ctx.get('error')} (got {quote(got)})"
    if kind == "finite_number":
        return f"must be a finite number, not infinity or NaN (got {quote(got)})"
    if kind in _BOUNDS:
        (bound,) = (v for k, v in ctx.items() if k in ("gt", "ge", "lt", "le"))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        names = [item for item in loc if isinstance(item, str)]
        unit = unit_of(names[-1]) if names else ""
        return f"must be {_BOUNDS[kind]} {bound}{f' {unit}' if unit else ''} (got {quote(got)})"
    return f"{error['msg']} (got {quote(got)})"


def section_loc(error: Mapping[str, Any], raw: Any) -> tuple[Any, ...]:
    """The error's location as key names. A section that is a union discriminated by `kind` (the
    target) puts the chosen kind first, which is not a key: it is dropped. A tag error belongs to
    the `kind` key itself."""
    loc = tuple(error["loc"])
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return (*loc, "kind")
    if isinstance(raw, Mapping) and loc and loc[0] == raw.get("kind"):
        return loc[1:]
    return loc


def key_path(key: str, loc: tuple[Any, ...]) -> str:
    """`llmd-fleet:<key>.<loc...>` with list indices as `[i]` (pydantic's type names dropped)."""
    parts = [f"{PROJECT}:{key}"]
    for item in loc:
        if isinstance(item, int):
            parts[-1] += f"[{item}]"
        elif item not in {"str", "int", "float", "bool"}:
            parts.append(str(item))
    return ".".join(parts)
