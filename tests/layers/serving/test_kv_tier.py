"""CPU KV tier, file-system tier and peer-to-peer reuse: memory consistency, transfer config,
tier-aware routing capacities."""

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.router.epp_config import CPU_APPROX_PRODUCER, build_epp_config
from llmd_fleet.layers.serving.pod import PodInputs, disaggregated_set_spec, serving_pod_template
from llmd_fleet.layers.serving.vllm import vllm_serve_argv
from llmd_fleet.plan.fleet import GIB, P2P_PORT, PlanError, plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import ENGINE_IMAGE, stack_raw_config


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def _transfer(config, plan, role):
    argv = vllm_serve_argv(
        config.model, getattr(config.serving.roles, role), plan.role(role), config.serving.kv_tier
    )
    return json.loads(_flag(argv, "--kv-transfer-config"))


def _engine_and_volumes(config, plan, role):
    template = serving_pod_template(config, plan.role(role), PodInputs("glm52", {}, None, ENGINE_IMAGE))
    return template["spec"]["containers"][0], {v["name"]: v for v in template["spec"]["volumes"]}, template


def _gi(quantity: str) -> int:
    assert quantity.endswith("Gi")
    return int(quantity[:-2])


def test_reference_tier_sizes(raw_config):
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    for role in plan.roles:
        # (2048 - 64 system - 8 x (48 + 4) - 8 staging - sidecar) x 0.9 / 8 ranks.
        assert role.memory.cpu_tier_gib == 175
        assert role.memory.cpu_tier_tokens == 175 * GIB // 62252
        assert role.memory.cpu_tier_contexts > 15
        assert role.shm_gib == 8 + 8 * 175


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_transfer_config_combines_nixl_and_offloading(raw_config, role):
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    transfer = _transfer(config, plan, role)
    assert transfer["kv_connector"] == "MultiConnector" and transfer["kv_role"] == "kv_both"
    nixl, offload = transfer["kv_connector_extra_config"]["connectors"]
    assert nixl["kv_connector"] == "NixlConnector"
    assert nixl["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
    assert offload["kv_connector"] == "OffloadingConnector" and offload["kv_role"] == "kv_both"
    extra = offload["kv_connector_extra_config"]
    assert extra["cpu_bytes_to_use"] == plan.role(role).memory.cpu_tier_gib * GIB
    assert extra["eviction_policy"] == "lru"
    assert extra["spec_name"] == "TieringOffloadingSpec"
    assert extra["secondary_tiers"] == [{"type": "p2p", "backends": ["UCX"]}]
    # No engine_id in a child: MultiConnector passes one itself.
    assert "engine_id" not in nixl and "engine_id" not in offload


def test_offload_off_keeps_plain_nixl(raw_config):
    raw_config["serving"]["kvTier"] = {"cpuOffload": False, "peerToPeer": False}
    raw_config["workload"]["agents"] = 1000  # what the decode HBM holds without a CPU tier
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    assert _transfer(config, plan, "decode")["kv_connector"] == "NixlConnector"
    assert plan.role("decode").shm_gib == 8 and plan.role("decode").p2p_ports == ()


def test_fs_tier_on_local_nvme(raw_config):
    raw_config["serving"]["kvTier"] = {
        "secondary": {"type": "local-nvme", "hostRoot": "/mnt/nvme", "path": "/mnt/nvme/kv"}
    }
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    tiers = _transfer(config, plan, "decode")["kv_connector_extra_config"]["connectors"][1][
        "kv_connector_extra_config"
    ]
    assert tiers["secondary_tiers"][0] == {
        "type": "fs",
        "root_dir": "/var/lib/kv-tier",
        "n_read_threads": 16,
        "n_write_threads": 16,
    }
    engine, volumes, _ = _engine_and_volumes(config, plan, "decode")
    assert volumes["kv-tier"]["hostPath"] == {"path": "/mnt/nvme/kv", "type": "DirectoryOrCreate"}
    assert {"name": "kv-tier", "mountPath": "/var/lib/kv-tier"} in engine["volumeMounts"]


def test_fs_tier_on_a_pvc(raw_config):
    raw_config["serving"]["kvTier"] = {
        "secondary": {"type": "pvc", "storageClass": "fast-nvme", "sizeGiB": 2048}
    }
    config = parse_config(raw_config)
    spec = disaggregated_set_spec(
        config,
        plan_fleet(config),
        {r: PodInputs("glm52", {}, None, ENGINE_IMAGE) for r in ("prefill", "decode")},
    )
    (claim,) = spec["roles"][0]["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "kv-tier"
    assert claim["spec"]["storageClassName"] == "fast-nvme"
    assert claim["spec"]["resources"]["requests"]["storage"] == "2048Gi"


@pytest.mark.parametrize(
    ("tier", "key"),
    [
        ({"cpuOffload": False, "peerToPeer": True}, "llmd-fleet:serving.kvTier.peerToPeer"),
        ({"secondary": {"type": "pvc"}}, "llmd-fleet:serving.kvTier.secondary.storageClass"),
        ({"hostMemoryFraction": 1.5}, "llmd-fleet:serving.kvTier.hostMemoryFraction"),
    ],
)
def test_bad_tier_config(raw_config, tier, key):
    raw_config["serving"]["kvTier"] = tier
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert key in dict(caught.value.problems)


def test_tier_that_does_not_fit_is_refused(raw_config):
    raw_config["serving"]["roles"]["decode"]["hostMemoryPerRankGiB"] = 250
    with pytest.raises(PlanError) as caught:
        plan_fleet(parse_config(raw_config))
    assert (
        "before any CPU KV tier"
        in dict(caught.value.problems)["llmd-fleet:serving.roles.decode.hostMemoryPerRankGiB"]
    )


def test_p2p_wiring(raw_config):
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    decode = plan.role("decode")
    assert decode.p2p_ports == tuple(P2P_PORT + i for i in range(8))
    template = serving_pod_template(config, decode, PodInputs("glm52", {}, None, ENGINE_IMAGE))
    sidecar = template["spec"]["initContainers"][0]
    assert "--enable-p2p-pull" in sidecar["args"] and f"--p2p-connector-port={P2P_PORT}" in sidecar["args"]
    engine = template["spec"]["containers"][0]
    assert {"name": "VLLM_P2P_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"} in engine["env"]
    script = engine["command"][2]
    assert f"export VLLM_P2P_SIDE_CHANNEL_PORT=$(( {P2P_PORT} - START_RANK ))" in script
    epp = build_epp_config(config, plan, "http://t:8000")
    assert epp.plugin("p2p-source-producer").parameters == {
        "prefixMatchInfoProducerName": "precise-prefix-cache-producer",
        "prefillProfileName": "prefill",
        # llm-d's P2P guide: pull only a lead worth its transfer (the plugin's default is 1).
        "minCachedTokenDelta": 2048,
    }


def test_router_tier_capacities_match_the_plan(raw_config):
    raw_config["router"] = {"prefixRouting": "approximate"}
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    epp = build_epp_config(config, plan, "http://t:8000")
    decode = plan.role("decode")
    gpu = epp.plugin("approx-prefix-cache-producer").parameters or {}
    cpu = epp.plugin(CPU_APPROX_PRODUCER).parameters or {}
    assert gpu["lruCapacityPerServer"] == decode.memory.kv_tokens // 64
    assert cpu["lruCapacityPerServer"] == decode.memory.cpu_tier_tokens // 64
    decode_profile = next(p for p in epp.scheduling_profiles if p.name == "decode")
    assert {r.plugin_ref for r in decode_profile.plugins} >= {
        "prefix-cache-scorer",
        "cpu-prefix-cache-scorer",
    }


def test_precise_router_weights_tiers(raw_config):
    config = parse_config(raw_config)
    epp = build_epp_config(config, plan_fleet(config), "http://t:8000")
    indexer = (epp.plugin("precise-prefix-cache-producer").parameters or {})["indexerConfig"]
    weights = {b["name"]: b["weight"] for b in indexer["kvCacheBackendConfigs"]}
    assert weights["gpu"] > weights["cpu"] > 0


@settings(max_examples=80, deadline=None)
@given(
    host_memory=st.integers(512, 4096),
    per_rank=st.integers(8, 96),
    pinned=st.integers(0, 16),
    fraction=st.floats(0.1, 0.95),
    system=st.integers(16, 128),
)
def test_memory_is_consistent_for_any_valid_config(host_memory, per_rank, pinned, fraction, system):
    raw = copy.deepcopy(stack_raw_config())
    group = raw["fleet"]["nodeGroups"]["h100"]
    group["hostMemoryGiB"] = host_memory
    group["systemReservedMemoryGiB"] = system
    raw["serving"]["kvTier"] = {"hostMemoryFraction": fraction, "pinnedBuffersPerRankGiB": pinned}
    for role_name in ("prefill", "decode"):
        raw["serving"]["roles"][role_name]["hostMemoryPerRankGiB"] = per_rank
    raw["workload"]["agents"] = 1  # this test is about host memory, not the agents it holds
    config = parse_config(raw)
    try:
        plan = plan_fleet(config)
    except PlanError as exc:
        assert all(p.endswith(".hostMemoryPerRankGiB") for p, _ in exc.problems), exc
        return
    for role in plan.roles:
        ranks = role.dp_size_local
        sidecar = 1 if role.name == "decode" else 0
        # Everything the node gives pods fits: per-rank CPU tier + every reserve.
        reserves = ranks * (per_rank + pinned) + max(2, ranks) + sidecar
        assert ranks * role.memory.cpu_tier_gib + reserves <= host_memory - system
        engine, volumes, template = _engine_and_volumes(config, plan, role.name)
        limit = _gi(engine["resources"]["limits"]["memory"])
        shm = _gi(volumes["dshm"]["emptyDir"]["sizeLimit"])
        # /dev/shm holds the CPU tier (vLLM maps it there), and the limit covers shm + processes.
        assert shm == role.shm_gib >= ranks * role.memory.cpu_tier_gib
        assert limit == ranks * (per_rank + pinned) + shm
        assert engine["resources"]["requests"]["memory"] == engine["resources"]["limits"]["memory"]
        transfer = json.loads(
            _flag(
                vllm_serve_argv(
                    config.model, getattr(config.serving.roles, role.name), role, config.serving.kv_tier
                ),
                "--kv-transfer-config",
            )
        )
        offload = transfer["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]
        assert offload["cpu_bytes_to_use"] * ranks <= shm * GIB
        assert template["spec"]["containers"][0]["resources"]["limits"]["memory"] == f"{limit}Gi"
