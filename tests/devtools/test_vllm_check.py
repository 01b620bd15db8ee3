"""The vLLM argument check, without vLLM: extraction, expansion, ports, messages, self-test, env.

What needs vLLM itself (its parser accepting every shipped command line and rejecting each broken
one for its reason) runs in `make check-vllm`, never here: nothing in this file is skipped.
"""

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from devtools.vllm_check import cli, env
from devtools.vllm_check.deps import mismatches
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
from llmd_fleet.versions import versions
from tests.support import REFERENCE_STACK, REPO, vllm_stacks

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


@pytest.fixture(scope="module")
def reference_manifests(tmp_path_factory) -> Path:
    return _render(REFERENCE_STACK, tmp_path_factory.mktemp("render"))


@pytest.fixture(scope="module")
def reference_lines(reference_manifests) -> list[CommandLine]:
    lines, findings = stack_command_lines(REFERENCE_STACK, reference_manifests)
    assert findings == []
    return lines


@pytest.mark.parametrize("stack", vllm_stacks())
def test_every_worker_of_every_role_is_extracted(stack, tmp_path):
    manifests = _render(stack, tmp_path)
    lines, findings = stack_command_lines(stack, manifests)
    assert findings == [], findings
    expected = {
        (group.role, worker)
        for path in manifests.rglob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
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


# --- The command: a check that did not see the defects never passes ------------------------------


def _accept_engines(python, version, jobs):
    """A stand-in engine-configuration check: every engine accepted, every control refused for
    its reason."""
    return [
        *({"accepted": {"attention_backend": "X"}} for _ in jobs.engines),
        *({"refused": f"vLLM says: {control.expect}"} for control in jobs.controls),
    ]


def _fake_check(monkeypatch, tmp_path, answer, engine_config=_accept_engines, moe=None) -> None:
    """Replace both vLLM processes: `answer(python, version, lines)` gives the argument check's
    findings, `engine_config` the configuration results and `moe(jobs)` the MoE oracle's."""
    monkeypatch.setattr(env, "ensure", lambda version=None: tmp_path / "venv" / "bin" / "python")

    def checker(python, version, lines, jobs=None):
        jobs = jobs or cli.EngineJobs()
        refusals = moe(jobs) if moe is not None else [None] * len(jobs.all)
        return answer(python, version, lines), refusals, {d: None for d in jobs.models()}

    monkeypatch.setattr(cli, "run_checker", checker)
    monkeypatch.setattr(cli, "run_engine_config", engine_config)


def test_check_fails_when_the_self_test_is_accepted(reference_manifests, monkeypatch, tmp_path, capsys):
    _fake_check(monkeypatch, tmp_path, lambda python, version, lines: [])
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert "FAILED  unknown flag: expected --no-such-flag 'unrecognized arguments', got: accepted" in out
    assert "were not rejected for their reason" in out


def _reject_self_test(python, version, lines):
    """A stand-in checker that rejects exactly the self-test's broken lines as vLLM would."""
    base = self_test_base(lines)
    assert base is not None
    cases = {case.line.origin: case for case in broken_lines(base)}
    return [
        Finding(line.origin, Problem(cases[line.origin].flag, cases[line.origin].reason))
        for line in lines
        if line.origin in cases
    ]


def test_check_passes_only_clean_stacks(reference_manifests, reference_lines, monkeypatch, tmp_path, capsys):
    build_dir = reference_manifests.parent.parent
    _fake_check(monkeypatch, tmp_path, _reject_self_test)
    assert cli.check([REFERENCE_STACK], build_dir) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out and "no findings" in out
    assert f"{REFERENCE_STACK}: {len(reference_lines)} command lines" in out

    def one_finding(python, version, lines):
        return [
            *_reject_self_test(python, version, lines),
            Finding(lines[1].origin, Problem("--port", "bad")),
        ]

    _fake_check(monkeypatch, tmp_path, one_finding)
    assert cli.check([REFERENCE_STACK], build_dir) == 1
    assert f"FINDING {reference_lines[1].origin}: --port: bad" in capsys.readouterr().out


def test_check_fails_when_the_checker_cannot_run(reference_manifests, monkeypatch, tmp_path, capsys):
    def broken(python, version, lines):
        raise cli.CheckerError("the checker failed (exit 1)")

    _fake_check(monkeypatch, tmp_path, broken)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    assert "error: the checker failed" in capsys.readouterr().out


# --- The parser environment --------------------------------------------------------------------------


def test_env_key_covers_version_requirements_torch_and_python():
    key = env.env_key("1.0", b"a", b"b", "torch==2.0")
    assert len(key) == 16
    assert key == env.env_key("1.0", b"a", b"b", "torch==2.0")
    others = {
        env.env_key("1.1", b"a", b"b", "torch==2.0"),
        env.env_key("1.0", b"a2", b"b", "torch==2.0"),
        env.env_key("1.0", b"a", b"b2", "torch==2.0"),
        env.env_key("1.0", b"a", b"b", "torch-2.0+cpu-cp311-cp311-linux_x86_64.whl"),
        env.env_key("1.0", b"a", b"b", "torch==2.0", python=(3, 12)),
    }
    assert key not in others and len(others) == 5


def _wheel(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"")
    return directory / name


def test_a_local_cpu_torch_wheel_is_used_when_there(tmp_path):
    wheels = tmp_path / "wheels"
    older = _wheel(wheels, "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    pinned = versions().build.torch
    _wheel(wheels, "torch-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl")  # a CUDA build: never taken
    _wheel(wheels, "torch-9.0.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl")  # another Python
    source = env.torch_source([str(tmp_path / "missing"), "https://example.invalid/simple", str(wheels)])
    assert source == env.TorchSource(requirement=str(older), identity=older.name)
    exact = _wheel(wheels, f"torch-{pinned}+cpu-cp311-cp311-linux_x86_64.whl")
    assert env.torch_source([f"file://{wheels}"]).requirement == str(exact)


def test_without_a_local_wheel_torch_comes_from_the_index_at_vllms_pin(tmp_path):
    pinned = versions().build.torch
    source = env.torch_source([str(tmp_path)])
    assert source == env.TorchSource(requirement=f"torch=={pinned}", identity=f"torch=={pinned}")
    # Which torch was taken decides the environment: a machine with the wheel builds another one.
    with_wheel = env.torch_source(
        [str(_wheel(tmp_path / "w", f"torch-{pinned}+cpu-cp311-cp311-linux_x86_64.whl").parent)]
    )
    assert env.env_dir(torch=source) != env.env_dir(torch=with_wheel)


def test_env_lives_in_the_cache_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMD_FLEET_CACHE_DIR", str(tmp_path))
    assert env.env_dir().parent == tmp_path and env.env_dir().name.startswith("vllm-parser-")
    monkeypatch.delenv("LLMD_FLEET_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert env.cache_root() == tmp_path / "xdg" / "llmd-fleet"
    assert REPO not in env.env_dir().parents


def test_vllm_version_comes_only_from_the_matrix():
    version = versions().vllm.version
    assert env.vllm_version() == version
    for path in sorted((REPO / "devtools" / "vllm_check").iterdir()):
        if path.is_file() and path.suffix in (".py", ".txt", ".md"):
            assert version not in path.read_text(), f"{path} hard-codes the vLLM version"
    requirements = env.REQUIREMENTS.read_text() + env.NO_DEPS_REQUIREMENTS.read_text()
    assert "vllm" not in [line.split("=")[0].strip().lower() for line in requirements.splitlines()]
    # torch is chosen by env.py (a local CPU wheel, else vLLM's own pin from the matrix).
    assert "torch" not in [line.split("=")[0].strip().lower() for line in requirements.splitlines()]


def test_child_processes_run_isolated_with_the_project_root_only(monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    environ = env.child_environ(VLLM_TARGET_DEVICE="cpu")
    assert "VIRTUAL_ENV" not in environ and "HF_HUB_OFFLINE" not in environ
    assert environ["VLLM_TARGET_DEVICE"] == "cpu"
    command = env.module_command(Path("/env/bin/python"), "devtools.vllm_check.checker", "--smoke")
    assert command[:3] == ["/env/bin/python", "-I", "-c"] and command[-1] == "--smoke"
    # The child imports llmd_fleet from its source root (components/ in a checkout), nothing else.
    assert repr(str(REPO / "components")) in command[3]


def test_deps_check_reports_versions_outside_the_declared_range(monkeypatch):
    import importlib.metadata

    declared = ["fastapi<0.137.0,>=0.133.0", "torch==9.9.9", "absent>=1", 'extra-only>=2; extra == "bench"']
    installed = {"fastapi": "0.140.0", "torch": "2.13.0+cpu", "extra-only": "1.0"}

    def version(name: str) -> str:
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "requires", lambda name: declared)
    monkeypatch.setattr(importlib.metadata, "version", version)
    assert mismatches() == ["fastapi 0.140.0 is outside vllm's range fastapi<0.137.0,>=0.133.0"]


def test_check_fails_when_the_committed_parser_names_differ_from_vllms(
    reference_manifests, monkeypatch, tmp_path, capsys
):
    def answer(python, version, lines):
        stale = Finding(
            cli.REGISTRY_ORIGIN, Problem(None, "TOOL_CALL_PARSERS lacks names vLLM registers: new1")
        )
        return [stale, *_reject_self_test(python, version, lines)]

    _fake_check(monkeypatch, tmp_path, answer)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        "differ from vLLM" in out
        and "FINDING llmd_fleet/config/vllm_registry.py: (command line): TOOL_CALL_PARSERS" in out
    )


# --- The engine-configuration check (devtools/vllm_check/engines.py) -----------------------------


def test_every_engine_line_is_printed_and_a_refused_engine_fails(
    reference_manifests, reference_lines, monkeypatch, tmp_path, capsys
):
    build_dir = reference_manifests.parent.parent
    _fake_check(monkeypatch, tmp_path, _reject_self_test)
    assert cli.check([REFERENCE_STACK], build_dir) == 0
    out = capsys.readouterr().out.splitlines()
    n = len(reference_lines)
    assert (
        f"engine config: {REFERENCE_STACK}: {n} of {n} engines accepted by vLLM {env.vllm_version()}'s "
        "configuration "
        "(config.json partly rebuilt: quantization_config)"
    ) in out
    controls = [line for line in out if line.startswith("engine config (negative control): ")]
    assert len(controls) == 6 and all(": refused: vLLM says: " in line for line in controls)
    assert any(line.startswith("engine config (not checked): ") for line in out)

    def refuse_decode(python, version, jobs):
        results = _accept_engines(python, version, jobs)
        results[-len(jobs.controls) - 1] = {"refused": "ParallelConfig: no"}
        return results

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=refuse_decode)
    assert cli.check([REFERENCE_STACK], build_dir) == 1
    out = capsys.readouterr().out
    assert f"engine config: {REFERENCE_STACK}: {n - 1} of {n} engines accepted" in out
    assert f"FINDING {reference_lines[-1].origin}: engine config: ParallelConfig: no" in out


def test_the_moe_oracle_refuses_an_engine_the_configuration_accepts(
    reference_manifests, reference_lines, monkeypatch, tmp_path, capsys
):
    def moe(jobs):
        return ["moe_backend='deep_gemm' is not supported for unquantized MoE."] + [None] * (
            len(jobs.all) - 1
        )

    _fake_check(monkeypatch, tmp_path, _reject_self_test, moe=moe)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        f"FINDING {reference_lines[0].origin}: engine config: moe_backend='deep_gemm' is not supported "
        "for unquantized MoE." in out
    )


