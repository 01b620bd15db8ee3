"""Router: EPP config (typed, round-trips, agrees with vLLM), HA workload, pool, gateway."""

import json

import pulumi
import pytest

from llmd_fleet.cli.synth import RecordingMocks, clean
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.labels import serving_labels
from llmd_fleet.layers.gateway.component import GatewayLayer, http_route_spec
from llmd_fleet.layers.router.component import (
    Router,
    epp_args,
    epp_deployment_spec,
    epp_rbac_rules,
    inference_pool_spec,
)
from llmd_fleet.layers.router.epp_config import EndpointPickerConfig, build_epp_config, epp_cpus
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.layers.serving.pod import PodInputs, serving_pod_template
from llmd_fleet.layers.serving.specs import pool_selector
from llmd_fleet.layers.serving.vllm import vllm_serve_argv
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import ENGINE_IMAGE, start_mock_engine

TOKENIZER = "http://glm52-tokenizer.llm-d.svc:8000"


@pytest.fixture
def reference(raw_config):
    config = parse_config(raw_config)
    return config, plan_fleet(config)


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def test_config_round_trips_through_the_typed_model(reference):
    config, plan = reference
    built = build_epp_config(config, plan, TOKENIZER)
    text = built.to_yaml()
    assert EndpointPickerConfig.from_yaml(text) == built
    assert EndpointPickerConfig.from_yaml(text).to_yaml() == text
    with pytest.raises(ValueError):
        EndpointPickerConfig.from_yaml(text.replace("schedulingProfiles:", "schedulingProfile:"))


def test_router_and_vllm_agree(reference):
    config, plan = reference
    epp = build_epp_config(config, plan, TOKENIZER)
    producer = epp.plugin("precise-prefix-cache-producer").parameters or {}
    names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
    pool = inference_pool_spec(config, plan, names)
    target_ports = [p["number"] for p in pool["targetPorts"]]
    for role in plan.roles:
        argv = vllm_serve_argv(config.model, getattr(config.serving.roles, role.name), role)
        # Same block size, or no event block ever matches a request block.
        assert producer["tokenProcessorConfig"]["blockSizeTokens"] == int(_flag(argv, "--block-size"))
        events = json.loads(_flag(argv, "--kv-events-config"))
        assert events["topic"].startswith(producer["kvEventsConfig"]["topicFilter"])
        # The producer dials socketPort + i for the i-th target port: local rank i's publisher.
        socket = producer["kvEventsConfig"]["podDiscoveryConfig"]["socketPort"]
        assert [socket + i for i in range(len(target_ports))] == list(role.kv_events_ports)
        # Every rank a client can reach is a pool target, in rank order.
        assert target_ports == list(role.client_ports)
    assert epp.plugin("approx-prefix-cache-producer").parameters["blockSizeTokens"] == 64  # type: ignore[index]


def test_pool_selects_exactly_the_serving_pods(reference):
    config, plan = reference
    selector = pool_selector(config)
    for role in plan.roles:
        labels = serving_labels(config.serving.name, role.name, config.model.id, "x")
        inputs = PodInputs(config.serving.name, labels, None, ENGINE_IMAGE)
        template = serving_pod_template(config, role, inputs)
        assert selector.items() <= template["metadata"]["labels"].items()
    assert pool_selector(config)["app.kubernetes.io/instance"] == "glm52"


def test_flow_control_bands_and_gate(reference):
    config, plan = reference
    epp = build_epp_config(config, plan, TOKENIZER)
    assert epp.feature_gates == ["flowControl"]
    assert epp.flow_control is not None
    assert [b.priority for b in epp.flow_control.priority_bands] == [100, 50, -10]
    assert epp.flow_control.saturation_detector.plugin_ref == "utilization-detector"


def test_ha_defaults(reference):
    config, plan = reference
    names = RouterNames(pool="glm52", namespace="llm-d")
    spec = epp_deployment_spec(config, plan, names, experimental=True)
    assert spec["replicas"] >= 2
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    args = spec["template"]["spec"]["containers"][0]["args"]
    assert "--ha-enable-leader-election" in args and "--allow-experimental-plugins" in args
    assert any(r["resources"] == ["leases"] for r in epp_rbac_rules(config))
    probes = spec["template"]["spec"]["containers"][0]
    assert probes["readinessProbe"]["grpc"] == {"port": 9003, "service": "readiness"}
    assert spec["strategy"] == {"type": "Recreate"}


def test_active_active_needs_precise_prefix(raw_config):
    raw_config["router"] = {"mode": "active-active", "prefixRouting": "approximate", "flowControl": False}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:router.mode"
    assert "prefixRouting precise" in caught.value.problems[0][1]


