"""The data-plane proof of several models behind one gateway (`llmd-fleet:models`,
docs/multi-model.md, docs/twin.md "Several models"): a stack's rendering with one InferencePool,
picker and DisaggregatedSet per model, the real body-based router (gateway-api-inference-extension
v1.5.0 cmd/bbr, built from its Go module) watching the rendered adapter ConfigMaps, and the gateway
stand-in routing by the rendered HTTPRoutes on the headers that router sets.

What is sent, per model (in stack order) and per adapter: REQUESTS chat completions named by its
client name; NOT_SERVED requests for a name no model serves; one `GET /v1/models`. Then the same
again with one route's header match removed (the negative control). What is counted
(`tally`, pure):
- a request is misrouted when the pod that served it (the endpoint the picker named, and the
  prefill endpoint of P/D) belongs to a pool whose engines do not serve its model, or, for an
  adapter, whose engine was not started with that adapter in `--lora-modules`;
- a request no route matches is refused with the gateway's no-route status (404);
- `GET /v1/models` is answered by the model-list route's AgentgatewayPolicy direct response, as
  rendered, and must list every served name and adapter of every pool's engines.
The rendered run passes only with 0 misrouted, every served request answered 200, every
not-served one refused and the full model list; the negative control passes only if it misroutes
or refuses some."""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.dataplane import build, netns, replay, topology
from devtools.twin.kube import Kube, wait_for

REQUESTS = 6
NOT_SERVED = 2
NOT_SERVED_NAME = "no-such-model"
# The gateway's answer to a request no HTTPRoute rule matches: agentgateway (the rendered gateway
# class) turns ProxyError::RouteNotFound into 404 "route not found" (agentgateway
# crates/agentgateway/src/proxy/mod.rs, into_response), as Gateway API asks of an implementation
# (HTTPRoute: a request no rule matches gets 404).
NO_ROUTE_STATUS = 404
NO_ROUTE_SOURCE = "agentgateway crates/agentgateway/src/proxy/mod.rs ProxyError::RouteNotFound"
BBR_NS = "bbr"
BBR_IP = "10.244.0.7"
# Picker and render namespaces per pool: pool i's picker at .(200 + i), its render pod at .(220 + i),
# above every serving pod's address.
PICKER_HOST = 200
RENDER_HOST = 220


@dataclass(frozen=True)
class Served:
    """What one pod's engine serves: its pool, served names and loaded adapters."""

    pool: str
    names: frozenset[str]
    adapters: frozenset[str]


def served_by_endpoint(pools: list[topology.Topology]) -> dict[str, Served]:
    """Every endpoint address (ip:port of any data-path container) of every serving pod, and what
    its pod's engine serves (pure)."""
    out: dict[str, Served] = {}
    for topo in pools:
        pool = topo.pool["metadata"]["name"]
        for pod in topo.pods:
            engine = next((c for c in pod.containers if c.vllm is not None), None)
            if engine is None or engine.vllm is None:
                continue
            names = frozenset(topology.served_names(engine.args))
            adapters = frozenset(topology.lora_names(engine.vllm))
            for c in pod.containers:
                for port in c.ports:
                    out[f"{pod.ip}:{port}"] = Served(pool, names, adapters)
    return out


@dataclass(frozen=True)
class Model:
    """A model as clients see it: the name they send, its pool, and its adapters."""

    name: str
    pool: str
    adapters: tuple[str, ...]


def models_of(docs: list[dict[str, Any]]) -> list[Model]:
    """The rendered models in stack order: each body-based-router ConfigMap's base model and
    adapters, its pool being the backend of the HTTPRoute rule that matches that base model
    (pure; raises ValueError when a model has no route)."""
    rules = route_rules(docs, {})["rules"]
    out = []
    for cm in docs:
        labels = cm.get("metadata", {}).get("labels", {})
        if cm.get("kind") != "ConfigMap" or labels.get("inference.networking.k8s.io/bbr-managed") != "true":
            continue
        base = cm["data"]["baseModel"]
        pools = [
            r["backends"][0]["pool"]
            for r in rules
            for m in r["matches"]
            for h in m["headers"]
            if h["value"] == base
        ]
        if not pools:
            raise ValueError(f"no HTTPRoute rule matches base model {base!r}")
        out.append(Model(base, pools[0], tuple(json.loads(cm["data"].get("adapters") or "[]"))))
    return out