def test_a_control_vllm_accepts_or_refuses_for_another_reason_fails(
    reference_manifests, monkeypatch, tmp_path, capsys
):
    def accept_all(python, version, jobs):
        return [{"accepted": {}} for _ in jobs.all]

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=accept_all)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        "engine config (negative control): MTP on a model without next-token layers: ACCEPTED, expected a "
        "refusal containing \"Unsupported speculative method: 'mtp'\"" in out
    )

    def other_reason(python, version, jobs):
        return [{"accepted": {}} for _ in jobs.engines] + [
            {"refused": "something else"} for _ in jobs.controls
        ]

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=other_reason)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    assert "refused: something else (FAILED: expected a refusal containing" in capsys.readouterr().out


def test_negative_controls_change_one_thing_each(reference_lines):
    from devtools.vllm_check.engines import BF16_MODEL, FP8_MODEL, negative_controls, with_flag

    base = reference_lines[0]
    assert with_flag(("vllm", "serve", "m", "--a", "1", "--b"), "--a", "2") == (
        "vllm",
        "serve",
        "m",
        "--b",
        "--a",
        "2",
    )
    assert with_flag(("vllm", "serve", "m", "--b", "--a", "1"), "--b", None) == (
        "vllm",
        "serve",
        "m",
        "--a",
        "1",
    )
    controls = negative_controls(base)
    assert len({c.case for c in controls}) == len(controls) == 6
    by_case = {c.case: c for c in controls}
    deep_gemm = by_case["deep_gemm on bf16 weights"].engine.line.argv
    assert deep_gemm[2] == BF16_MODEL and flag_value(deep_gemm, "--moe-backend") == "deep_gemm"
    assert "--speculative-config" not in deep_gemm
    block = by_case["a block size FlashMLA refuses"].engine.line.argv
    assert block[2] == FP8_MODEL and flag_value(block, "--block-size") == "16"
    spares = by_case["redundant experts without expert-parallel load balancing"].engine.line.argv
    assert (
        "--enable-eplb" not in spares
        and flag_value(spares, "--eplb-config") == '{"num_redundant_experts":32}'
    )
    for control in controls:
        assert control.engine.line.argv[3:] != base.argv[3:]
        assert control.engine.model_dir.endswith(("deepseek-v2-lite-chat", "glm-5.2-fp8"))


