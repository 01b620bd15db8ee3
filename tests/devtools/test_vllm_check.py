"""The vLLM argument check, without vLLM: extraction, expansion, ports, messages, self-test.

What needs vLLM itself (its parser accepting every shipped command line and rejecting each broken
one for its reason) runs in `make check-vllm`, never here: nothing in this file is skipped. The
command and the engine-configuration check are in test_vllm_check_command.py, the parser's
environment in test_vllm_check_env.py; the reference stack's rendering they share is
tests/devtools/conftest.py's.
"""

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from devtools.vllm_check.extract import (
    LaunchError,
    Pod,
    container_env,
    expand,
    group_templates,
    launch,
    stack_command_lines,
    stub_bin,
)
from devtools.vllm_check.lines import CommandLine, Finding, Origin, Problem, blamed_flag
from devtools.vllm_check.ports import (
    Binding,
    PodLaunch,
    SideChannel,
    bindings,
    offset_endpoint_port,
    port_problems,
)
from devtools.vllm_check.selftest import (
    BrokenLine,
    broken_lines,
    flag_value,
    self_test_base,
    verdicts,
    with_flag,
)
from llmd_fleet.cli.main import run
from llmd_fleet.core.yaml_documents import yaml_documents
from tests.support import REPO, vllm_stacks

# --- Kubernetes $(VAR) expansion and the container environment -----------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "a"),
        ("x-$(A)-$(B)", "x-a-b"),
        ("$(UNSET)", "$(UNSET)"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("cost: $5", "cost: $5"),
        ("trailing $", "trailing $"),
        ("open $(A", "open $(A"),
        ("START=$(( LWS_WORKER_INDEX * 8 ))", "START=$(( LWS_WORKER_INDEX * 8 ))"),
        ('"${POD_IP}" ${X:-0}', '"${POD_IP}" ${X:-0}'),
    ],
)
def test_expand_follows_the_kubelet(text, expected):
    assert expand(text, {"A": "a", "B": "b"}) == expected


def _pod(**lws: str) -> Pod:
    return Pod(
        name="set-0-1",
        namespace="ns",
        ip="10.244.0.3",
        host_ip="10.0.0.3",
        node="node-0-1",
        labels={"app": "vllm"},
        annotations={},
        lws_env=tuple(lws.items()) or (("LWS_WORKER_INDEX", "1"),),
    )


def test_container_env_resolves_like_the_kubelet():
    container: dict[str, Any] = {
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "HOST", "value": "$(POD_IP)"},
            {"name": "EARLY", "value": "$(LATE)"},
            {"name": "LATE", "value": "late"},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "HF_TOKEN"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "LWS_WORKER_INDEX", "value": "overridden by LWS"},
        ],
        "resources": {"limits": {"cpu": "64"}},
    }
    env_list = container_env(container, _pod(LWS_WORKER_INDEX="1"))
    assert env_list[0] == ("LWS_WORKER_INDEX", "1")  # LWS puts its variables first, replacing ours
    values = dict(env_list)
    assert values["HOST"] == "10.244.0.3"
    assert values["EARLY"] == "$(LATE)"  # no forward references, as in the kubelet
    assert values["APP"] == "vllm" and values["TOKEN"] == "[secret]" and values["CPUS"] == "64"


def test_group_templates_of_a_disaggregated_set_and_a_leader_worker_set():
    dset = {
        "kind": "DisaggregatedSet",
        "metadata": {"name": "glm", "namespace": "llm-d"},
        "spec": {
            "roles": [
                {"name": "prefill", "spec": {"leaderWorkerTemplate": {"size": 4, "workerTemplate": {}}}}
            ]
        },
    }
    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "solo"},
        "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": {"x": 1}, "workerTemplate": {"x": 2}}},
    }
    (group,) = group_templates(dset)
    assert (group.role, group.lws_name, group.namespace, group.size) == ("prefill", "glm-prefill", "llm-d", 4)
    (solo,) = group_templates(lws)
    assert solo.template(0) == {"x": 1} and solo.template(1) == {"x": 2}
    assert group_templates({"kind": "Deployment"}) == []