def last_model_route(docs: list[dict[str, Any]]) -> str:
    """The HTTPRoute whose header match routes the last model (pure)."""
    base = models_of(docs)[-1].name
    rules = route_rules(docs, {})["rules"]
    return next(
        str(r["route"]) for r in rules for m in r["matches"] for h in m["headers"] if h["value"] == base
    )


def direct_responses(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rendered AgentgatewayPolicies' direct responses, by the HTTPRoute each targets (pure)."""
    found: dict[str, dict[str, Any]] = {}
    for policy in (d for d in docs if d.get("kind") == "AgentgatewayPolicy"):
        direct = (policy["spec"].get("traffic") or {}).get("directResponse")
        if not direct:
            continue
        for ref in policy["spec"].get("targetRefs", []):
            if ref.get("kind") == "HTTPRoute":
                found[ref["name"]] = {"status": int(direct["status"]), "body": str(direct.get("body", ""))}
    return found


def route_rules(
    docs: list[dict[str, Any]],
    pickers: dict[str, list[str]],
    health: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The gateway stand-in's routing table (gateway/routes.go): every rule of every rendered
    HTTPRoute to an InferencePool, its InferencePool backendRefs with their weights (Gateway
    API's default 1 where none is set) and its matches as rendered, routes in name order, with the
    direct response an AgentgatewayPolicy sets on its route; each pool's picker addresses, and
    with `health` their gRPC health addresses, which the stand-in probes for readiness (pure)."""
    direct = direct_responses(docs)
    rules = []
    for route in sorted(
        (d for d in docs if d.get("kind") == "HTTPRoute"), key=lambda d: d["metadata"]["name"]
    ):
        for rule in route["spec"].get("rules", []):
            backends = [
                {"pool": str(b["name"]), "weight": int(b.get("weight", 1))}
                for b in rule.get("backendRefs", [])
                if b.get("kind") == "InferencePool"
            ]
            if not backends:
                continue
            matches = [
                {
                    "pathType": (m.get("path") or {}).get("type", "PathPrefix"),
                    "path": (m.get("path") or {}).get("value", "/"),
                    "method": m.get("method", ""),
                    "headers": [{"name": h["name"], "value": h["value"]} for h in m.get("headers", [])],
                }
                for m in rule.get("matches", [])
            ]
            name = route["metadata"]["name"]
            rules.append({"route": name, "backends": backends, "matches": matches})
            if name in direct:
                rules[-1]["direct"] = direct[name]
    table: dict[str, Any] = {
        "rules": rules,
        "pickers": {pool: ",".join(addrs) for pool, addrs in pickers.items()},
    }
    if health:
        table["health"] = {pool: ",".join(addrs) for pool, addrs in health.items()}
    return table


def without_header_match(table: dict[str, Any], route: str) -> dict[str, Any]:
    """The negative control: `route`'s header matches removed, the rest as rendered (pure;
    raises ValueError when the route has none)."""
    rules = []
    removed = 0
    for rule in table["rules"]:
        if rule["route"] == route:
            removed += sum(len(m["headers"]) for m in rule["matches"])
            rule = {**rule, "matches": [{**m, "headers": []} for m in rule["matches"]]}
        rules.append(rule)
    if not removed:
        raise ValueError(f"HTTPRoute {route} has no header match to remove")
    return {**table, "rules": rules}


def entries(models: list[Model], bands: dict[str, str]) -> list[dict[str, Any]]:
    """The requests: REQUESTS per model and per adapter, NOT_SERVED for an unserved name, one
    GET /v1/models; each chat request carries its pool's interactive objective (`bands`: pool ->
    objective name)."""
    out: list[dict[str, Any]] = []

    def chat(model: str, kind: str, band: str | None, i: int) -> dict[str, Any]:
        return {
            "id": f"{kind}-{model}-{i}",
            "at_ms": 200 * i,
            "phase": kind,
            "session": f"{kind}-{model}-{i}",
            "program": model,
            "headers": {"x-gateway-inference-objective": band} if band else {},
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": f"request {i} for {model}"}],
                "max_tokens": 8,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        }

    for m in models:
        out += [chat(m.name, "model", bands.get(m.pool), i) for i in range(REQUESTS)]
        for adapter in m.adapters:
            out += [chat(adapter, "lora", bands.get(m.pool), i) for i in range(REQUESTS)]
    out += [chat(NOT_SERVED_NAME, "not-served", None, i) for i in range(NOT_SERVED)]
    out.append(
        {
            "id": "model-list",
            "at_ms": 0,
            "phase": "model-list",
            "session": "model-list",
            "program": "",
            "headers": {},
            "method": "GET",
            "path": "/v1/models",
        }
    )
    return out


def _pod(address: str) -> str:
    return address.rsplit(":", 1)[0]


def misrouted(r: dict[str, Any], served: dict[str, Served]) -> bool:
    """Served by a pod (decode endpoint, or the prefill endpoint of P/D) whose engine does not
    serve the requested name (a model's served name, or an adapter it loaded)."""
    if r.get("outcome") in ("no-route", "unrouted") or not r.get("destination"):
        return False
    name = r["program"]
    pods = [r["destination"]] + ([r["prefill"]] if r.get("prefill") else [])
    for address in pods:
        s = served.get(address) or next((v for k, v in served.items() if _pod(k) == _pod(address)), None)
        if s is None or (name not in s.names and name not in s.adapters):
            return True
    return False


def tally(results: list[dict[str, Any]], models: list[Model], served: dict[str, Served]) -> dict[str, Any]:
    """The figures of one pass (pure): per model and adapter its requests, the pools and
    endpoints that served them and how many were misrouted or not answered 200; the not-served
    name's statuses; and the model list's pool and names."""

    def of(kind: str, name: str) -> list[dict[str, Any]]:
        return [r for r in results if r.get("phase") == kind and r.get("program") == name]

    def figures(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "requests": len(rs),
            "pools": sorted({str(r.get("pool")) for r in rs if r.get("pool")}),
            "endpoints": sorted({str(r["destination"]) for r in rs if r.get("destination")}),
            "misrouted": sum(misrouted(r, served) for r in rs),
            "refused": sum(1 for r in rs if r.get("outcome") in ("no-route", "unrouted", "rejected")),
            "not_200": sum(1 for r in rs if r.get("status") != 200),
        }

    listing = next((r for r in results if r.get("phase") == "model-list"), {})
    try:
        listed = sorted(str(m["id"]) for m in json.loads(listing.get("listed") or "{}").get("data", []))
    except (ValueError, AttributeError, TypeError, KeyError):
        listed = []
    not_served = [r for r in results if r.get("phase") == "not-served"]
    return {
        "models": {m.name: figures(of("model", m.name)) for m in models},
        "adapters": {a: figures(of("lora", a)) for m in models for a in m.adapters},
        "not_served": {
            "requests": len(not_served),
            "statuses": sorted({int(r.get("status") or 0) for r in not_served}),
            "misrouted": sum(misrouted(r, served) for r in not_served),
            "refused": sum(1 for r in not_served if r.get("outcome") == "no-route"),
        },
        "model_list": {
            "route": listing.get("route", ""),
            "pool": listing.get("pool", ""),
            "direct": listing.get("outcome") == "direct",
            "status": listing.get("status"),
            "listed": listed,
            # What every pool's engines serve: their served names and adapters.
            "expected": sorted({n for v in served.values() for n in v.names | v.adapters}),
        },
    }


def _pools_text(f: dict[str, Any]) -> str:
    return "+".join(f["pools"]) or "none"


def lines(result: dict[str, Any], models: list[Model]) -> list[str]:
    """The printed lines (the issue's exact forms for `models:`, `lora:` and the negative control)."""
    t = result["rendered"]
    segments = [
        f"{m.name} {t['models'][m.name]['requests']} requests -> pool {_pools_text(t['models'][m.name])}"
        for m in models
    ]
    model_k = sum(f["misrouted"] for f in t["models"].values())
    out = [f"models: {', '.join(segments)}, {model_k} misrouted"]
    for name, f in t["adapters"].items():
        n, endpoints, k = f["requests"], len(f["endpoints"]), f["misrouted"]
        out.append(f"lora: {name} {n} requests on {endpoints} endpoints, {k} misrouted")
    ns = t["not_served"]
    statuses = ",".join(str(s) for s in ns["statuses"])
    out.append(
        f"models (not served): {NOT_SERVED_NAME} {ns['requests']} requests -> status {statuses} "
        f"({NO_ROUTE_SOURCE}: {NO_ROUTE_STATUS})"
    )
    ml = t["model_list"]
    missing = [n for n in ml["expected"] if n not in ml["listed"]]
    answerer = f"route {ml['route']}'s direct response" if ml["direct"] else f"pool {ml['pool'] or 'none'}"
    out.append(
        f"models (GET /v1/models): {answerer} answered {ml['status']}, listing "
        f"{', '.join(ml['listed']) or 'nothing'}" + (f"; not listed: {', '.join(missing)}" if missing else "")
    )
    if "negative" in result:
        k, r = negative_counts(result["negative"])
        out.append(
            f"models (negative control): {result['negative_route']} removed: {k} misrouted, {r} refused"
        )
    return out


def negative_counts(n: dict[str, Any]) -> tuple[int, int]:
    """Misrouted and refused requests of served names (models and adapters) in a pass, plus the
    not-served requests that reached a pod (those a correct gateway refuses)."""
    groups = [*n["models"].values(), *n["adapters"].values()]
    return (
        sum(f["misrouted"] for f in groups) + n["not_served"]["misrouted"],
        sum(f["refused"] for f in groups),
    )


def checks(result: dict[str, Any]) -> list[str]:
    """What makes the run fail (pure)."""
    failures = []
    t = result["rendered"]
    for kind in ("models", "adapters"):
        for name, f in t[kind].items():
            if f["misrouted"]:
                failures.append(f"{f['misrouted']} of {name}'s requests misrouted")
            if f["not_200"]:
                failures.append(f"{f['not_200']} of {name}'s {f['requests']} requests not answered 200")
            if not f["requests"]:
                failures.append(f"no requests for {name}")
    ns = t["not_served"]
    if ns["statuses"] != [NO_ROUTE_STATUS] or ns["refused"] != ns["requests"]:
        failures.append(
            f"{NOT_SERVED_NAME} got statuses {ns['statuses']}, not the gateway's {NO_ROUTE_STATUS}"
        )
    ml = t["model_list"]
    if ml["status"] != 200:
        failures.append(f"GET /v1/models answered {ml['status']}")
    elif ml["listed"] != ml["expected"]:
        failures.append(f"GET /v1/models listed {ml['listed']}, not every engine's {ml['expected']}")
    if "negative" in result:
        k, r = negative_counts(result["negative"])
        if k + r == 0:
            failures.append(
                f"the negative control ({result['negative_route']} removed) neither misrouted nor refused"
            )
    return failures


def pool_spaces(
    pools: list[topology.Topology],
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, tuple[str, str]]]:
    """Each pool's picker namespaces and addresses (replica i of pool p: `picker-<p>-<i>`), and
    its render pod's namespace and address (pure)."""
    pickers: dict[str, list[tuple[str, str]]] = {}
    renders: dict[str, tuple[str, str]] = {}
    for i, topo in enumerate(pools):
        name = topo.pool["metadata"]["name"]
        pickers[name] = [(f"picker-{name}-0", f"{topology.POD_SUBNET}.{PICKER_HOST + i}")]
        renders[name] = (f"render-{name}", f"{topology.POD_SUBNET}.{RENDER_HOST + i}")
    return pickers, renders


def bbr_argv(docs: list[dict[str, Any]], binary: Path) -> tuple[list[str], dict[str, str]]:
    """The rendered router Deployment's arguments and its NAMESPACE (pure)."""
    deployment = next(
        d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == "body-based-router"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [str(binary), *[str(a) for a in container.get("args", [])]], {
        "NAMESPACE": deployment["metadata"]["namespace"]
    }


def bbr_port(argv: list[str]) -> int:
    return int(next(a.split("=", 1)[1] for a in argv if a.startswith("--grpc-port=")))


# How long the run waits for every endpoint a picker can pick to answer (`wait_endpoints`): the
# simulators start in about a second each, but the machine is shared and loaded.
ENDPOINTS_TIMEOUT_S = 180.0
ENDPOINTS_POLL_S = 0.5


@dataclass(frozen=True)
class PodEndpoint:
    """An endpoint a pool's picker can pick, and the request that shows it serves."""

    pod: str
    role: str
    url: str
    model: str

    def body(self) -> dict[str, Any]:
        """A real chat completion for the engine's served name: one token, not streamed."""
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": "readiness"}],
            "max_tokens": 1,
        }


def pickable_endpoints(pools: list[topology.Topology]) -> list[PodEndpoint]:
    """Every endpoint a pool's picker can pick: each serving pod at each of its pool's target
    ports (a decode pod's routing sidecar there, which forwards to its own engine's rank port,
    or the engine itself, as on a prefill pod), with the name its engine serves (pure)."""
    out = []
    for topo in pools:
        ports = [int(t["number"]) for t in topo.pool["spec"].get("targetPorts", [])]
        for pod in topo.pods:
            engine = next((c for c in pod.containers if c.name == topology.SIMULATOR), None)
            if engine is None:
                continue
            names = topology.served_names(engine.args)
            if not names:
                raise ValueError(f"pod {pod.name}: its engine serves no model name")
            out += [
                PodEndpoint(pod.name, pod.role, f"http://{pod.ip}:{port}/v1/chat/completions", names[0])
                for port in ports
            ]
    return out


def wait_endpoints(
    endpoints: list[PodEndpoint],
    ask: Callable[[PodEndpoint], int | None],
    ready: Callable[[str], None],
    timeout: float = ENDPOINTS_TIMEOUT_S,
    poll: float = ENDPOINTS_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Until every endpoint has answered its request 200 (`ask`: the status, None when nothing
    answered); `ready(pod)` once each pod's endpoints all have, as a kubelet marks a pod Ready once
    its probes pass. The seconds it took; TimeoutError naming what never answered."""
    started = clock()
    pending = list(endpoints)
    pods = {e.pod for e in endpoints}
    while True:
        pending = [e for e in pending if ask(e) != 200]
        waiting = {e.pod for e in pending}
        for pod in sorted(pods - waiting):
            ready(pod)
        pods &= waiting
        if not pending:
            return clock() - started
        if clock() - started > timeout:
            raise TimeoutError(
                f"{len(pending)} of {len(endpoints)} endpoints did not answer a request in "
                f"{timeout:.0f} s: {', '.join(f'{e.pod} {e.url}' for e in pending[:6])}"
            )
        sleep(poll)


def run(
    kube: Kube,
    render: Path,
    pools: list[topology.Topology],
    procs: Any,
    bins: dict[str, Path],
    logs: Path,
    run_dir: Path,
    kubeconfig: Path,
    api_port: int,
    negative_route: str,
    network: Callable[[list[tuple[str, str]]], None] = netns.setup,
    node: str = "dataplane",
    with_sets: bool = True,
) -> dict[str, Any]:
    """Start the pools (each pod Ready once its endpoints answer, `wait_endpoints`), then the
    router and the pickers; route both passes; the result (stopping what it started is the
    caller's `procs.stop()`). `network` makes the run's namespaces (a
    fresh pod network; the day-two replay adds them to its own, devtools/daytwo/models_phase.py),
    `node` is the node the pod objects are bound to, and `with_sets=False` leaves the
    DisaggregatedSets out (a twin whose LWS controller would act on them)."""
    from devtools.dataplane import run as single

    docs = topology.load_manifests(render)
    models = models_of(docs)
    served = served_by_endpoint(pools)
    pickers, renders = pool_spaces(pools)
    bbr_cms = [
        d
        for d in docs
        if d.get("kind") == "ConfigMap"
        and d["metadata"].get("labels", {}).get("inference.networking.k8s.io/bbr-managed") == "true"
    ]
    for topo in pools:
        for obj in [topo.pool, *topo.objectives, *([topo.serving_set] if with_sets else [])]:
            kube.apply(obj)
    for cm in bbr_cms:
        kube.apply(cm)
    objects: dict[str, dict[str, Any]] = {}
    ips = {pod.name: pod.ip for topo in pools for pod in topo.pods}
    for topo in pools:
        for pod in topo.pods:
            obj = single.pod_object(pod, topo.namespace)
            obj["spec"]["nodeName"] = node
            kube.apply(obj)
            # Not Ready until its endpoints answer (`wait_endpoints`): the pickers take Ready pods.
            kube.request(
                "PATCH",
                kube.object_path(obj) + "/status",
                single.pod_status(pod.ip, ready=False),
                "application/merge-patch+json",
            )
            objects[pod.name] = obj
    spaces = [(single.GATEWAY_NS, single.GATEWAY_IP), (BBR_NS, BBR_IP)]
    spaces += [s for p in pickers.values() for s in p] + list(renders.values())
    spaces += [(p.name, p.ip) for topo in pools for p in topo.pods]
    network(spaces)
    hosts = {topo.renderer.host: renders[topo.pool["metadata"]["name"]][1] for topo in pools if topo.renderer}
    netns.write_hosts([name for name, _ in spaces], hosts)
    forwarder = netns.Forwarder([BBR_NS, *(n for p in pickers.values() for n, _ in p)], "127.0.0.1", api_port)
    try:
        for topo in pools:
            name = topo.pool["metadata"]["name"]
            if topo.renderer:
                procs.start(
                    f"render-{name}",
                    [
                        *netns.exec_prefix(renders[name][0]),
                        str(bins["simulator"]),
                        *single.renderer_args(topo.renderer),
                    ],
                    logs,
                )
            single.start_pods(procs, topo, bins, logs)
        # Every endpoint a picker can pick answers a request sent to it directly (from the
        # gateway's namespace, not through the gateway: not in any pass's figures) before its pod
        # is Ready, so no measured request meets an engine that does not listen yet.
        endpoints = pickable_endpoints(pools)

        def ask(e: PodEndpoint) -> int | None:
            return netns.post(single.GATEWAY_NS, e.url, e.body())

        def mark_ready(pod: str) -> None:
            kube.request(
                "PATCH",
                kube.object_path(objects[pod]) + "/status",
                single.pod_status(ips[pod]),
                "application/merge-patch+json",
            )

        seconds = wait_endpoints(endpoints, ask, mark_ready)
        argv, env = bbr_argv(docs, bins["bbr"])
        procs.start("bbr", [*netns.exec_prefix(BBR_NS), *argv], logs, {"KUBECONFIG": str(kubeconfig), **env})
        addresses: dict[str, list[str]] = {}
        for topo in pools:
            name = topo.pool["metadata"]["name"]
            config_file = run_dir / f"config-{name}" / "epp.yaml"
            config_file.parent.mkdir(parents=True, exist_ok=True)
            config_file.write_text(topo.picker.config)
            port = next(a.split("=")[1] for a in topo.picker.args if a.startswith("--grpc-port="))
            addresses[name] = []
            for i, (space, ip) in enumerate(pickers[name]):
                replica = f"{topo.picker.name}-{i}"
                procs.start(
                    f"picker-{name}-{i}",
                    [
                        *netns.exec_prefix(space, hostname=replica),
                        str(bins["epp"]),
                        *single.picker_args(topo.picker.args, config_file),
                    ],
                    logs,
                    {
                        "KUBECONFIG": str(kubeconfig),
                        "NAMESPACE": topo.namespace,
                        "POD_NAME": replica,
                        **topo.picker.env,
                    },
                )
                addresses[name].append(f"{ip}:{port}")
        table = route_rules(docs, addresses)
        bands = {
            topo.pool["metadata"]["name"]: replay.bands_of(topo.objectives)["interactive"] for topo in pools
        }
        requests = entries(models, bands)
        result: dict[str, Any] = {
            "negative_route": negative_route,
            "endpoints": {
                "decode": sum(1 for e in endpoints if e.role != "prefill"),
                "prefill": sum(1 for e in endpoints if e.role == "prefill"),
                "seconds": round(seconds, 1),
            },
        }
        bbr = f"{BBR_IP}:{bbr_port(argv)}"
        # Ready when a request for each model and adapter is served (pickers discovered their pods,
        # the router read the ConfigMaps).
        warm = [r for r in requests if r["phase"] in ("model", "lora") and r["id"].endswith("-0")]
        warm_table = run_dir / "routes.json"
        warm_table.write_text(json.dumps(table, indent=1))

        def passed(tag: str, table_file: Path, reqs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            out = run_dir / tag
            out.mkdir(parents=True, exist_ok=True)
            file = run_dir / f"requests-{tag}.jsonl"
            file.write_text(replay.write(reqs))
            proc = procs.start(
                f"gateway-{tag}",
                [
                    *netns.exec_prefix(single.GATEWAY_NS),
                    str(bins["gateway"]),
                    f"--routes={table_file}",
                    f"--bbr={bbr}",
                    f"--replay={file}",
                    f"--out={out}",
                    "--pick-deadline=5s",
                ],
                logs,
            )
            proc.wait(timeout=300)
            return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]

        attempt = [0]

        def ready() -> bool:
            attempt[0] += 1
            rs = passed(f"warm-{attempt[0]}", warm_table, warm)
            return len(rs) == len(warm) and all(r.get("status") == 200 for r in rs)

        started = time.monotonic()
        wait_for("a request for every model and adapter served", ready, 180, 2)
        result["warm_seconds"] = round(time.monotonic() - started)
        result["rendered"] = tally(passed("rendered", warm_table, requests), models, served)
        negative = run_dir / "routes-negative.json"
        negative.write_text(json.dumps(without_header_match(table, negative_route), indent=1))
        result["negative"] = tally(passed("negative", negative, requests), models, served)
        return result
    finally:
        forwarder.close()


def main_run(stack: str, root: Path, scaled_down: bool, ranks_per_pod: int | None) -> int:
    """`python -m devtools.dataplane run STACK` for a stack with `llmd-fleet:models`: render
    (its scaled copy with --scaled), build, run both passes, print the lines; 1 on a failed check."""
    import sys

    from devtools.dataplane import run as single
    from devtools.twin import cluster, manifests

    started = time.monotonic()
    twin_stack = stack
    stack, _, run_dir, logs, render = single.rendered_run(stack, root, scaled_down)
    pools = topology.pool_topologies(render)
    if ranks_per_pod is not None:
        pools = [topology.with_ranks_per_pod(t, ranks_per_pod) for t in pools]
    bins: dict[str, Path] = {}
    for target in (build.ROUTER, build.SIMULATOR):
        folder = build.ensure(target)
        for b in target.binaries:
            bins["simulator" if b == "llm-d-inference-sim" else b] = folder / b
    bins["bbr"] = build.ensure_bbr()
    # The route whose match the negative control removes: the last model's (the one with adapters
    # in the reference), so requests for names no model serves reach its pool.
    negative_route = last_model_route(topology.load_manifests(render))
    procs = single.Processes([])
    try:
        cluster.up(twin_stack, apiserver_only=True, root=root)
        kube = cluster.client(root)
        for crd in manifests.vendored_crds():
            if crd["spec"]["group"] in single.CRD_GROUPS:
                kube.apply(crd)
        namespace = pools[0].namespace
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace},
            }
        )
        wait_for(
            "router and DisaggregatedSet CRDs served",
            lambda: (
                kube.served("inference.networking.k8s.io/v1", "InferencePool")
                and kube.served("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet")
            ),
            60,
        )
        state = cluster.load_state(root)
        kubeconfig = cluster.twin_dir(root) / "kubeconfig"
        result = run(
            kube,
            render,
            pools,
            procs,
            bins,
            logs,
            run_dir,
            kubeconfig,
            state.ports["apiserver"],
            negative_route,
        )
        result["seconds"] = round(time.monotonic() - started)
        result["failures"] = checks(result)
        (run_dir / "report.json").write_text(json.dumps(result, indent=2) + "\n")
        for line in lines(result, models_of(topology.load_manifests(render))):
            print(line)
        print(f"dataplane: {stack} in {result['seconds']} s; report {run_dir}/report.json")
        for failure in result["failures"]:
            print(f"dataplane: FAIL: {failure}", file=sys.stderr)
        return 1 if result["failures"] else 0
    finally:
        procs.stop()
        netns.teardown()
        cluster.down(root)