def test_pydantic_wrapping_is_stripped_from_vllms_message():
    from devtools.vllm_check.engine_config import clean

    message = (
        "1 validation error for ParallelConfig\n  Value error, World size (16) is larger than the number of "
        "available GPUs (8) in this node. [type=value_error, input_value=ArgsKwargs((), {}), "
        "input_type=ArgsKwargs]\n    For further information visit https://errors.pydantic.dev/2.14/v/value_error"
    )
    assert clean(message) == (
        "ParallelConfig: World size (16) is larger than the number of available GPUs (8) in this node."
    )


def test_the_drafter_may_be_unquantized_unless_the_config_lists_it():
    from devtools.vllm_check.checker import _drafter_quantizations

    hf: dict[str, Any] = {"num_hidden_layers": 78, "quantization_config": {"quant_method": "fp8"}}
    assert _drafter_quantizations(hf, "fp8") == ("fp8", None)
    assert _drafter_quantizations({**hf, "quantization_config": {"modules_to_not_convert": []}}, "fp8") == (
        "fp8",
    )
    skipped = {"modules_to_not_convert": ["model.layers.78"]}
    assert _drafter_quantizations({**hf, "quantization_config": skipped}, "fp8") == (None,)
    assert _drafter_quantizations(hf, None) == (None,)


