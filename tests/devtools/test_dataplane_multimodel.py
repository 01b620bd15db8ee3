"""The data-plane twin's multi-model parts (devtools/dataplane/multimodel.py): pools, routes and
adapters read from the multi-model reference's rendering, and the figures, lines and checks of a
run (the run itself is `make dataplane-reference`)."""

import http.server
import json
import socket
import threading
import time
from typing import Any, ClassVar

import pytest
import yaml

from devtools.dataplane import cli, multimodel, netns, scaled, topology
from devtools.dataplane import run as dataplane
from tests.support import REPO, serve_in_background

GOLDEN = REPO / "tests" / "golden" / "onprem-h100-multimodel"
GLM = "zai-org/GLM-5.2-FP8"
SUB = "deepseek-v2-lite-chat"


def _docs() -> list[dict[str, Any]]:
    return topology.load_manifests(GOLDEN)


def _pools() -> list[topology.Topology]:
    return [topology.with_ranks_per_pod(t, 2) for t in topology.pool_topologies(GOLDEN)]


def test_one_topology_per_pool_with_its_own_pods_picker_and_objectives() -> None:
    pools = _pools()
    assert [t.pool["metadata"]["name"] for t in pools] == ["glm52", "subagent"]
    assert [t.picker.name for t in pools] == ["glm52-epp", "subagent-epp"]
    for t in pools:
        name = t.pool["metadata"]["name"]
        assert topology.selected(t.pool, t.pods) == t.pods  # the pool selects every pod of its set
        assert {o["spec"]["poolRef"]["name"] for o in t.objectives} == {name}
        assert t.serving_set["metadata"]["name"] == name
        assert t.renderer is not None and t.renderer.host == f"{name}-tokenizer.llm-d.svc"
    ips = [p.ip for t in pools for p in t.pods]
    assert len(ips) == len(set(ips))  # no two pods of the run share an address


def test_adapters_reach_the_simulator_with_its_own_base_model() -> None:
    sub = _pools()[1]
    engine = next(c for p in sub.pods for c in p.containers if c.vllm is not None)
    assert engine.vllm is not None
    assert topology.lora_names(engine.vllm) == ["team-review", "team-sql"]
    assert engine.vllm.max_loras == 2
    # The flag and its words come last: the simulator reads words up to the next flag.
    words = list(engine.args[engine.args.index("--lora-modules") + 1 :])
    modules = [json.loads(w) for w in words]
    assert [m["name"] for m in modules] == ["team-review", "team-sql"]
    assert {m["base_model_name"] for m in modules} == {"deepseek-ai/DeepSeek-V2-Lite-Chat"}
    assert "--max-loras=2" in engine.args
    glm = next(c for p in _pools()[0].pods for c in p.containers if c.vllm is not None)
    assert glm.vllm is not None and glm.vllm.lora_modules == () and "--lora-modules" not in glm.args


# Every served name and adapter of the stack's engines, in stack order (the rendered model list).
EVERY_NAME = ["zai-org--GLM-5.2-FP8", GLM, SUB, "team-review", "team-sql"]


def test_models_and_routes_as_rendered() -> None:
    models = multimodel.models_of(_docs())
    assert models == [
        multimodel.Model(GLM, "glm52", ()),
        multimodel.Model(SUB, "subagent", ("team-review", "team-sql")),
    ]
    table = multimodel.route_rules(_docs(), {"glm52": ["10.0.0.1:9002"], "subagent": ["10.0.0.2:9002"]})
    assert table["pickers"] == {"glm52": "10.0.0.1:9002", "subagent": "10.0.0.2:9002"}
    # One InferencePool backendRef per rule, rendered without a weight: Gateway API's default 1.
    assert [r["backends"] for r in table["rules"]] == [
        [{"pool": "glm52", "weight": 1}],
        [{"pool": "glm52", "weight": 1}],
        [{"pool": "subagent", "weight": 1}],
    ]
    assert "health" not in table  # no probing unless the caller gives the pickers' health ports
    by_route = [(r["route"], r["matches"][0]["headers"], r["matches"][0]["path"]) for r in table["rules"]]
    assert by_route == [
        ("glm52", [{"name": "X-Gateway-Base-Model-Name", "value": GLM}], "/"),
        ("models-list", [], "/v1/models"),
        ("subagent", [{"name": "X-Gateway-Base-Model-Name", "value": SUB}], "/"),
    ]
    # The model-list route carries its AgentgatewayPolicy's direct response, as rendered.
    (direct,) = [r["direct"] for r in table["rules"] if "direct" in r]
    assert direct["status"] == 200 and table["rules"][1]["route"] == "models-list"
    assert [m["id"] for m in json.loads(direct["body"])["data"]] == EVERY_NAME
    assert multimodel.last_model_route(_docs()) == "subagent"
    negative = multimodel.without_header_match(table, "subagent")
    assert [r["matches"][0]["headers"] for r in negative["rules"]] == [
        [{"name": "X-Gateway-Base-Model-Name", "value": GLM}],
        [],
        [],
    ]
    with pytest.raises(ValueError, match="no header match"):
        multimodel.without_header_match(negative, "subagent")


