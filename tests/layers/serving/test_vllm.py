"""The vLLM launch builder: flags per role, and the script as bash really expands it."""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from devtools.vllm_check.sysfs import fake_sysfs
from llmd_fleet.layers.serving.pod import PodInputs, serving_pod_template
from llmd_fleet.layers.serving.vllm import SYSFS_VAR, launch_script, shell_word, vllm_serve_argv
from llmd_fleet.plan.fleet import KV_EVENTS_PORT, NIXL_SIDE_CHANNEL_PORT, plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import ENGINE_IMAGE


@pytest.fixture
def reference(raw_config):
    config = parse_config(raw_config)
    return config, plan_fleet(config)


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def _run_script(script: str, tmp_path: Path, env: dict[str, str]) -> list[str]:
    """Run the launch script with `vllm` and `find` stubbed; return the argv vLLM would get,
    followed by the NIXL side-channel port it would see in its environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (
        ("vllm", 'printf "%s\\0" vllm "$@" "${VLLM_NIXL_SIDE_CHANNEL_PORT:-unset}"\n'),
        ("find", "exit 0\n"),
    ):
        stub = bin_dir / name
        stub.write_text("#!/bin/bash\n" + body)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    sysfs = tmp_path / "sys"
    # The NIC pinning reads sysfs: an 8-GPU node's (tests/layers/serving/test_nic_pinning.py).
    if not sysfs.exists():
        fake_sysfs(sysfs)
    result = subprocess.run(
        ["/bin/bash", "-c", script],
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", SYSFS_VAR: str(sysfs), **env},
        capture_output=True,
        check=True,
    )
    return result.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_role_flags(reference, role):
    config, plan = reference
    argv = vllm_serve_argv(config.model, getattr(config.serving.roles, role), plan.role(role))
    assert argv[:3] == ["vllm", "serve", "zai-org/GLM-5.2-FP8"]
    # Without a CPU tier (the builder's default when no tier is given) the transfer is NIXL
    # only; the tiered combination is tested in test_kv_tier.py.
    transfer = json.loads(_flag(argv, "--kv-transfer-config"))
    if transfer["kv_connector"] == "MultiConnector":
        transfer = transfer["kv_connector_extra_config"]["connectors"][0]
    assert transfer["kv_connector"] == "NixlConnector"
    assert transfer["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
    assert transfer["kv_load_failure_policy"] == "fail"
    assert (
        _flag(argv, "--all2all-backend")
        == {"prefill": "deepep_high_throughput", "decode": "deepep_low_latency"}[role]
    )
    assert _flag(argv, "--port") == str(plan.role(role).engine_ports[0])
    # GLM-5.2-FP8's card cannot say whether the drafter's experts are quantized: a kernel for either.
    assert json.loads(_flag(argv, "--speculative-config")) == {
        "method": "mtp",
        "num_speculative_tokens": 3,
        "moe_backend": "triton",
    }
    assert _flag(argv, "--moe-backend") == "deep_gemm"
    assert _flag(argv, "--kv-cache-dtype") == "fp8"
    assert _flag(argv, "--block-size") == "64"
    assert _flag(argv, "--tool-call-parser") == "glm47" and "--enable-auto-tool-choice" in argv
    assert _flag(argv, "--reasoning-parser") == "glm45"
    assert "--data-parallel-multi-port-external-lb" in argv and "--enable-expert-parallel" in argv
    # SIGTERM drains in-flight requests for the configured time instead of aborting them.
    assert _flag(argv, "--shutdown-timeout") == str(config.serving.drain_seconds) != "0"


def test_mtp_off_drops_the_speculative_config(raw_config):
    for role in ("prefill", "decode"):
        raw_config["serving"]["roles"][role]["mtpTokens"] = 0
    config = parse_config(raw_config)
    argv = vllm_serve_argv(config.model, config.serving.roles.decode, plan_fleet(config).role("decode"))
    assert "--speculative-config" not in argv


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_script_expands_to_the_argv_for_every_worker(reference, role, tmp_path):
    config, plan = reference
    role_plan = plan.role(role)
    launch = launch_script(config.model, getattr(config.serving.roles, role), role_plan)
    for worker in range(role_plan.lws_size):
        env = {"LWS_WORKER_INDEX": str(worker), "LWS_LEADER_ADDRESS": "glm52-0.glm52", "POD_IP": "10.0.0.7"}
        *argv, nixl_port = _run_script(launch.script, tmp_path, env)
        start = worker * role_plan.dp_size_local
        # vLLM adds the global rank to the side-channel port too: local rank 0 lands on 5600.
        assert int(nixl_port) + start == NIXL_SIDE_CHANNEL_PORT
        assert _flag(argv, "--data-parallel-start-rank") == str(start)
        assert _flag(argv, "--data-parallel-address") == "glm52-0.glm52"
        events = json.loads(_flag(argv, "--kv-events-config"))
        # vLLM adds the global rank to this port: local rank 0 lands on KV_EVENTS_PORT.
        assert int(events["endpoint"].rsplit(":", 1)[1]) + start == KV_EVENTS_PORT
        assert events["topic"] == f"kv@10.0.0.7:{role_plan.client_ports[0]}@zai-org/GLM-5.2-FP8"
        # Everything else reaches vLLM exactly as built.
        expected = [
            w.replace("${LWS_LEADER_ADDRESS}", "glm52-0.glm52").replace("${START_RANK}", str(start))
            for w in launch.argv
        ]
        assert [a for a in argv if "kv@" not in a] == [e for e in expected if "kv@" not in e]


@pytest.mark.parametrize(
    "word",
    [
        "plain",
        "it's",
        'a"b',
        "$HOME",
        "${X} and `y`",
        '{"k":"${POD_IP}"}',
        "${START_RANK}x${HOSTNAME}$(echo injected)",
        "back\\slash ${POD_IP}'${POD_IP}\"",
        "",
    ],
)
def test_shell_word_expands_only_the_scripts_own_variables(word, tmp_path):
    variables = {"X": "x", "POD_IP": "10.0.0.1", "START_RANK": "8", "HOSTNAME": "h", "HOME": "/h"}
    argv = _run_script(f"vllm {shell_word(word)}", tmp_path, variables)
    expected = word.replace("${POD_IP}", "10.0.0.1").replace("${START_RANK}", "8")
    assert argv == ["vllm", expected, "unset"]


def test_a_fractional_load_time_renders_whole_seconds_everywhere(raw_config):
    """5.5 minutes = 330 s: the engine's ready timeout, the startup probe's budget and the policy
    that holds the probe to it all count the same whole seconds."""
    raw_config["serving"]["modelLoadMinutes"] = 5.5
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    for role in ("prefill", "decode"):
        template = serving_pod_template(config, plan.role(role), PodInputs("glm52", {}, None, ENGINE_IMAGE))
        (engine,) = template["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in engine["env"]}
        assert env["VLLM_ENGINE_READY_TIMEOUT_S"] == "330"
        probe = engine["startupProbe"]
        assert 330 <= probe["periodSeconds"] * probe["failureThreshold"] < 330 + probe["periodSeconds"]
