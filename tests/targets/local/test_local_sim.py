"""The local-sim stack (docs/local-sim.md): kind local and the simulator engine. Config rules,
the plan's layout, the rendered simulator pods, the vLLM check's skip and the alerts that stay
quiet on the simulator."""

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from devtools.vllm_check import cli
from devtools.vllm_check.extract import stack_command_lines
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.serving.simulator import SIMULATOR_FLAGS, SIMULATOR_METRICS
from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import REFERENCE_STACK, STACKS_DIR, config_problems, stack_raw_config

STACK = "local-sim"
GROUP = "fleet.nodeGroups.kind"


def _set(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    *parents, leaf = path.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return raw


# (path, value, key the error names, words of its message)
LOCAL_BAD_INPUTS = [
    ("serving.engine", "vllm", "llmd-fleet:serving.engine", "must be simulator on kind local"),
    ("serving.engine", "sglang", "llmd-fleet:serving.engine", "'simulator'"),
    (f"{GROUP}.accelerator", "H100-80GB", f"llmd-fleet:{GROUP}.accelerator", "must be none on kind local"),
    (f"{GROUP}.gpusPerNode", 8, f"llmd-fleet:{GROUP}.gpusPerNode", "must be 0 on kind local"),
    (f"{GROUP}.acceleratorAllocation", "dra", f"llmd-fleet:{GROUP}.acceleratorAllocation", "Pending"),
    (f"{GROUP}.nicDeviceClass", "rdma-nic.llmd-fleet.io", f"llmd-fleet:{GROUP}.nicDeviceClass", "null"),
    (
        f"{GROUP}.nodeLabels",
        {"nvidia.com/gpu.present": "true"},
        f"llmd-fleet:{GROUP}.nodeLabels",
        "no kind node carries it",
    ),
    ("router.prefixRouting", "precise", "llmd-fleet:router.prefixRouting", "must be approximate"),
    ("serving.kvTier.cpuOffload", True, "llmd-fleet:serving.kvTier.cpuOffload", "no CPU KV tier"),
    ("serving.roles.decode.tensorParallel", 2, "llmd-fleet:serving.roles.decode.tensorParallel", "must be 1"),
    ("serving.roles.decode.dataParallel", 3, "llmd-fleet:serving.roles.decode.dataParallel", "multiple"),
    ("serving.roles.decode.dataParallel", 18, "llmd-fleet:serving.roles.decode.dataParallel", "at most 8"),
    ("serving.roles.prefill.mtpTokens", 1, "llmd-fleet:serving.roles.prefill.mtpTokens", "speculative"),
    ("serving.roles.prefill.blockSize", 256, "llmd-fleet:serving.roles.prefill.blockSize", "128"),
    ("images.build", True, "llmd-fleet:images.build", "must be false on kind local"),
    ("target.gpuDriver", "gpu-operator", "llmd-fleet:target.gpuDriver", "no GPUs"),
    ("responses", {}, "llmd-fleet:responses", "not part of the kind local try-out"),
    # Wrong, huge and hostile values of the new keys.
    (
        "serving.simulator.kvCacheBlocks",
        10**12,
        "llmd-fleet:serving.simulator.kvCacheBlocks",
        "<= 16777216 blocks",
    ),
    ("serving.simulator.kvCacheBlocks", 0, "llmd-fleet:serving.simulator.kvCacheBlocks", ">= 1 blocks"),
    ("serving.simulator.kvCacheBlocks", "2048", "llmd-fleet:serving.simulator.kvCacheBlocks", "integer"),
    (
        "serving.simulator.prefillTimePerTokenUs",
        -1,
        "llmd-fleet:serving.simulator.prefillTimePerTokenUs",
        ">= 0 microseconds",
    ),
    (
        "serving.simulator.interTokenLatencyMs",
        "20ms; rm -rf /",
        "llmd-fleet:serving.simulator.interTokenLatencyMs",
        "integer",
    ),
    (
        "serving.simulator.timeFactorUnderLoad",
        float("nan"),
        "llmd-fleet:serving.simulator.timeFactorUnderLoad",
        "finite",
    ),
    (
        "serving.simulator.timeFactorUnderLoad",
        0.5,
        "llmd-fleet:serving.simulator.timeFactorUnderLoad",
        ">= 1",
    ),
    ("serving.simulator.mode", "--port=1", "llmd-fleet:serving.simulator.mode", "'random'"),
    ("serving.simulator.zmqEndpoint", "tcp://x:1", "llmd-fleet:serving.simulator.zmqEndpoint", "unknown key"),
    (
        "serving.preflight.enabled",
        True,
        "llmd-fleet:serving.preflight.enabled",
        "must be false with engine simulator",
    ),
    (
        "serving.simulator.memoryMiBPerRank",
        10**9,
        "llmd-fleet:serving.simulator.memoryMiBPerRank",
        "<= 65536 MiB per data-parallel rank",
    ),
]


@pytest.mark.parametrize(("path", "value", "key", "words"), LOCAL_BAD_INPUTS)
def test_bad_local_input_names_its_key(path, value, key, words):
    problems = config_problems(_set(stack_raw_config(STACK), path, value))
    assert any(p == key and words in m for p, m in problems), problems


# The H100 stacks refuse what is only for kind local.
GPU_BAD_INPUTS = [
    ("serving.engine", "simulator", "llmd-fleet:serving.engine", "only for kind local"),
    (
        "fleet.nodeGroups.h100.accelerator",
        "none",
        "llmd-fleet:fleet.nodeGroups.h100.accelerator",
        "only for kind local",
    ),
    ("fleet.nodeGroups.h100.gpusPerNode", 0, "llmd-fleet:fleet.nodeGroups.h100.gpusPerNode", "must be 8"),
    (
        "fleet.nodeGroups.h100.acceleratorAllocation",
        "none",
        "llmd-fleet:fleet.nodeGroups.h100.acceleratorAllocation",
        "only for kind local",
    ),
    (
        "fleet.nodeGroups.h100.cpusPerNode",
        8,
        "llmd-fleet:fleet.nodeGroups.h100.cpusPerNode",
        ">= 16 CPUs on GPU",
    ),
    (
        "fleet.nodeGroups.h100.hostMemoryGiB",
        32,
        "llmd-fleet:fleet.nodeGroups.h100.hostMemoryGiB",
        ">= 64 GiB on GPU nodes",
    ),
    ("serving.simulator", {"kvCacheBlocks": 10}, "llmd-fleet:serving.simulator", "only for engine simulator"),
    # The 5-minute floor stays for vLLM engines; only the simulator may declare less.
    ("serving.modelLoadMinutes", 4, "llmd-fleet:serving.modelLoadMinutes", "must be >= 5 with engine vllm"),
]


@pytest.mark.parametrize(("path", "value", "key", "words"), GPU_BAD_INPUTS)
def test_gpu_stacks_refuse_the_local_only_values(path, value, key, words):
    problems = config_problems(_set(stack_raw_config(REFERENCE_STACK), path, value))
    assert any(p == key and words in m for p, m in problems), problems


@pytest.mark.parametrize(
    ("minutes", "seconds"), [(1, 60), (4, 240), (0.25, 15), (0.5, 30), (0.1, 6), (2.5, 150), (1 / 60, 1)]
)
def test_a_simulator_engine_may_declare_a_load_under_five_minutes(minutes, seconds):
    raw = _set(stack_raw_config(STACK), "serving.modelLoadMinutes", minutes)
    serving = parse_config(raw).serving
    assert serving.model_load_minutes == minutes
    assert serving.model_load_seconds == seconds
    assert isinstance(serving.model_load_seconds, int)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, "must be > 0 minutes"),
        (-1, "must be > 0 minutes"),
        (240.5, "must be <= 240 minutes"),
        # Fractions of a second: what probes, timeouts and cooldowns count is whole seconds.
        (0.123, "a whole number of seconds"),
        (0.001, "a whole number of seconds"),
        (0.5001, "a whole number of seconds"),
        (float("nan"), "finite number"),
        (float("inf"), "finite number"),
        (True, "valid number"),
        ("0.25", "valid number"),
    ],
)
def test_a_load_time_that_is_no_positive_whole_number_of_seconds_is_refused(value, words):
    problems = config_problems(_set(stack_raw_config(STACK), "serving.modelLoadMinutes", value))
    assert [p for p, _ in problems] == ["llmd-fleet:serving.modelLoadMinutes"], problems
    assert words in problems[0][1], problems