def test_requests_per_model_adapter_unserved_name_and_the_model_list() -> None:
    entries = multimodel.entries(multimodel.models_of(_docs()), {"glm52": "glm52-i", "subagent": "sub-i"})
    count = {(e["phase"], e["program"]) for e in entries}
    assert count == {
        ("model", GLM),
        ("model", SUB),
        ("lora", "team-review"),
        ("lora", "team-sql"),
        ("not-served", multimodel.NOT_SERVED_NAME),
        ("model-list", ""),
    }
    assert sum(e["program"] == "team-sql" for e in entries) == multimodel.REQUESTS
    listing = next(e for e in entries if e["phase"] == "model-list")
    assert listing["method"] == "GET" and "body" not in listing  # headers only, as a client sends it
    sql = next(e for e in entries if e["program"] == "team-sql")
    assert sql["body"]["model"] == "team-sql" and sql["headers"] == {"x-gateway-inference-objective": "sub-i"}


def _result(
    rid: str, phase: str, name: str, dest: str, pool: str, status: int = 200, **kw: Any
) -> dict[str, Any]:
    return {"id": rid, "phase": phase, "program": name, "destination": dest, "pool": pool, "status": status,
            "outcome": "served" if dest else "no-route", **kw}  # fmt: skip


def _served() -> dict[str, multimodel.Served]:
    return multimodel.served_by_endpoint(_pools())


def _endpoint(pool: int, role: str) -> str:
    pod = next(p for p in _pools()[pool].pods if p.role == role)
    return f"{pod.ip}:8000"