# --- Running launch scripts with stubs --------------------------------------------------------------


def test_launch_records_argv_and_the_exported_environment(tmp_path):
    script = (
        "set -euo pipefail\nfind /dev/shm -mindepth 1 -delete\nexport EXTRA=$(( LWS_WORKER_INDEX + 1 ))\n"
        'exec vllm serve m --flag "${POD_IP}" \'{"a": "b c"}\'\n'
    )
    with stub_bin() as bin_dir:
        argv, exec_env = launch(
            ["/bin/bash", "-c", script], {"LWS_WORKER_INDEX": "2", "POD_IP": "1.2.3.4"}, bin_dir
        )
    assert argv == ("vllm", "serve", "m", "--flag", "1.2.3.4", '{"a": "b c"}')
    assert dict(exec_env) == {"LWS_WORKER_INDEX": "2", "POD_IP": "1.2.3.4", "EXTRA": "3"}


def test_launch_refuses_what_does_not_exec_vllm():
    with stub_bin() as bin_dir:
        with pytest.raises(LaunchError, match="exit 3"):
            launch(["bash", "-c", "exit 3"], {}, bin_dir)
        with pytest.raises(LaunchError, match="without exec'ing vllm"):
            launch(["bash", "-c", "true"], {}, bin_dir)
        with pytest.raises(LaunchError, match="unbound"):
            launch(["bash", "-c", "set -u; exec vllm serve $UNSET"], {}, bin_dir)
        for unsafe in ("/usr/bin/find /dev/shm -delete", "rm -rf /dev/shm/*", "x; /bin/vllm serve m"):
            with pytest.raises(LaunchError, match="stubs cannot intercept"):
                launch(["bash", "-c", unsafe], {}, bin_dir)
        with pytest.raises(LaunchError, match="expected `bash -c SCRIPT`"):
            launch(["python", "serve.py"], {}, bin_dir)
        assert launch(["vllm", "serve", "m"], {"A": "1"}, bin_dir) == (("vllm", "serve", "m"), (("A", "1"),))


def test_lora_modules_must_be_downloaded_at_a_revision_first():
    """The rendered LoRA launch (layers/serving/vllm.py) passes; an adapter the script does not
    fetch, or fetches without --revision, is refused."""
    from llmd_fleet.config.model import LoraAdapterConfig, ModelConfig
    from llmd_fleet.layers.serving.vllm import lora_argv, lora_download_lines

    model = ModelConfig.model_validate(_multimodel_subagent_model())
    adapter = model.lora_adapters[0]
    assert isinstance(adapter, LoraAdapterConfig)
    serve = "exec vllm serve m " + " ".join(f"'{w}'" for w in lora_argv(model))
    fetch = "\n".join(lora_download_lines(model))
    with stub_bin() as bin_dir:
        argv, _ = launch(["bash", "-c", f"set -euo pipefail\n{fetch}\n{serve}\n"], {}, bin_dir)
        assert "--enable-lora" in argv
        with pytest.raises(LaunchError, match=f"LoRA adapter {adapter.name!r}"):
            launch(["bash", "-c", serve], {}, bin_dir)
        unpinned = fetch.replace(f"--revision {adapter.revision}", "")
        with pytest.raises(LaunchError, match="not downloaded at a --revision"):
            launch(["bash", "-c", f"{unpinned}\n{serve}\n"], {}, bin_dir)


def _multimodel_subagent_model() -> dict[str, Any]:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-h100-multimodel.yaml").read_text())
    model: dict[str, Any] = document["config"]["llmd-fleet:models"][1]["model"]
    return model


# --- Every rendered command line of every stack --------------------------------------------------


def _render(stack: str, out: Path) -> Path:
    assert run(["render", stack, "--out", str(out / stack)]) == 0
    return out / stack / "manifests"