def test_a_vllm_engine_keeps_the_five_minute_floor_with_fractions():
    problems = config_problems(_set(stack_raw_config(REFERENCE_STACK), "serving.modelLoadMinutes", 4.5))
    assert any(p == "llmd-fleet:serving.modelLoadMinutes" and "must be >= 5" in m for p, m in problems)
    serving = parse_config(_set(stack_raw_config(REFERENCE_STACK), "serving.modelLoadMinutes", 5.5)).serving
    assert serving.model_load_seconds == 330


def test_the_simulator_is_kind_locals_default_engine():
    raw = stack_raw_config(STACK)
    del raw["serving"]["engine"]
    assert parse_config(raw).serving.engine == "simulator"
    assert parse_config(stack_raw_config(REFERENCE_STACK)).serving.engine == "vllm"


def test_the_preflight_is_off_for_the_simulator_unless_asked_for_and_on_for_vllm():
    assert parse_config(stack_raw_config(STACK)).serving.preflight.enabled is False
    assert parse_config(stack_raw_config(REFERENCE_STACK)).serving.preflight.enabled is True


def test_the_simulator_stack_renders_no_preflight(rendered):
    names = [o["metadata"]["name"] for o in rendered(STACK)]
    assert [n for n in names if "preflight" in n] == []


