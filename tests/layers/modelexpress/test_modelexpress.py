"""ModelExpress weight loading (`serving.weightLoading: modelexpress`, docs/llm-d-1.0.md): the
server's objects, the engines' flag, env and ports, the plan's startup budget, and the stack
rendering, checking and passing the policy pack with it on."""

import functools
import shutil
from pathlib import Path

import pytest
import yaml

from llmd_fleet.cli.check import check_manifests
from llmd_fleet.cli.policy_check import load_policy_config, run_policy_pack
from llmd_fleet.cli.render import render_files
from llmd_fleet.cli.synth import Synthesis, synthesize
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.core.yaml_documents import yaml_documents
from llmd_fleet.layers.serving.vllm import engine_env, startup_budget_seconds, vllm_serve_argv
from llmd_fleet.plan.fleet import (
    DP_RPC_PORT,
    plan_fleet,
)
from llmd_fleet.plan.weight_load import MX_SOURCE_ATTEMPTS
from llmd_fleet.policies.rules import serving as serving_rules
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import REPO, STACKS_DIR, stack_raw_config

MX_STACK = "eks-h100"


def _mx(stack: str = MX_STACK):
    raw = stack_raw_config(stack)
    raw["serving"]["weightLoading"] = "modelexpress"
    raw.setdefault("images", {})["build"] = True
    if stack == "onprem-h100":
        raw["images"]["registry"] = "registry.example.internal:5000/llmd"
    return parse_config(raw)


def _env(config, role="decode"):
    plan = plan_fleet(config)
    role_config = getattr(config.serving.roles, role)
    env = engine_env(role_config, plan.role(role), 45, None, config.serving.kv_tier, "mx.example:8001")
    return {e["name"]: e.get("value") for e in env}


def test_hub_is_the_default_and_loads_as_before(raw_config):
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    decode = plan.role("decode")
    assert config.serving.weight_loading == "hub"
    assert "--load-format" not in vllm_serve_argv(config.model, config.serving.roles.decode, decode)
    assert startup_budget_seconds(decode, 2700) == config.serving.model_load_seconds
    assert not any(name.startswith("MX_") for name in _env(config))


def test_modelexpress_needs_the_built_image(raw_config):
    raw_config["serving"]["weightLoading"] = "modelexpress"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:serving.weightLoading"
    raw_config["serving"]["weightLoading"] = "disk"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:serving.weightLoading"


@pytest.mark.parametrize(
    ("stack", "fabric_env"),
    [
        ("eks-h100", {"MX_NIXL_BACKEND": "LIBFABRIC"}),
        ("onprem-h100", {"MX_NIXL_BACKEND": "UCX", "MX_RDMA_NIC_PIN": "auto"}),
        ("gke-h100", {"MX_NIXL_BACKEND": "UCX"}),
    ],
)
def test_flag_env_and_ports_per_fabric(stack, fabric_env):
    config = _mx(stack)
    plan = plan_fleet(config)
    for role in plan.roles:
        argv = vllm_serve_argv(config.model, getattr(config.serving.roles, role.name), role)
        assert argv[argv.index("--load-format") + 1] == "modelexpress"
        env = _env(config, role.name)
        assert env["MX_SERVER_ADDRESS"] == "mx.example:8001"
        assert env["MX_WORKER_HOST"] == "$(POD_IP)"
        assert {k: env.get(k) for k in fabric_env} == fabric_env
        if "MX_RDMA_NIC_PIN" not in fabric_env:
            assert "MX_RDMA_NIC_PIN" not in env
        weights = role.weights
        assert weights is not None
        # The client's default metadata port is our DP RPC port: the plan moves it.
        assert int(env["MX_METADATA_PORT"]) != DP_RPC_PORT
        ports = [p for group in role.pod_ports().values() for p in group]
        assert len(ports) == len(set(ports)), role.pod_ports()
        assert len(weights.metadata_ports) == role.gpus_per_node == len(weights.worker_grpc_ports)
        # The probe covers the hub load plus every peer attempt before the client falls back.
        assert env["MX_TRANSFER_TIMEOUT"] == str(weights.transfer_timeout_seconds)
        budget = config.serving.model_load_seconds + MX_SOURCE_ATTEMPTS * weights.transfer_timeout_seconds
        assert role.startup_seconds == budget == int(env["VLLM_ENGINE_READY_TIMEOUT_S"])
        assert weights.transfer_timeout_seconds >= 4 * weights.peer_transfer_seconds