@pytest.mark.parametrize("stack", vllm_stacks())
def test_every_worker_of_every_role_is_extracted(stack, tmp_path):
    manifests = _render(stack, tmp_path)
    lines, findings = stack_command_lines(stack, manifests)
    assert findings == [], findings
    expected = {
        (group.role, worker)
        for path in manifests.rglob("*.yaml")
        for doc in yaml_documents(path.read_text())
        if isinstance(doc, dict)
        for group in group_templates(doc)
        for worker in range(group.size)
    }
    assert expected and {(line.origin.role, line.origin.worker) for line in lines} == expected


def test_extracted_argv_is_fully_expanded_and_per_worker(reference_lines):
    for line in reference_lines:
        argv = line.argv
        assert argv[:2] == ("vllm", "serve")
        assert not any("${" in word or "$(" in word for word in argv), argv
        local = int(flag_value(argv, "--data-parallel-size-local") or 0)
        worker = line.origin.worker or 0
        assert flag_value(argv, "--data-parallel-start-rank") == str(worker * local)
        assert (
            flag_value(argv, "--data-parallel-address")
            == f"glm52-{line.origin.role}-0.glm52-{line.origin.role}.llm-d"
        )
        env_values = line.environ
        assert env_values["LWS_WORKER_INDEX"] == str(worker)
        assert env_values["VLLM_NIXL_SIDE_CHANNEL_HOST"] == env_values["POD_IP"]
        assert "PATH" not in env_values and "SHLVL" not in env_values


def test_sidecar_ports_are_part_of_the_pod(reference_lines):
    decode = next(line for line in reference_lines if line.origin.role == "decode")
    prefill = next(line for line in reference_lines if line.origin.role == "prefill")
    assert any("routing-proxy" in what for _, what in decode.pod_ports)
    assert prefill.pod_ports == ()


def test_a_stack_without_vllm_or_without_a_render_is_a_finding(tmp_path):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "ns.yaml").write_text("kind: Namespace\nmetadata: {name: x}\n")
    lines, findings = stack_command_lines("s", tmp_path / "manifests")
    assert lines == [] and "no vLLM container" in str(findings[0])
    _, missing = stack_command_lines("s", tmp_path / "absent")
    assert "llmd-fleet render s" in str(missing[0])


def test_a_failing_launch_script_is_a_finding(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    container = {"name": "vllm", "command": ["/bin/bash", "-c", "set -u\nexec vllm serve $NOPE"]}
    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "w", "namespace": "n"},
        "spec": {
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [container]}}}
        },
    }
    (manifests / "lws.yaml").write_text(json.dumps(lws))
    lines, findings = stack_command_lines("s", manifests)
    assert lines == [] and len(findings) == 2
    assert str(findings[1]).startswith(
        "s: role w, container vllm, worker 1: (command line): the launch script failed"
    )


# --- Ports -----------------------------------------------------------------------------------------


def _pod_launch(**overrides: Any) -> PodLaunch:
    base: dict[str, Any] = {
        "port": 8200,
        "ranks": tuple(range(8)),
        "multi_port": True,
        "supervisor_port": 8208,
        "dp_size": 64,
        "dp_rpc_port": 5555,
        "kv_events_endpoints": ("tcp://*:5557",),
        "side_channels": (SideChannel(5600, "VLLM_NIXL_SIDE_CHANNEL_PORT", "NixlConnector side channel"),),
    }
    return PodLaunch(**{**base, **overrides})


def test_offset_endpoint_port_mirrors_vllm():
    assert offset_endpoint_port("tcp://*:5557", 0) == "tcp://*:5557"
    assert offset_endpoint_port("tcp://*:5549", 8) == "tcp://*:5557"
    assert offset_endpoint_port("tcp://*:0", 3) == "tcp://*:0"
    assert offset_endpoint_port("inproc://cache", 2) == "inproc://cache_dp2"
    with pytest.raises(ValueError):
        offset_endpoint_port("ipc:///tmp/x", 1)