def test_active_active_with_precise_prefix(raw_config):
    raw_config["router"] = {"mode": "active-active", "flowControl": False, "replicas": 3}
    config = parse_config(raw_config)
    names = RouterNames(pool="glm52", namespace="llm-d")
    assert "--ha-enable-leader-election" not in epp_args(config, names, experimental=False)
    assert not any(r["resources"] == ["leases"] for r in epp_rbac_rules(config))
    spec = epp_deployment_spec(config, plan_fleet(config), names, experimental=False)
    assert spec["strategy"] == {"type": "RollingUpdate"} and spec["replicas"] == 3


def test_epp_cpu_sizing_follows_fleet_size(reference):
    _, plan = reference
    # 68 serving pods -> ~5.1 idle cores, plus 0.5 core per request/s.
    assert epp_cpus(plan, 50) == 31
    assert epp_cpus(plan, 1) == 6


def test_route_timeout_and_backend(reference):
    config, _ = reference
    route = http_route_spec(config, "glm52")
    rule = route["rules"][0]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "glm52"}
    ]
    assert rule["timeouts"]["request"] == "1800s"


@pulumi.runtime.test
def test_router_component_registers_ha_objects(reference):
    mocks = start_mock_engine(RecordingMocks())
    config, plan = reference
    router = Router("router", {"config": config, "plan": plan, "hf_token_secret": None})

    def check(_):
        kinds = {clean(r.inputs).get("kind"): clean(r.inputs) for r in mocks.created if r.custom}
        pdb = kinds["PodDisruptionBudget"]
        deployment = next(
            clean(r.inputs)
            for r in mocks.created
            if r.type == "kubernetes:apps/v1:Deployment" and r.name == "router-deployment"
        )
        assert (
            pdb["spec"]["selector"]["matchLabels"].items()
            <= deployment["spec"]["template"]["metadata"]["labels"].items()
        )
        assert kinds["InferencePool"]["spec"]["endpointPickerRef"]["failureMode"] == "FailOpen"
        objectives = [
            clean(r.inputs)
            for r in mocks.created
            if r.type == "kubernetes:llm-d.ai/v1alpha2:InferenceObjective"
        ]
        assert {o["metadata"]["name"]: o["spec"]["priority"] for o in objectives} == {
            "agent-interactive": 100,
            "agent-subagent": 50,
            "batch": -10,
        }
        assert kinds["ConfigMap"]["data"]["epp.yaml"] == router.epp_config_yaml

    return pulumi.Output.all(router.inference_pool.urn, router.deployment.urn).apply(check)


@pulumi.runtime.test
def test_istio_gateway_opts_in_to_ext_proc(raw_config):
    mocks = start_mock_engine(RecordingMocks())
    raw_config["gateway"] = {"implementation": "istio"}
    config = parse_config(raw_config)
    layer = GatewayLayer("gateway", {"config": config, "pool_name": "glm52", "install_crds": False})

    def check(_):
        gateway = next(clean(r.inputs) for r in mocks.created if r.type.endswith(":Gateway"))
        assert gateway["spec"]["gatewayClassName"] == "istio"
        assert gateway["metadata"]["labels"]["istio.io/enable-inference-extproc"] == "true"
        releases = {
            clean(r.inputs)["name"]: clean(r.inputs) for r in mocks.created if r.type.endswith(":Release")
        }
        assert (
            releases["istiod"]["values"]["pilot"]["env"]["ENABLE_GATEWAY_API_INFERENCE_EXTENSION"] == "true"
        )
        # With install_crds False only the InferenceObjective CRD (no platform ships it) is applied.
        files = [r.name for r in mocks.created if r.type == "kubernetes:yaml/v2:ConfigFile"]
        assert files == ["gateway-llm-d-router-crds"]

    return layer.address.apply(check)


def test_agentgateway_without_multi_port_pools_is_refused(raw_config, monkeypatch):
    """agentgateway before PR #1445 (v1.2.0) backs only targetPorts[0]; every rendered pool has
    more than one target port, so the pinned release must have the fix, and an older pin is refused."""
    from llmd_fleet.layers.gateway import rules
    from llmd_fleet.versions import Chart, version_tuple, versions

    config = parse_config(raw_config)
    plan = plan_fleet(config)
    names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
    assert len(inference_pool_spec(config, plan, names)["targetPorts"]) > 1
    assert config.gateway.implementation == "agentgateway"
    assert version_tuple(versions().chart("agentgateway").version) >= rules.AGENTGATEWAY_MULTI_PORT_POOLS

    old_chart = Chart(chart="agentgateway", version="v1.1.0")
    old = versions().model_copy(update={"charts": {**versions().charts, "agentgateway": old_chart}})
    monkeypatch.setattr(rules, "versions", lambda: old)
    with pytest.raises(ConfigError, match=r"gateway\.implementation.*targetPorts\[0\].*#1445"):
        parse_config(raw_config)
