"""A small evaluator of Gateway API HTTPRoute matching (gateway.networking.k8s.io/v1), for tests.

It picks the rule a request takes among every HTTPRoute attached to one Gateway, the way the
HTTPRoute CRD documents it (`spec.hostnames` and `spec.rules[].matches` in the vendored
schemas/crds/gateway.networking.k8s.io/gateway.networking.k8s.io_httproutes.yaml):

- a route with no `hostnames` matches every host; a hostname `*.example.com` matches one or more
  labels in front of `example.com`;
- across routes, precedence goes to the matching non-wildcard hostname with the most characters,
  then the matching hostname with the most characters;
- then to an `Exact` path match, then the `PathPrefix` match with the most characters (a prefix
  matches whole path elements: `/v1/responses` matches `/v1/responses/x`, not `/v1/responsesX`);
- remaining ties go to the oldest route, then the first in namespace/name order, then the first
  matching rule (routes here carry no creation time, so name order decides).

Methods, headers and query parameters are not evaluated (the fleet's routes match on paths only).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Match:
    """The rule a request took: its route and the rule's backends."""

    route: str
    backend_refs: tuple[Mapping[str, Any], ...]


def _host_score(hostnames: list[str], host: str) -> tuple[int, int] | None:
    """(non-wildcard characters, characters) of the best matching hostname; (0, 0) when the route
    names none; None when none matches."""
    if not hostnames:
        return (0, 0)
    best: tuple[int, int] | None = None
    for name in hostnames:
        if name == host:
            score = (len(name), len(name))
        elif name.startswith("*.") and host.endswith(name[1:]) and len(host) > len(name) - 1:
            score = (0, len(name))
        else:
            continue
        best = score if best is None or score > best else best
    return best


def _path_score(match: Mapping[str, Any], path: str) -> tuple[int, int] | None:
    """(1 for Exact, characters of the match) when `path` matches; None otherwise."""
    rule = match.get("path") or {"type": "PathPrefix", "value": "/"}
    kind, value = rule.get("type", "PathPrefix"), rule["value"]
    if kind == "Exact":
        return (1, len(value)) if path == value else None
    if kind != "PathPrefix":
        raise ValueError(f"path match type {kind!r} is not supported")
    prefix = value.rstrip("/")
    if prefix == "" or path == prefix or path.startswith(prefix + "/"):
        return (0, len(value))
    return None


def _attached(route: Mapping[str, Any], gateway: str) -> bool:
    return any(
        ref.get("kind", "Gateway") == "Gateway" and ref.get("name") == gateway
        for ref in route["spec"].get("parentRefs") or ()
    )


def route_request(routes: Iterable[Mapping[str, Any]], gateway: str, host: str, path: str) -> Match | None:
    """The rule a request for `host` and `path` takes on `gateway`, or None (a 404)."""
    candidates = []
    ordered = sorted(
        (r for r in routes if r.get("kind") == "HTTPRoute" and _attached(r, gateway)),
        key=lambda r: (r["metadata"].get("namespace", ""), r["metadata"]["name"]),
    )
    for order, route in enumerate(ordered):
        host_score = _host_score(list(route["spec"].get("hostnames") or ()), host)
        if host_score is None:
            continue
        for index, rule in enumerate(route["spec"].get("rules") or ()):
            for match in rule.get("matches") or [{}]:
                path_score = _path_score(match, path)
                if path_score is None:
                    continue
                # Highest first: hostname, then path; ties to the earlier route and rule.
                key = (host_score, path_score, -order, -index)
                candidates.append((key, route["metadata"]["name"], tuple(rule.get("backendRefs") or ())))
    if not candidates:
        return None
    _, name, backends = max(candidates, key=lambda c: c[0])
    return Match(name, backends)
