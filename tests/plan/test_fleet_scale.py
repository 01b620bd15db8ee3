"""Fleet-scale invariants: what a field-by-field comparison with upstream llm-d found, each derived
from the plan and guarded by a policy (docs/fleet-scale.md). Checked at the reference size and at
4x the nodes, since they must hold as the fleet grows."""

import copy
import json
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.synth import Recorded, synthesize
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.router.component import epp_args, epp_deployment_spec
from llmd_fleet.layers.router.epp_config import PRECISE_PRODUCER, build_epp_config
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.layers.serving.vllm import (
    ENGINE_KEEP_ALIVE_S,
    SIDECAR_IDLE_CONN_TIMEOUT_S,
    engine_env,
    kv_transfer_config,
    vllm_serve_argv,
)
from llmd_fleet.plan.fleet import GIB, PlanError, plan_fleet
from llmd_fleet.platform.dra import dra_driver_values
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.parse import parse_config
from tests.policies.helpers import DSET, edited, one, pod_container, role_pod, violations
from tests.support import REFERENCE_STACK, STACKS_DIR, stack_raw_config

TOKENIZER_URL = "http://tokenizer:8000"


def _config(scale: int = 1, **router: Any) -> StackConfig:
    """The reference stack, with `scale` times the nodes and instances of each role."""
    raw = copy.deepcopy(stack_raw_config())
    raw["fleet"]["nodeGroups"]["h100"]["count"] *= scale
    for role in raw["serving"]["roles"].values():
        role["instances"] *= scale
    raw.setdefault("router", {}).update(router)
    if router.get("expectedRequestsPerSecond", 127) < 127:
        # A slower router serves fewer agents (plan/workload.py refuses 3,000 at 10 req/s).
        raw["workload"]["agents"] = 200
    return parse_config(raw)


def router_names(config: StackConfig) -> RouterNames:
    return RouterNames(pool=config.serving.name, namespace=config.serving.namespace)


def _endpoints(config: StackConfig) -> int:
    """Rank endpoints counted from the config itself, not from the plan under test."""
    roles = config.serving.roles
    return sum(r.instances * r.data_parallel for r in (roles.prefill, roles.decode))


@pytest.mark.parametrize("scale", [1, 4])
def test_the_precise_index_keeps_a_holder_for_every_endpoint_and_tier(scale):
    config = _config(scale)
    plan = plan_fleet(config)
    producer = build_epp_config(config, plan, TOKENIZER_URL).plugin(PRECISE_PRODUCER)
    assert producer.parameters is not None
    holders = producer.parameters["indexerConfig"]["kvBlockIndexConfig"]["inMemoryConfig"]["podCacheSize"]
    tiers = 2  # HBM and the CPU offload tier, on in the reference stack
    assert holders >= _endpoints(config) * tiers
    assert _endpoints(config) == 544 * scale
    assert plan.router.index_holders == holders