@pytest.mark.parametrize(
    ("path", "value", "key", "words"),
    [
        ("serving.simulator.kvCacheBlocks", 100, "llmd-fleet:serving.simulator.kvCacheBlocks", "6400 tokens"),
        (
            "serving.simulator.cpuMillisPerRank",
            4000,
            "llmd-fleet:serving.simulator.cpuMillisPerRank",
            "7000m",
        ),
        ("serving.simulator.memoryMiBPerRank", 65536, "llmd-fleet:serving.simulator.memoryMiBPerRank", "MiB"),
    ],
)
def test_the_plan_refuses_what_a_kind_node_cannot_hold(path, value, key, words):
    with pytest.raises(PlanError) as caught:
        plan_fleet(parse_config(_set(stack_raw_config(STACK), path, value)))
    assert any(p == key and words in m for p, m in caught.value.problems), caught.value.problems


def test_plan_keeps_the_layout_and_sizes_nothing_from_hbm():
    config = parse_config(stack_raw_config(STACK))
    plan = plan_fleet(config)
    prefill, decode = plan.role("prefill"), plan.role("decode")
    assert plan.gpus == 0 and plan.nodes == 3
    # vLLM's rank and client ports: prefill serves on 8000+, decode's sidecar 8000+ -> 8200+.
    assert prefill.engine_ports == (8000, 8001) and prefill.client_ports == (8000, 8001)
    assert decode.engine_ports == (8200, 8201) and decode.client_ports == (8000, 8001)
    assert decode.start_ranks == (0, 2) and decode.lws_size == 2 and decode.dp_size_local == 2
    # What the simulator does not have is not planned.
    for role in plan.roles:
        assert role.supervisor_port is None and role.claim is None
        assert role.kv_events_ports == role.nixl_side_channel_ports == role.p2p_ports == ()
        assert role.memory.hbm_gib == 0 and role.shm_gib == 0
        assert role.memory.kv_tokens == config.serving.simulator.kv_cache_blocks * 64
    assert prefill.pod_cpu_millis == 500 and decode.pod_memory_mib == 512
    assert plan.router.endpoints == 6