def test_vendored_configs_agree_with_the_model_cards_and_name_every_source():
    from dataclasses import fields

    from llmd_fleet.models import FOLDERS, ModelDescription, description_for, vendored_config

    card_keys = {f.name for f in fields(ModelDescription)}
    for model_id in FOLDERS:
        vendored = vendored_config(model_id)
        card = description_for(model_id)
        assert vendored is not None and card is not None
        config = vendored.config
        source = vendored.source
        assert source["model"] == model_id and source["path"] == "config.json"
        assert set(config) == set(source["fields"]) | set(source["rebuilt"]), model_id
        # Read at a commit, read from a copy at a commit (mirror), or rebuilt key by key.
        mirror = source.get("mirror") or {}
        assert (
            source["commit"] is not None
            or (source["read"] is True and mirror.get("commit") and not source["rebuilt"])
            or (source["read"] is False and source["rebuilt"])
        ), model_id
        for key in card_keys & set(config):
            assert config[key] == getattr(card, key), (model_id, key)
        quantization = config.get("quantization_config") or {}
        assert quantization.get("quant_method") == card.quantization.method
        if card.quantization.weight_block_size is not None:
            assert tuple(quantization["weight_block_size"]) == card.quantization.weight_block_size
        assert ("modules_to_not_convert" in quantization) == (
            card.quantization.not_converted not in (None, ())
        )
        assert config.get("num_nextn_predict_layers", 0) == card.num_nextn_predict_layers


def test_every_card_is_vendored_or_says_why_not():
    from llmd_fleet.models import CARDS as DESCRIPTIONS
    from llmd_fleet.models import FOLDERS, NOT_VENDORED

    assert set(DESCRIPTIONS) == set(FOLDERS) | set(NOT_VENDORED)
    assert not set(FOLDERS) & set(NOT_VENDORED)
    assert all(reason for reason in NOT_VENDORED.values())


def test_every_shipped_vllm_stack_serves_a_vendored_model():
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config
    from llmd_fleet.models import vendored_config

    for stack in vllm_stacks():
        config = stack_config(read_stack_file(REPO / "stacks", stack))
        assert vendored_config(config.model.id) is not None, stack


def test_cards_no_stack_serves_are_resolved_or_listed_as_not_checked():
    dirs = cli.vendored_dirs()
    v3 = dirs["deepseek-ai/DeepSeek-V3"]
    lines = cli.card_lines({"zai-org/GLM-5.2-FP8"}, {d: None for d in dirs.values()}, "1.2.3")
    assert (
        "engine config: model deepseek-ai/DeepSeek-V3: vLLM 1.2.3's ModelConfig resolves its vendored "
        "config.json; no checked stack serves it, so no engine is built"
    ) in lines
    assert not any("GLM-5.2-FP8" in line for line in lines)  # served: its engines are the check
    assert any(
        line.startswith("engine config (not checked): model deepseek-ai/DeepSeek-R1: ") for line in lines
    )
    assert any(
        line.startswith("engine config (not checked): model moonshotai/Kimi-K2-Instruct: ") for line in lines
    )
    refused = cli.card_lines(set(), {v3: "ModelConfig: no"}, "1.2.3")
    assert not any("model deepseek-ai/DeepSeek-V3:" in line for line in refused)  # a FINDING instead
    assert v3 in cli.EngineJobs().models()