def _pass(glm_dest: str, lora_dest: str, unserved: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    sub = _endpoint(1, "decode")
    listed = {"data": [{"id": name} for name in EVERY_NAME]}
    return [
        _result("a", "model", GLM, glm_dest, "glm52", prefill=_endpoint(0, "prefill")),
        _result("b", "model", SUB, sub, "subagent"),
        _result("c", "lora", "team-review", lora_dest, "subagent"),
        _result("d", "lora", "team-sql", sub, "subagent"),
        unserved or _result("e", "not-served", multimodel.NOT_SERVED_NAME, "", "", status=404),
        {
            "id": "f",
            "phase": "model-list",
            "program": "",
            "route": "models-list",
            "pool": "glm52",
            "status": 200,
            "outcome": "direct",
            "listed": json.dumps(listed),
        },
    ]


def test_a_correct_pass_prints_the_lines_and_passes() -> None:
    models = multimodel.models_of(_docs())
    good = multimodel.tally(_pass(_endpoint(0, "decode"), _endpoint(1, "decode")), models, _served())
    misrouting = _result(
        "e", "not-served", multimodel.NOT_SERVED_NAME, _endpoint(1, "decode"), "subagent", 404
    )
    negative = multimodel.tally(
        _pass(_endpoint(0, "decode"), _endpoint(1, "decode"), misrouting), models, _served()
    )
    result = {"rendered": good, "negative": negative, "negative_route": "subagent"}
    assert multimodel.lines(result, models) == [
        f"models: {GLM} 1 requests -> pool glm52, {SUB} 1 requests -> pool subagent, 0 misrouted",
        "lora: team-review 1 requests on 1 endpoints, 0 misrouted",
        "lora: team-sql 1 requests on 1 endpoints, 0 misrouted",
        f"models (not served): no-such-model 1 requests -> status 404 ({multimodel.NO_ROUTE_SOURCE}: 404)",
        "models (GET /v1/models): route models-list's direct response answered 200, listing "
        f"{', '.join(sorted(EVERY_NAME))}",
        "models (negative control): subagent removed: 1 misrouted, 0 refused",
    ]
    assert multimodel.checks(result) == []


def test_misrouting_an_adapter_or_a_model_fails_the_run() -> None:
    models = multimodel.models_of(_docs())
    # team-review served by a GLM pod (its engine has no adapters), GLM by a sub-agent pod.
    bad = multimodel.tally(_pass(_endpoint(1, "decode"), _endpoint(0, "decode")), models, _served())
    assert bad["adapters"]["team-review"]["misrouted"] == 1 and bad["models"][GLM]["misrouted"] == 1
    result = {"rendered": bad, "negative": bad, "negative_route": "subagent"}
    assert multimodel.lines(result, models)[0].endswith(", 1 misrouted")
    failures = multimodel.checks(result)
    assert f"1 of {GLM}'s requests misrouted" in failures
    assert "1 of team-review's requests misrouted" in failures


def test_an_unserved_name_answered_or_a_toothless_negative_control_fails() -> None:
    models = multimodel.models_of(_docs())
    answered = _result("e", "not-served", multimodel.NOT_SERVED_NAME, _endpoint(1, "decode"), "subagent", 200)
    rendered = multimodel.tally(
        _pass(_endpoint(0, "decode"), _endpoint(1, "decode"), answered), models, _served()
    )
    clean = multimodel.tally(_pass(_endpoint(0, "decode"), _endpoint(1, "decode")), models, _served())
    failures = multimodel.checks({"rendered": rendered, "negative": clean, "negative_route": "subagent"})
    assert any("no-such-model got statuses [200]" in f for f in failures)
    assert "the negative control (subagent removed) neither misrouted nor refused" in failures


def test_a_model_list_short_of_any_engines_name_fails() -> None:
    models = multimodel.models_of(_docs())
    results = _pass(_endpoint(0, "decode"), _endpoint(1, "decode"))
    # What one pool's engines answer (the first model's, as before the model-list route).
    results[-1].update(outcome="served", route="glm52", listed=json.dumps({"data": [{"id": GLM}]}))
    t = multimodel.tally(results, models, _served())
    assert t["model_list"]["expected"] == sorted(EVERY_NAME)
    failures = multimodel.checks({"rendered": t})
    assert failures == [f"GET /v1/models listed {[GLM]}, not every engine's {sorted(EVERY_NAME)}"]
    assert multimodel.lines({"rendered": t}, models)[-1].startswith(
        "models (GET /v1/models): pool glm52 answered 200, listing"
    )


def test_scaled_copy_of_a_models_stack_keeps_one_instance_per_role_per_model() -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-h100-multimodel.yaml").read_text())
    copy = scaled.scaled_config(document)["config"]
    entries, old = copy["llmd-fleet:models"], document["config"]["llmd-fleet:models"]
    for new, was in zip(entries, old, strict=True):
        assert {n: r["instances"] for n, r in new["serving"]["roles"].items()} == {"prefill": 1, "decode": 1}
        assert new["model"] == was["model"]
    # GLM-5.2 uses the stack's workload: 3,000 agents over its 5 decode instances; the sub-agent
    # model's own 48 agents were on its one decode instance already.
    glm_decode = old[0]["serving"]["roles"]["decode"]["instances"]
    assert copy["llmd-fleet:workload"]["agents"] == 3000 // glm_decode
    assert copy["llmd-fleet:workload"]["refusedPercentile"] == "p90"
    assert entries[1]["workload"]["agents"] == 48
    nodes = sum(r["nodesPerInstance"] for e in old for r in e["serving"]["roles"].values())
    assert copy["llmd-fleet:fleet"]["nodeGroups"]["h100"]["count"] == nodes == 14
    with pytest.raises(ValueError, match=r"llmd-fleet:models\[0\]\.serving\.roles"):
        scaled.scaled_config({"config": {"llmd-fleet:models": [{"name": "x", "serving": {}}]}})


def test_the_cli_takes_a_models_stack_with_its_own_flags_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "onprem-h100-multimodel", "--scaled", "--long"]) == 2
    out = capsys.readouterr().out
    assert "sets llmd-fleet:models: its run takes --scaled, --ranks-per-pod=N and --kv-events only" in out
    assert cli._has_models("onprem-h100-multimodel") and not cli._has_models("onprem-h100")


def test_a_canary_route_lists_both_pools_with_their_weights_and_health() -> None:
    """With `serving.canary` the one rule has the stable pool and the canary's, weighted as
    rendered; the stand-in splits by those weights (gateway/routes.go chooseBackend)."""
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "glm52", "namespace": "llm-d"},
        "spec": {
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {
                            "group": "inference.networking.k8s.io",
                            "kind": "InferencePool",
                            "name": "glm52",
                            "weight": 80,
                        },
                        {"kind": "InferencePool", "name": "glm52-canary", "weight": 20},
                        {"kind": "Service", "name": "not-a-pool", "port": 80},
                    ],
                }
            ]
        },
    }
    table = multimodel.route_rules(
        [route],
        {"glm52": ["10.0.0.3:9002"], "glm52-canary": ["10.0.0.9:9002"]},
        {"glm52-canary": ["10.0.0.9:9003"]},
    )
    (rule,) = table["rules"]
    assert rule["backends"] == [{"pool": "glm52", "weight": 80}, {"pool": "glm52-canary", "weight": 20}]
    assert rule["matches"] == [{"pathType": "PathPrefix", "path": "/", "method": "", "headers": []}]
    assert table["health"] == {"glm52-canary": "10.0.0.9:9003"}


