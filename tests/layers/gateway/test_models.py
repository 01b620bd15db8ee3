"""Several models behind one gateway (`llmd-fleet:models`), as the multi-model reference stack
renders: each model's own pool, picker pair, objectives and policies; the body-based router and a
route per model; the LoRA settings; what the models share declared once."""

import json
from collections import Counter
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.synth import Recorded, synthesize
from llmd_fleet.layers.gateway.bbr import (
    BASE_MODEL_HEADER,
    BBR_GRPC_PORT,
    MODEL_HEADER,
    adapters_config_map_data,
    bbr_args,
    model_route_spec,
)
from llmd_fleet.models.deepseek_v2 import DEEPSEEK_V2_LITE_CHAT
from llmd_fleet.plan.lora import lora_elements_per_rank_unit, lora_gib_per_rank
from llmd_fleet.stack.model import model_views
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import STACKS_DIR, stack_raw_config

MULTI = "onprem-h100-multimodel"


@pytest.fixture(scope="module")
def resources() -> list[Recorded]:
    return list(synthesize(STACKS_DIR, MULTI).resources)


def _objects(resources: list[Recorded], kind: str) -> dict[str, dict[str, Any]]:
    found = {}
    for r in resources:
        if r.inputs.get("kind") == kind or r.type.endswith(f":{kind}"):
            found[r.inputs["metadata"]["name"]] = r.inputs
    return found


def test_each_model_has_its_own_pool_pickers_and_objectives(resources):
    pools = _objects(resources, "InferencePool")
    assert set(pools) == {"glm52", "subagent"}
    assert pools["subagent"]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "subagent"
    deployments = _objects(resources, "Deployment")
    for model in ("glm52", "subagent"):
        epp = deployments[f"{model}-epp"]
        assert epp["spec"]["replicas"] == 2  # the HA picker pair
        assert f"--pool-name={model}" in epp["spec"]["template"]["spec"]["containers"][0]["args"]
    objectives = _objects(resources, "InferenceObjective")
    assert {o["spec"]["poolRef"]["name"] for o in objectives.values()} == {"glm52", "subagent"}
    assert "subagent-agent-interactive" in objectives and "glm52-batch" in objectives


def test_what_models_share_is_declared_once(resources):
    names = Counter(
        (r.inputs.get("kind") or r.type.rsplit(":", 1)[-1], r.inputs.get("metadata", {}).get("name"))
        for r in resources
        if isinstance(r.inputs.get("metadata"), dict)
    )
    assert names[("Namespace", "llm-d")] == 1
    assert names[("ResourceClaimTemplate", "h100-8gpu-8nic-pcie")] == 1
    assert names[("Gateway", "llm-d-inference-gateway")] == 1
    duplicated = {key: n for key, n in names.items() if n > 1}
    assert not duplicated, duplicated