def test_peer_estimate_follows_the_fabric():
    onprem = plan_fleet(_mx("onprem-h100")).role("decode").weights
    gke = plan_fleet(_mx("gke-h100")).role("decode").weights
    assert onprem is not None and gke is not None
    # A3 Mega moves a GPU's weights at half the line rate of a 400G ConnectX-7.
    per_gib_onprem = onprem.peer_transfer_seconds
    per_gib_gke = gke.peer_transfer_seconds
    assert per_gib_gke > per_gib_onprem > 0


@functools.cache
def _synthesis(tmp: str) -> Synthesis:
    stacks = Path(tmp)
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{MX_STACK}.yaml").read_text())
    document["config"]["llmd-fleet:serving"]["weightLoading"] = "modelexpress"
    (stacks / f"Pulumi.{MX_STACK}.yaml").write_text(yaml.safe_dump(document))
    shutil.copy(REPO / "Pulumi.yaml", stacks / "Pulumi.yaml")
    return synthesize(stacks, MX_STACK)


@pytest.fixture(scope="module")
def mx_synthesis(tmp_path_factory) -> Synthesis:
    return _synthesis(str(tmp_path_factory.mktemp("stacks")))


def _objects(synthesis: Synthesis) -> list[dict]:
    files = render_files(synthesis)
    return [
        doc
        for path, text in sorted(files.items())
        if path.startswith("manifests/")
        for doc in yaml_documents(text)
        if doc is not None
    ]


def test_server_objects_and_pod_contract(mx_synthesis):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in _objects(mx_synthesis)}
    name = "glm52-modelexpress"
    deployment = objects[("Deployment", name)]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == versions().image("modelexpress-server").ref
    assert {e["name"]: e.get("value") for e in container["env"]}["MX_METADATA_BACKEND"] == "kubernetes"
    assert container["ports"] == [{"name": "grpc", "containerPort": 8001, "protocol": "TCP"}]
    assert objects[("Service", name)]["spec"]["ports"][0]["port"] == 8001
    role = objects[("Role", name)]
    assert {r for rule in role["rules"] for r in rule["resources"]} >= {"modelmetadatas", "configmaps"}
    assert ("RoleBinding", name) in objects and ("ServiceAccount", name) in objects
    server_policy = objects[("NetworkPolicy", "glm52-modelexpress-server")]
    assert server_policy["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8001}]
    remote = render_files(mx_synthesis)
    assert any(
        versions().manifest("modelexpress-crds").url in text
        for p, text in remote.items()
        if p.startswith("remote/")
    )


def test_variant_passes_the_schemas(mx_synthesis, tmp_path):
    for path, text in render_files(mx_synthesis).items():
        if path.startswith("manifests/"):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(text)
    count, findings = check_manifests(
        tmp_path / "manifests", mx_synthesis.config.target.kubernetes_version, []
    )
    assert count > 0 and findings == []


def test_variant_passes_the_policy_pack(mx_synthesis):
    config = load_policy_config(REPO / "policies" / "config" / f"{MX_STACK}.json")
    report = run_policy_pack(list(mx_synthesis.resources), MX_STACK, policy_config=config)
    assert report.mandatory == (), [v.line() for v in report.mandatory]
    assert "modelexpress-ports-clear" in [p.name for p in report.policies]


def test_port_rule_catches_the_upstream_default(mx_synthesis):
    from tests.policies.helpers import DSET, edited, one, pod_container, role_pod, violations

    resources = list(mx_synthesis.resources)
    assert violations("modelexpress-ports-clear", resources) == []

    def default_port(inputs):
        engine = pod_container(role_pod(inputs, "decode"), "vllm")
        engine["env"] = [e for e in engine["env"] if e["name"] != "MX_METADATA_PORT"]

    found = violations("modelexpress-ports-clear", edited(resources, one(resources, DSET), default_port))
    assert len(found) == 1
    # The client's default base lands on the DP coordinator and the KV-event publishers.
    assert (
        "MX_METADATA_PORT 5555-5562 (one per GPU) collides with 5555 (--data-parallel-rpc-port)" in found[0]
    )
    assert "5557 (container port kv-events-0)" in found[0]
    assert serving_rules.MX_PORT_DEFAULTS["MX_METADATA_PORT"] == DP_RPC_PORT