def test_bindings_of_a_multi_port_pod():
    found = bindings(_pod_launch(ranks=tuple(range(8, 16)), kv_events_endpoints=("tcp://*:5549",)))
    ports_by_flag: dict[str, list[int]] = {}
    for binding in found:
        ports_by_flag.setdefault(binding.flag, []).append(binding.port)
    assert ports_by_flag["--port"] == list(range(8200, 8208))
    assert ports_by_flag["--data-parallel-supervisor-port"] == [8208]
    assert ports_by_flag["VLLM_NIXL_SIDE_CHANNEL_PORT"] == list(range(5608, 5616))  # + global rank
    assert ports_by_flag["--kv-events-config"] == list(range(5557, 5565))
    assert "--data-parallel-rpc-port" not in ports_by_flag  # only the pod of global rank 0 binds it
    assert port_problems(found) == []


def test_two_side_channels_on_one_base_collide_on_every_rank():
    nixl = SideChannel(5600, "VLLM_NIXL_SIDE_CHANNEL_PORT", "NixlConnector side channel")
    p2p = SideChannel(5600, "VLLM_P2P_SIDE_CHANNEL_PORT", "OffloadingConnector p2p tier")
    problems = port_problems(bindings(_pod_launch(side_channels=(nixl, p2p))))
    assert [p.flag for p in problems] == ["VLLM_P2P_SIDE_CHANNEL_PORT"] * 8
    assert "OffloadingConnector p2p tier of global DP rank 0" in problems[0].message


def test_side_channels_of_nested_connectors():
    from devtools.vllm_check.checker import side_channels

    nixl = {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}
    offload = {
        "kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {"secondary_tiers": [{"type": "fs"}, {"type": "p2p"}]},
    }
    inner = {"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [offload]}}
    config = SimpleNamespace(
        kv_connector="MultiConnector", kv_connector_extra_config={"connectors": [nixl, inner]}
    )
    fake = cast(
        Any,
        SimpleNamespace(
            envs=SimpleNamespace(VLLM_NIXL_SIDE_CHANNEL_PORT="5600", VLLM_P2P_SIDE_CHANNEL_PORT="7777")
        ),
    )
    assert side_channels(fake, config) == (
        SideChannel(5600, "VLLM_NIXL_SIDE_CHANNEL_PORT", "NixlConnector side channel"),
        SideChannel(7777, "VLLM_P2P_SIDE_CHANNEL_PORT", "OffloadingConnector p2p tier"),
    )
    offload["kv_connector_extra_config"] = {"secondary_tiers": [{"type": "p2p", "port": 9000}]}
    assert side_channels(fake, config)[1] == SideChannel(
        9000, "--kv-transfer-config", "OffloadingConnector p2p tier"
    )
    assert side_channels(fake, None) == ()


def test_kv_events_base_that_hits_the_dp_handshake_port():
    # Base 5549 on the pod of ranks 0-7: rank 6 publishes on 5555, the DP handshake port.
    problems = port_problems(bindings(_pod_launch(kv_events_endpoints=("tcp://*:5549",))))
    assert [p.flag for p in problems] == ["--kv-events-config"]
    assert "port 5555 is bound twice" in problems[0].message and "global DP rank 6" in problems[0].message


def test_connect_endpoints_bind_nothing_and_sidecar_ports_count():
    launch_ = _pod_launch(
        kv_events_endpoints=("tcp://router:5557",), pod_ports=((8201, "port 8201 of container proxy"),)
    )
    problems = port_problems(bindings(launch_))
    assert len(problems) == 1 and problems[0].flag == "--port" and "container proxy" in problems[0].message


def test_ports_out_of_range_and_single_api_server():
    nixl = SideChannel(65530, "VLLM_NIXL_SIDE_CHANNEL_PORT", "NixlConnector side channel")
    found = bindings(_pod_launch(multi_port=False, side_channels=(nixl,), kv_events_endpoints=()))
    assert [b.port for b in found if b.flag == "--port"] == [8200]
    problems = port_problems(found)
    assert {p.flag for p in problems} == {"VLLM_NIXL_SIDE_CHANNEL_PORT"}
    assert all("outside 1-65535" in p.message for p in problems)
    assert port_problems([Binding(0, "--port", "API server")])[0].message.endswith("outside 1-65535")


# --- Messages ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "flag"),
    [
        ("argument --all2all-backend: invalid choice: 'x' (choose from 'a', 'b')", "--all2all-backend"),
        ("argument --speculative-config/-sc: Value {x cannot be converted", "--speculative-config"),
        ("unrecognized arguments: --no-such-flag 1", "--no-such-flag"),
        ("unrecognized arguments: stray", "stray"),
        ("Error: --enable-auto-tool-choice requires --tool-call-parser", "--enable-auto-tool-choice"),
        (
            "Error: --data-parallel-supervisor-port 8001 overlaps with child rank ports",
            "--data-parallel-supervisor-port",
        ),
        ("data_parallel_rank (64) must be in the range [0, 32)", None),
    ],
)
def test_blamed_flag(message, flag):
    assert blamed_flag(message) == flag