def test_routes_match_the_base_model_header_the_body_based_router_sets(resources):
    routes = _objects(resources, "HTTPRoute")
    assert set(routes) == {"glm52", "subagent", "models-list"}
    subagent = routes["subagent"]["spec"]["rules"][0]
    assert subagent["matches"][0]["headers"] == [
        {"type": "Exact", "name": BASE_MODEL_HEADER, "value": "deepseek-v2-lite-chat"}
    ]
    assert subagent["backendRefs"][0]["name"] == "subagent"
    # GET /v1/models carries no body: no model's route takes it; its own route does, and the
    # AgentgatewayPolicy on that route answers it with every model's names and adapters.
    assert len(routes["subagent"]["spec"]["rules"]) == len(routes["glm52"]["spec"]["rules"]) == 1
    (listing,) = routes["models-list"]["spec"]["rules"]
    assert listing["matches"] == [{"path": {"type": "Exact", "value": "/v1/models"}, "method": "GET"}]
    policy = _objects(resources, "AgentgatewayPolicy")["models-list"]["spec"]
    assert policy["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "models-list"}
    ]
    direct = policy["traffic"]["directResponse"]
    assert direct["status"] == 200
    listed = json.loads(direct["body"])["data"]
    assert [(m["id"], m.get("parent")) for m in listed] == [
        ("zai-org--GLM-5.2-FP8", None),
        ("zai-org/GLM-5.2-FP8", None),
        ("deepseek-v2-lite-chat", None),
        ("team-review", "deepseek-v2-lite-chat"),
        ("team-sql", "deepseek-v2-lite-chat"),
    ]
    assert policy["traffic"]["headerModifiers"]["response"]["set"] == [
        {"name": "content-type", "value": "application/json"}
    ]
    config_maps = _objects(resources, "ConfigMap")
    adapters = config_maps["subagent-adapters"]
    assert adapters["metadata"]["labels"]["inference.networking.k8s.io/bbr-managed"] == "true"
    assert adapters["data"] == {
        "baseModel": "deepseek-v2-lite-chat",
        "adapters": '["team-review", "team-sql"]',
    }
    bbr = _objects(resources, "Deployment")["body-based-router"]
    container = bbr["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == versions().image("body-based-router").ref
    assert container["args"] == bbr_args()
    ext_proc = _objects(resources, "AgentgatewayPolicy")["body-based-router"]
    assert ext_proc["spec"]["targetRefs"][0]["kind"] == "Gateway"
    assert ext_proc["spec"]["traffic"] == {
        "phase": "PreRouting",
        "extProc": {"backendRef": {"name": "body-based-router", "port": BBR_GRPC_PORT}},
    }
    policies = _objects(resources, "NetworkPolicy")
    gateway_egress = policies["body-based-router-gateway"]["spec"]["egress"]
    assert gateway_egress[0]["ports"] == [{"port": BBR_GRPC_PORT, "protocol": "TCP"}]


def test_body_based_router_flags_name_the_header_and_both_plugins():
    args = bbr_args()
    plugins = [args[i + 1] for i, a in enumerate(args) if a == "--plugin"]
    kind, name, spec = plugins[0].split(":", 2)
    assert (kind, name) == ("body-field-to-header", "model-extractor")
    assert json.loads(spec) == {"fieldName": "model", "headerName": MODEL_HEADER}
    assert plugins[1] == "base-model-to-header:base-model-mapper"
    # agentgateway calls an ext_proc Service in plaintext.
    assert "--secure-serving=false" in args


def test_a_model_without_adapters_maps_only_itself():
    views = model_views(parse_config(stack_raw_config(MULTI)))
    assert adapters_config_map_data(views[0]) == {"baseModel": "zai-org/GLM-5.2-FP8", "adapters": "[]"}
    assert model_route_spec(views[0])["rules"][0]["timeouts"] == {"request": "1800s"}


def test_lora_settings_on_the_subagent_engines_only(resources):
    sets = _objects(resources, "DisaggregatedSet")
    glm = json.dumps(sets["glm52"])
    assert "--enable-lora" not in glm and "--lora-modules" not in glm
    sub = json.dumps(sets["subagent"])
    for word in ("--enable-lora", "--max-loras 2", "--max-lora-rank 32", "allgather_reducescatter"):
        assert word in sub, word
    assert "hf download placeholder-org/deepseek-v2-lite-sql-lora --revision main" in sub


def test_lora_slot_memory_formula():
    # DeepSeek-V2-Lite, EP 8 (8 local experts): attention 16,448, dense MLP 38,976, shared experts
    # 14,592 and routed experts 8 x 10,368 per unit rank (plan/lora.py), 1 dense + 26 MoE layers.
    assert lora_elements_per_rank_unit(DEEPSEEK_V2_LITE_CHAT, 8) == 55_424 + 26 * 113_984
    # More EP ranks hold fewer experts each.
    assert lora_elements_per_rank_unit(DEEPSEEK_V2_LITE_CHAT, 16) < lora_elements_per_rank_unit(
        DEEPSEEK_V2_LITE_CHAT, 8
    )
    gib = lora_gib_per_rank(DEEPSEEK_V2_LITE_CHAT, 2, 32, 8)
    assert gib == pytest.approx(3_019_008 * 32 * 2 * 2 / 1024**3)


def _labels(objects: list[dict[str, Any]], kind: str, name: str, role: str | None = None) -> dict[str, str]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if role is not None:
        (spec,) = [r["spec"] for r in obj["spec"]["roles"] if r["name"] == role]
        return dict(spec["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"])
    return dict(obj["spec"]["template"]["metadata"]["labels"])


# (source, destination, port, allowed, why)
MODEL_FLOWS = [
    ("gateway", "glm52-decode", 8000, True, "the gateway reaches each model's pool"),
    ("gateway", "subagent-decode", 8000, True, "the gateway reaches each model's pool"),
    ("gateway", "subagent-epp", 9002, True, "ext_proc to each model's picker"),
    ("gateway", "bbr", BBR_GRPC_PORT, True, "ext_proc to the body-based router"),
    ("bbr", "api-server", 6443, True, "the body-based router watches its ConfigMaps"),
    ("other-ns-pod", "bbr", BBR_GRPC_PORT, False, "only the gateway calls the body-based router"),
    ("glm52-epp", "subagent-decode", 8003, False, "a picker reaches only its own pool"),
    ("subagent-decode", "glm52-prefill", 8000, False, "P/D stays inside one model"),
    ("subagent-decode", "subagent-prefill", 8000, True, "the sidecar runs its own model's prefill"),
]


@pytest.mark.parametrize(("source", "destination", "port", "allowed", "why"), MODEL_FLOWS)
def test_flows_between_models(rendered, source, destination, port, allowed, why):
    from tests.netpol import Cluster, Endpoint

    objects = rendered(MULTI)
    parties = {
        "gateway": Endpoint(
            "gateway",
            "10.244.4.10",
            "llm-d",
            {"gateway.networking.k8s.io/gateway-name": "llm-d-inference-gateway"},
        ),
        "bbr": Endpoint("bbr", "10.244.4.20", "llm-d", _labels(objects, "Deployment", "body-based-router")),
        "api-server": Endpoint("api-server", "192.168.10.5"),
        "other-ns-pod": Endpoint("other-ns-pod", "10.244.9.10", "default", {"app": "debug"}),
    }
    for i, model in enumerate(("glm52", "subagent")):
        for j, role in enumerate(("prefill", "decode")):
            labels = _labels(objects, "DisaggregatedSet", model, role)
            parties[f"{model}-{role}"] = Endpoint(
                f"{model}-{role}", f"10.244.{i + 1}.{10 + j}", "llm-d", labels
            )
        epp = _labels(objects, "Deployment", f"{model}-epp")
        parties[f"{model}-epp"] = Endpoint(f"{model}-epp", f"10.244.3.{10 + i}", "llm-d", epp)
    cluster = Cluster.from_objects(objects)
    assert cluster.allows(parties[source], parties[destination], port, "TCP") == allowed, why


def test_lora_affinity_scores_only_the_model_with_adapters(resources):
    config_maps = _objects(resources, "ConfigMap")

    def profiles(model: str) -> dict[str, list[str]]:
        epp = yaml.safe_load(config_maps[f"{model}-epp-config"]["data"]["epp.yaml"])
        return {p["name"]: [r["pluginRef"] for r in p["plugins"]] for p in epp["schedulingProfiles"]}

    for refs in profiles("subagent").values():
        assert "lora-affinity-scorer" in refs
    for refs in profiles("glm52").values():
        assert "lora-affinity-scorer" not in refs