def _roles(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (dset,) = [o for o in objects if o["kind"] == "DisaggregatedSet"]
    return {r["name"]: r["spec"]["leaderWorkerTemplate"]["workerTemplate"] for r in dset["spec"]["roles"]}


_DURATION = re.compile(r"^[0-9]+(ns|us|µs|ms|s|m|h)$")


def _value_ok(kind: str, value: str) -> bool:
    if kind == "int":
        return re.fullmatch(r"-?[0-9]+", value) is not None
    if kind == "float":
        return re.fullmatch(r"[0-9]+(\.[0-9]+)?", value) is not None
    if kind == "duration":
        return _DURATION.match(value) is not None
    if kind == "bool":
        return value in ("true", "false")
    return kind in ("string", "strings")


def test_simulator_pods_carry_only_the_simulators_flags(rendered):
    for name, template in _roles(rendered(STACK)).items():
        (engine,) = template["spec"]["containers"]
        assert engine["image"] == versions().image("inference-sim").ref
        assert "command" not in engine, "the image's entrypoint is the simulator itself"
        words = list(engine["args"])
        while words:
            word = words.pop(0)
            flag, eq, value = word.removeprefix("--").partition("=")
            assert word.startswith("--"), f"{name}: {word!r} is not a flag"
            assert flag in SIMULATOR_FLAGS, f"{name}: {flag} is not a flag of the pinned simulator"
            if not eq:
                # Only a list flag takes its values as the words up to the next flag, as vLLM.
                assert SIMULATOR_FLAGS[flag] == "strings", f"{name}: {word!r} is not one --flag=value word"
                values = []
                while words and not words[0].startswith("-"):
                    values.append(words.pop(0))
                assert values, f"{name}: {word} has no values"
                continue
            if value or SIMULATOR_FLAGS[flag] != "string":
                assert _value_ok(SIMULATOR_FLAGS[flag], value), (name, word)


def test_simulator_pods_have_nothing_of_vllm_on_gpus(rendered):
    objects = rendered(STACK)
    kinds = {o["kind"] for o in objects}
    assert "ResourceClaimTemplate" not in kinds and "DeviceClass" not in kinds
    for name, template in _roles(objects).items():
        spec = template["spec"]
        assert "resourceClaims" not in spec and "tolerations" not in spec, name
        assert all(v.get("emptyDir", {}).get("medium") != "Memory" for v in spec["volumes"]), name
        assert not any("hostPath" in v for v in spec["volumes"]), name
        for container in (*spec["containers"], *spec.get("initContainers", ())):
            resources = container["resources"]
            assert set(resources["limits"]) == {"cpu", "memory"}, (name, container["name"])
            assert resources["requests"] == resources["limits"]
            context = container["securityContext"]
            assert context["runAsNonRoot"] and context["capabilities"] == {"drop": ["ALL"]}
            names = {e["name"] for e in container.get("env", ())}
            assert not {n for n in names if n.split("_")[0] in ("NVSHMEM", "NCCL", "UCX", "VLLM", "FI")}
    decode = _roles(objects)["decode"]["spec"]
    (sidecar,) = decode["initContainers"]
    assert "--data-parallel-size=2" in sidecar["args"] and "--kv-connector=nixlv2" in sidecar["args"]
    assert not any(a.startswith("--enable-p2p-pull") for a in sidecar["args"])
    assert "initContainers" not in _roles(objects)["prefill"]["spec"]
    (pool,) = [o for o in objects if o["kind"] == "InferencePool"]
    assert [p["number"] for p in pool["spec"]["targetPorts"]] == [8000, 8001]


def test_kind_local_installs_no_accelerator_drivers():
    from llmd_fleet.cli.synth import synthesize

    types = {r.type for r in synthesize(STACKS_DIR, STACK).resources}
    names = {r.name for r in synthesize(STACKS_DIR, STACK).resources}
    assert "llmd-fleet:platform:AcceleratorPlatform" not in types
    assert not {n for n in names if "dra" in n or "gpu-operator" in n}
    assert "llmd-fleet:serving:ModelServing" in types and "llmd-fleet:router:Router" in types


# --- make check-vllm -------------------------------------------------------------------------------


def _copy_stacks(tmp_path: Path, *stacks: str) -> Path:
    for stack in stacks:
        shutil.copy(STACKS_DIR / f"Pulumi.{stack}.yaml", tmp_path / f"Pulumi.{stack}.yaml")
    return tmp_path


def test_the_vllm_check_skips_a_stack_for_its_simulator_engine_only(tmp_path):
    stacks = _copy_stacks(tmp_path, STACK, REFERENCE_STACK)
    reason = cli.skip_reason(stacks, STACK)
    assert reason is not None and "serving.engine is simulator" in reason
    assert cli.skip_reason(stacks, REFERENCE_STACK) is None
    # The same file with the engine line removed still runs the simulator (kind local's
    # default) and is still skipped: the verdict follows the validated config, not the text.
    text = (stacks / f"Pulumi.{STACK}.yaml").read_text()
    (stacks / f"Pulumi.{STACK}.yaml").write_text(text.replace("    engine: simulator\n", ""))
    assert cli.skip_reason(stacks, STACK) == reason
    # A stack file that does not validate is an error, never a skip.
    (stacks / f"Pulumi.{STACK}.yaml").write_text(text.replace("engine: simulator", "engine: vllm"))
    with pytest.raises(ConfigError):
        cli.skip_reason(stacks, STACK)


def test_the_skipped_stack_really_has_no_vllm_command_line(tmp_path):
    from llmd_fleet.cli.main import run

    out = tmp_path / STACK
    assert run(["render", STACK, "--out", str(out)]) == 0
    lines, findings = stack_command_lines(STACK, out / "manifests")
    assert lines == [] and "no vLLM container" in str(findings[0])


def test_check_prints_the_skip_and_never_passes_on_skips_alone(tmp_path, monkeypatch, capsys):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    _copy_stacks(stacks, STACK)
    read: list[str] = []

    def stack_command_lines(stack: str, manifests: Path) -> tuple[list[Any], list[Any]]:
        read.append(stack)
        return [], []

    monkeypatch.setattr(cli, "stack_command_lines", stack_command_lines)
    assert cli.check([STACK], tmp_path / "build", stacks) == 1
    out = capsys.readouterr().out
    assert f"{STACK}: skipped: serving.engine is simulator" in out
    assert "every stack was skipped: nothing was checked" in out
    assert read == [], "a skipped stack's manifests are never read"
    (stacks / f"Pulumi.{STACK}.yaml").write_text("config: {}\n")
    assert cli.check([STACK], tmp_path / "build", stacks) == 1
    assert "error: local-sim:" in capsys.readouterr().out


# --- Alerts on the simulator ------------------------------------------------------------------------

# The alerts that read a metric the simulator does not serve (docs/local-sim.md).
QUIET_ON_THE_SIMULATOR = {
    "VllmPreemptions",
    "NixlTransferFailures",
    "NixlTransferSlow",
    "PrefixCacheHitRateCollapse",
}


def test_alerts_quiet_on_the_simulator_are_the_documented_ones(rendered):
    (rule,) = [o for o in rendered(STACK) if o["kind"] == "PrometheusRule"]
    served = set(SIMULATOR_METRICS)
    quiet = set()
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            names = set(re.findall(r"vllm:[a-z_:]+", alert["expr"]))
            families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
            if families - served:
                quiet.add(alert["alert"])
    assert quiet == QUIET_ON_THE_SIMULATOR
    assert "DecodeKvCacheSaturated" not in quiet, "vllm:kv_cache_usage_perc is served"
    doc = (STACKS_DIR.parent / "docs" / "local-sim.md").read_text()
    assert all(f"`{name}`" in doc for name in QUIET_ON_THE_SIMULATOR)


def test_kind_local_scrapes_nothing_unless_asked():
    raw = stack_raw_config(STACK)
    del raw["observability"]
    config = parse_config(raw)
    assert config.observability.prometheus == "none"
    assert {g.nic_gbps for g in config.fleet.node_groups.values()} == {10}
    assert parse_config(stack_raw_config(STACK)).observability.prometheus == "install"


def test_vllm_on_kind_local_is_one_clear_error():
    problems = config_problems(_set(stack_raw_config(STACK), "serving.engine", "vllm"))
    assert [p for p, _ in problems] == ["llmd-fleet:serving.engine"], problems


def test_the_plan_table_shows_the_emulated_cache_not_hbm():
    from llmd_fleet.cli.render import plan_table

    table = plan_table(plan_fleet(parse_config(stack_raw_config(STACK))))
    assert "| emulated KV tokens per rank | 131,072 | 131,072 |" in table
    assert "| simulator pod memory / CPU | 512Mi / 500m | 512Mi / 500m |" in table
    assert "HBM" not in table and "NVSHMEM" not in table
    reference = plan_table(plan_fleet(parse_config(stack_raw_config(REFERENCE_STACK))))
    assert "HBM per GPU" in reference and "emulated" not in reference