def test_finding_names_stack_role_container_worker_and_flag():
    origin = Origin("onprem-h100", "decode", "vllm", 3)
    finding = Finding(origin, Problem("--kv-transfer-config", "first line\nsecond line"))
    assert str(finding) == (
        "onprem-h100: role decode, container vllm, worker 3: --kv-transfer-config: "
        "first line\n    second line"
    )
    assert (
        str(Finding(Origin("s"), Problem(None, "nothing rendered"))) == "s: (command line): nothing rendered"
    )


def test_command_line_json_round_trip():
    line = CommandLine(Origin("s", "r", "c", 2), ("vllm", "serve"), (("A", "1"),), ((8000, "port 8000"),))
    assert CommandLine.from_json(json.loads(json.dumps(line.to_json()))) == line
    assert Problem.from_json(Problem("--x", "m").to_json()) == Problem("--x", "m")


# --- Self-test -------------------------------------------------------------------------------------


def test_with_flag_replaces_or_appends():
    argv = ("vllm", "serve", "m", "--port", "1", "--x=2")
    assert with_flag(argv, "--port", "9") == ("vllm", "serve", "m", "--port", "9", "--x=2")
    assert with_flag(argv, "--x", "3") == ("vllm", "serve", "m", "--port", "1", "--x=3")
    assert with_flag(argv, "--y", "4")[-2:] == ("--y", "4")
    assert flag_value(argv, "--x") == "2" and flag_value(argv, "--z") is None


def test_broken_lines_each_change_one_thing(reference_lines):
    base = self_test_base(reference_lines)
    assert base is not None and base.origin.worker == 0
    cases = broken_lines(base)
    names = [case.name for case in cases]
    for required in ("unknown flag", "bad connector name", "bad connector name nested in MultiConnector"):
        assert required in names
    assert {"bad all2all backend", "bad tool-call parser", "p2p KV tier on the NIXL side channel"} <= set(
        names
    )
    assert len(set(names)) == len(names)
    for case in cases:
        assert (case.line.argv, case.line.env) != (base.argv, base.env), case.name
        assert case.line.origin.stack == "self-test" and case.line.origin.role == case.name
    nested = next(c for c in cases if "nested" in c.name)
    transfer = json.loads(flag_value(nested.line.argv, "--kv-transfer-config") or "{}")
    assert transfer["kv_connector"] == "MultiConnector"
    assert transfer["kv_connector_extra_config"]["connectors"][1]["kv_connector"] == "OffloadConnector"


def _case(name: str = "c") -> BrokenLine:
    line = CommandLine(Origin("self-test", name, "vllm", 0), ("vllm", "serve"))
    return BrokenLine(name, line, "--all2all-backend", "invalid choice")


def test_a_case_counts_only_when_rejected_for_its_reason():
    case = _case()
    right = Finding(case.line.origin, Problem("--all2all-backend", "argument ...: invalid choice: 'x'"))
    wrong_flag = Finding(case.line.origin, Problem("--port", "invalid choice"))
    elsewhere = Finding(Origin("self-test", "other", "vllm", 0), right.problem)
    assert verdicts([case], []) == [(case, None)]
    assert verdicts([case], [wrong_flag, elsewhere]) == [(case, None)]
    assert verdicts([case], [wrong_flag, right]) == [(case, right)]