@pytest.mark.parametrize("scale", [1, 4])
def test_flow_control_bounds_queued_bytes_below_the_epp_memory_limit(scale):
    config = _config(scale)
    plan = plan_fleet(config)
    epp = build_epp_config(config, plan, TOKENIZER_URL)
    assert epp.flow_control is not None and epp.flow_control.max_bytes is not None
    queue = int(epp.flow_control.max_bytes)
    bands = [int(b.max_bytes or 0) for b in epp.flow_control.priority_bands]
    assert sum(bands) == queue
    # A band holds its maxRequests typical (195k-token) bodies.
    for band in epp.flow_control.priority_bands:
        assert band.max_bytes is not None and band.max_requests is not None
        assert int(band.max_bytes) == band.max_requests * 195_000 * 4
    spec = epp_deployment_spec(config, plan, router_names(config), experimental=True)
    limit = spec["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert limit.endswith("Gi")
    limit_bytes = int(limit[:-2]) * GIB
    assert queue < limit_bytes
    # The working set at the expected rate fits beside the queue bound.
    assert queue + plan.router.working_set_gib * GIB <= limit_bytes


def test_the_epp_memory_grows_with_the_request_rate_and_an_override_below_it_is_refused():
    low, high = (
        plan_fleet(_config(expectedRequestsPerSecond=10)),
        plan_fleet(_config(expectedRequestsPerSecond=200)),
    )
    assert high.router.memory_gib > low.router.memory_gib
    derived = plan_fleet(_config()).router.memory_gib
    assert plan_fleet(_config(memoryGiB=derived + 8)).router.memory_gib == derived + 8
    with pytest.raises(PlanError) as caught:
        plan_fleet(_config(memoryGiB=16))
    ((where, message),) = caught.value.problems
    assert where == "llmd-fleet:router.memoryGiB" and f"at least {derived} GiB" in message


def test_a_p2p_tier_offloads_generated_blocks_too():
    config = _config()
    plan = plan_fleet(config)
    for role in plan.roles:
        transfer = kv_transfer_config(role.name, role, config.serving.kv_tier)
        (offload,) = [
            c
            for c in transfer["kv_connector_extra_config"]["connectors"]
            if c["kv_connector"] == "OffloadingConnector"
        ]
        assert offload["kv_connector_extra_config"]["offload_prompt_only"] is False
    no_p2p = config.serving.kv_tier.model_copy(update={"peer_to_peer": False})
    transfer = kv_transfer_config("decode", plan.role("decode"), no_p2p)
    extras = [c["kv_connector_extra_config"] for c in transfer["kv_connector_extra_config"]["connectors"]]
    assert all("offload_prompt_only" not in e for e in extras)  # vLLM's default where no peer pulls


def test_every_engine_keeps_idle_connections_longer_than_the_proxies():
    config = _config()
    plan = plan_fleet(config)
    assert ENGINE_KEEP_ALIVE_S > SIDECAR_IDLE_CONN_TIMEOUT_S
    for name in ("prefill", "decode"):
        role = getattr(config.serving.roles, name)
        env = {
            e["name"]: e.get("value")
            for e in engine_env(role, plan.role(name), 45, None, config.serving.kv_tier)
        }
        assert int(str(env["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"])) > SIDECAR_IDLE_CONN_TIMEOUT_S, name


def test_tracing_is_off_without_a_collector_and_on_with_one():
    config = _config()
    names = router_names(config)
    assert "--tracing=false" in epp_args(config, names, experimental=True)
    plan = plan_fleet(config)
    env = epp_deployment_spec(config, plan, names, experimental=True)["template"]["spec"]["containers"][0][
        "env"
    ]
    assert not any(e["name"].startswith("OTEL_") for e in env)
    traced = _config(
        tracing={"otlpEndpoint": "http://otel-collector.monitoring.svc:4317", "samplingRatio": 0.05}
    )
    assert "--tracing=true" in epp_args(traced, names, experimental=True)
    env = epp_deployment_spec(traced, plan, names, experimental=True)["template"]["spec"]["containers"][0][
        "env"
    ]
    values = {e["name"]: e.get("value") for e in env}
    assert values["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.monitoring.svc:4317"
    assert values["OTEL_TRACES_SAMPLER_ARG"] == "0.05" and values["OTEL_TRACES_EXPORTER"] == "otlp"
    raw = stack_raw_config()
    raw["router"] = {"tracing": {"otlpEndpoint": "otel:4317; rm -rf /"}}
    with pytest.raises(ConfigError):
        parse_config(raw)


def test_the_wide_ep_guide_settings_that_apply():
    config = _config()
    plan = plan_fleet(config)
    decode = config.serving.roles.decode
    for name in ("prefill", "decode"):
        argv = vllm_serve_argv(
            config.model, getattr(config.serving.roles, name), plan.role(name), config.serving.kv_tier
        )
        assert argv[argv.index("--moe-backend") + 1] == "deep_gemm"
    argv = vllm_serve_argv(config.model, decode, plan.role("decode"), config.serving.kv_tier)
    assert decode.max_num_seqs is not None
    step = decode.max_num_seqs * (1 + decode.mtp_tokens)
    assert argv[argv.index("--max-num-batched-tokens") + 1] == str(step)
    env = {
        e["name"]: e.get("value")
        for e in engine_env(decode, plan.role("decode"), 45, None, config.serving.kv_tier)
    }
    assert env["NVSHMEM_QP_DEPTH"] == str((step + 1) * 2)
    prefill = {
        e["name"]
        for e in engine_env(
            config.serving.roles.prefill, plan.role("prefill"), 45, None, config.serving.kv_tier
        )
    }
    assert "NVSHMEM_QP_DEPTH" not in prefill


def test_gke_clears_the_dra_drivers_critical_priority_classes_only_there():
    gke = dra_driver_values("/home/kubernetes/bin/nvidia", critical_priority=False)
    assert gke["kubeletPlugin"]["priorityClassName"] == "" and gke["controller"]["priorityClassName"] == ""
    onprem = dra_driver_values("/")
    assert "priorityClassName" not in onprem["kubeletPlugin"] and "controller" not in onprem


# --- The policies that guard each invariant: the reference passes, one edit fails ---------------------


@pytest.fixture(scope="module")
def reference() -> list[Recorded]:
    return list(synthesize(STACKS_DIR, REFERENCE_STACK).resources)


def _epp_yaml_edit(edit):
    def apply(inputs: dict[str, Any]) -> None:
        document = yaml.safe_load(inputs["data"]["epp.yaml"])
        edit(document)
        inputs["data"]["epp.yaml"] = yaml.safe_dump(document, sort_keys=False)

    return apply


def _producer(document: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in document["plugins"] if p["type"] == "precise-prefix-cache-producer")


def test_index_holders_policy(reference):
    assert violations("router-index-holders", reference) == []
    configmap = one(reference, ":ConfigMap", "router-config")

    def default_holders(document: dict[str, Any]) -> None:
        del _producer(document)["parameters"]["indexerConfig"]["kvBlockIndexConfig"]["inMemoryConfig"][
            "podCacheSize"
        ]

    found = violations("router-index-holders", edited(reference, configmap, _epp_yaml_edit(default_holders)))
    assert any(
        "keeps 10 holders per block key" in m and "544 rank endpoints x 2 tier(s) = 1088" in m for m in found
    ), found


def test_queue_bytes_policy(reference):
    assert violations("router-queue-bytes-bound", reference) == []
    configmap = one(reference, ":ConfigMap", "router-config")

    def unbounded(document: dict[str, Any]) -> None:
        del document["flowControl"]["maxBytes"]

    found = violations("router-queue-bytes-bound", edited(reference, configmap, _epp_yaml_edit(unbounded)))
    assert any("by count only" in m for m in found), found

    def too_big(document: dict[str, Any]) -> None:
        document["flowControl"]["maxBytes"] = "200Gi"

    found = violations("router-queue-bytes-bound", edited(reference, configmap, _epp_yaml_edit(too_big)))
    assert any("may queue 200 GiB of request bodies" in m for m in found), found


def test_p2p_offload_policy(reference):
    assert violations("p2p-offloads-generated-blocks", reference) == []
    dset = one(reference, DSET)

    def prompt_only(inputs: dict[str, Any]) -> None:
        engine = pod_container(role_pod(inputs, "decode"), "vllm")
        engine["command"][2] = engine["command"][2].replace(
            '"offload_prompt_only":false', '"offload_prompt_only":true'
        )

    found = violations("p2p-offloads-generated-blocks", edited(reference, dset, prompt_only))
    assert any("role decode" in m and "offloads prompt blocks only" in m for m in found), found


def test_keep_alive_policy(reference):
    assert violations("engine-keep-alive-outlasts-proxy", reference) == []
    dset = one(reference, DSET)

    def drop_keep_alive(inputs: dict[str, Any]) -> None:
        engine = pod_container(role_pod(inputs, "prefill"), "vllm")
        engine["env"] = [e for e in engine["env"] if e["name"] != "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]

    found = violations("engine-keep-alive-outlasts-proxy", edited(reference, dset, drop_keep_alive))
    assert any("role prefill" in m and "5 (default) s" in m for m in found), found


def test_the_plan_table_shows_the_derived_router_sizes():
    from llmd_fleet.cli.render import plan_table

    table = plan_table(plan_fleet(_config()))
    assert "podCacheSize 1360" in table and "maxBytes 10.2 GiB" in table and "memory 93 GiB" in table


def test_the_rendered_epp_config_is_json_clean():
    """Quantities are strings of digits (resource.Quantity accepts them) and survive YAML."""
    config = _config()
    text = build_epp_config(config, plan_fleet(config), TOKENIZER_URL).to_yaml()
    flow = yaml.safe_load(text)["flowControl"]
    assert isinstance(flow["maxBytes"], str) and flow["maxBytes"].isdigit()
    json.dumps(yaml.safe_load(text))