def test_every_endpoint_a_picker_can_pick_is_asked_for_its_engines_name() -> None:
    pools = _pools()
    endpoints = multimodel.pickable_endpoints(pools)
    for topo in pools:
        ports = {t["number"] for t in topo.pool["spec"]["targetPorts"]}
        for pod in topo.pods:
            mine = [e for e in endpoints if e.pod == pod.name]
            assert {e.url for e in mine} == {f"http://{pod.ip}:{p}/v1/chat/completions" for p in ports}
            engine = next(c for c in pod.containers if c.name == topology.SIMULATOR)
            assert {e.model for e in mine} == {topology.served_names(engine.args)[0]}
            if pod.role == "decode":
                # A decode pod's target ports are its routing sidecar's, not its engine's: the
                # request goes sidecar -> engine, the path that answered 503 while the engine
                # was not listening.
                sidecar = next(c for c in pod.containers if c.name != topology.SIMULATOR)
                assert ports == set(sidecar.ports) and not ports & set(engine.ports)
    assert {e.role for e in endpoints} == {"decode", "prefill"}
    body = endpoints[0].body()
    assert body["max_tokens"] == 1 and body["model"] == endpoints[0].model and not body.get("stream")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Engine(http.server.BaseHTTPRequestHandler):
    """A routing sidecar whose engine comes up late: 503 first, as the sidecar answers while its
    engine refuses connections, then 200."""

    statuses: ClassVar[list[int]] = []
    answered: ClassVar[list[float]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.answered.append(time.monotonic())
        self.send_response(status)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def _serve(port: int, statuses: list[int]) -> tuple[http.server.HTTPServer, type[_Engine]]:
    handler = type("Engine", (_Engine,), {"statuses": statuses, "answered": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    serve_in_background(server)
    return server, handler


def _ask(e: multimodel.PodEndpoint) -> int | None:
    try:
        return netns.post_status(e.url, e.body(), timeout=2)
    except OSError:
        return None


def test_the_wait_returns_only_once_an_endpoint_that_refused_then_answered_503_answers_200() -> None:
    early, late = _free_port(), _free_port()
    up, _ = _serve(early, [])
    endpoints = [
        multimodel.PodEndpoint("a", "decode", f"http://127.0.0.1:{early}/v1/chat/completions", "m"),
        multimodel.PodEndpoint("b", "decode", f"http://127.0.0.1:{late}/v1/chat/completions", "m"),
    ]
    late_server: list[tuple[http.server.HTTPServer, type[_Engine]]] = []
    # Nothing listens on b's port for 1 s (connection refused), then it answers 503 twice.
    timer = threading.Timer(1.0, lambda: late_server.append(_serve(late, [503, 503])))
    timer.start()
    ready: list[tuple[str, float]] = []
    try:
        seconds = multimodel.wait_endpoints(
            endpoints, _ask, lambda pod: ready.append((pod, time.monotonic())), timeout=30, poll=0.1
        )
        returned = time.monotonic()
    finally:
        timer.cancel()
        up.shutdown()
        for server, _ in late_server:
            server.shutdown()
    assert seconds >= 1.0
    ((_, handler),) = late_server
    assert len(handler.answered) == 1 and handler.answered[0] <= returned
    assert [pod for pod, _ in ready] == ["a", "b"]  # a Ready at once, b only after its 200
    assert ready[1][1] >= handler.answered[0]


def test_an_endpoint_that_never_answers_fails_the_wait_by_name() -> None:
    now = [0.0]
    endpoints = [
        multimodel.PodEndpoint("a", "prefill", "http://a/", "m"),
        multimodel.PodEndpoint("b", "decode", "http://b/", "m"),
    ]
    ready: list[str] = []
    with pytest.raises(TimeoutError, match=r"1 of 2 endpoints did not answer a request in 5 s: b http://b/"):
        multimodel.wait_endpoints(
            endpoints,
            lambda e: 200 if e.pod == "a" else 503,
            ready.append,
            timeout=5,
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
        )
    assert ready == ["a"]


def test_a_pod_is_created_not_ready_and_marked_ready_after() -> None:
    def conditions(ready: bool) -> dict[str, str]:
        return {
            c["type"]: c["status"] for c in dataplane.pod_status("10.244.0.9", ready)["status"]["conditions"]
        }

    assert conditions(False) == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }
    assert set(conditions(True).values()) == {"True"}
