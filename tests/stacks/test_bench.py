"""`llmd-fleet bench` and `bench-summary`: the rendered Job and workload (shape, session header,
stages, gateway URL, tokenizer source, secrets, determinism, schemas), the summary of
inference-perf's report format, and bad input."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from llmd_fleet.cli.bench import report
from llmd_fleet.cli.bench.workload import (
    BenchError,
    BenchOptions,
    bench_files,
    default_stages,
    parse_stages,
    shape,
)
from llmd_fleet.cli.main import run
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.stack.model import StackConfig
from tests.support import REFERENCE_STACK, REPO, STACKS_DIR, all_stacks

SAMPLES = REPO / "tests" / "fixtures" / "bench" / "reports"


def _config(stack: str = REFERENCE_STACK) -> StackConfig:
    return stack_config(read_stack_file(STACKS_DIR, stack))


def _options(config: StackConfig) -> BenchOptions:
    if config.gateway.implementation == "gke-l7-rilb":
        return BenchOptions(gateway_address="10.20.0.9")
    return BenchOptions()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rendered(tmp_path: Path, stack: str = REFERENCE_STACK, *extra: str, stacks: Path = STACKS_DIR):
    out = tmp_path / "bench"
    assert run(["--stacks-dir", str(stacks), "bench", stack, "--out", str(out), *extra]) == 0
    objects = {}
    for path in sorted((out / "manifests").glob("*.yaml")):
        obj = yaml.safe_load(path.read_text())
        objects[obj["kind"]] = obj
    return out, objects, yaml.safe_load((out / "workload.yaml").read_text())


def _stack_dir(tmp_path: Path, edit) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text())
    edit(document["config"])
    (stacks / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(yaml.safe_dump(document))
    return stacks


# --- What is rendered.


@pytest.mark.parametrize("stack", all_stacks())
def test_every_stack_renders_a_bench_that_passes_the_strict_schemas(stack, tmp_path, capsys):
    extra = (
        ["--gateway-address", "10.20.0.9"] if _config(stack).gateway.implementation == "gke-l7-rilb" else []
    )
    _, objects, _ = _rendered(tmp_path, stack, *extra)
    printed = capsys.readouterr().out
    assert "0 invalid" in printed and "INVALID" not in printed
    assert {"Job", "ConfigMap", "NetworkPolicy"} <= set(objects)


def test_the_workload_has_the_issue_shape(tmp_path):
    config = _config()
    _, _, workload = _rendered(tmp_path)
    agentic = workload["data"]["synthetic_agentic"]
    assert workload["data"]["type"] == "synthetic_agentic"
    assert workload["load"]["type"] == "trace_session_replay"
    assert workload["api"] == {"type": "chat", "streaming": True, "session_id_header_key": "x-session-id"}
    # A main agent's first call: system head + tool catalog (~380 tokens a tool) + the turn's
    # input; the median request sits at the issue's ~195k.
    first_call = agentic["shared_system_prompt_len"] + 8 * 380 + agentic["input_tokens_per_turn"]["mean"]
    assert 185_000 <= first_call <= 200_000
    assert agentic["output_tokens_per_turn"]["mean"] == 317
    # Every later call of the loop repeats the previous input and adds one call and its result.
    growth = 2 * agentic["output_tokens_per_turn"]["max"]
    assert first_call / (first_call + growth) >= 0.99
    assert agentic["tool_loop_depth"]["min"] >= 6
    # Bursts of parallel sub-agents.
    assert agentic["fanout_probability"] > 0 and agentic["sub_agents_per_spawn"]["max"] >= 4
    # inference-perf's own context check runs against the model's window.
    assert agentic["max_model_len"] == config.serving.roles.decode.max_model_len == 202_752
    assert shape(config).peak_request <= agentic["max_model_len"]


def test_stages_rise_from_500_to_3000_agents_and_the_corpus_covers_them(tmp_path):
    """The reference stack declares no workload.agents: the default 3,000 agents' ladder."""
    _, _, workload = _rendered(tmp_path)
    stages = workload["load"]["stages"]
    assert [s["concurrent_sessions"] for s in stages] == [500, 1000, 2000, 3000]
    assert all(s["session_rate"] <= s["concurrent_sessions"] for s in stages)
    assert workload["data"]["synthetic_agentic"]["num_sessions"] == sum(s["num_sessions"] for s in stages)
    # Enough in-flight requests across the workers for the largest stage.
    load = workload["load"]
    assert load["num_workers"] * load["worker_max_concurrency"] >= 3000


def test_the_quickstart_stages_rise_to_its_declared_16_agents(tmp_path):
    """The default stages come from the stack's `workload.agents` (16 for the quickstart), not the
    published 3,000-agent ladder."""
    _, _, workload = _rendered(tmp_path, "quickstart-h100")
    assert _config("quickstart-h100").workload.agents == 16
    assert [s["concurrent_sessions"] for s in workload["load"]["stages"]] == [3, 5, 11, 16]


@given(st.integers(1, 1_000_000))
def test_default_stages_rise_strictly_to_the_declared_agents(agents: int) -> None:
    stages = default_stages(agents)
    assert stages[-1] == agents and stages[0] >= 1
    assert list(stages) == sorted(set(stages)) and len(stages) <= 4
    # Each stage is its sixth of the agents, rounded to the nearest agent (at least 1).
    expected = {max(1, round(agents * k / 6 + 1e-9)) for k in (1, 2, 4, 6)}
    assert set(stages) == expected


def test_default_stages_of_the_published_run() -> None:
    assert default_stages(3000) == (500, 1000, 2000, 3000)
    assert default_stages(1) == (1,)


def test_custom_stages(tmp_path):
    _, _, workload = _rendered(tmp_path, REFERENCE_STACK, "--stages", "100,250")
    assert [s["concurrent_sessions"] for s in workload["load"]["stages"]] == [100, 250]


def test_the_session_header_follows_the_router_config(tmp_path):
    def edit(config):
        config.setdefault("llmd-fleet:router", {})["sessionAffinity"] = {"header": "x-agent-session"}

    _, _, workload = _rendered(tmp_path, stacks=_stack_dir(tmp_path, edit))
    assert workload["api"]["session_id_header_key"] == "x-agent-session"


def test_traffic_goes_to_the_gateway_service_over_the_gateway_proxies(tmp_path):
    config = _config()
    _, objects, workload = _rendered(tmp_path)
    service = objects["Service"]
    assert workload["server"]["base_url"] == f"http://{service['metadata']['name']}.llm-d.svc"
    assert service["spec"]["selector"] == {
        "gateway.networking.k8s.io/gateway-name": "llm-d-inference-gateway"
    }
    assert service["spec"]["ports"][0]["targetPort"] == config.gateway.listener_port
    assert workload["server"]["model_name"] == (config.model.served_name or config.model.id)


def test_a_managed_gateway_is_reached_at_its_address(tmp_path):
    _, objects, workload = _rendered(tmp_path, "gke-h100", "--gateway-address", "10.20.0.9")
    port = _config("gke-h100").gateway.listener_port
    assert workload["server"]["base_url"] == f"http://10.20.0.9:{port}"
    assert "Service" not in objects
    egress = objects["NetworkPolicy"]["spec"]["egress"]
    assert {
        "to": [{"ipBlock": {"cidr": "10.20.0.9/32"}}],
        "ports": [{"protocol": "TCP", "port": port}],
    } in egress
    # GKE's managed Prometheus, not a URL.
    assert workload["metrics"]["prometheus"]["google_managed"] is True


def test_the_tokenizer_comes_from_the_hub_at_the_stack_revision(tmp_path):
    config = _config()
    _, objects, workload = _rendered(tmp_path)
    pod = objects["Job"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    command = init["command"]
    assert command[:3] == ["hf", "download", config.model.id]
    assert command[command.index("--revision") + 1] == config.model.revision
    local_dir = command[command.index("--local-dir") + 1]
    assert workload["tokenizer"]["pretrained_model_name_or_path"] == local_dir
    assert workload["tokenizer"]["trust_remote_code"] is config.model.trust_remote_code
    # Only tokenizer files, never the weights.
    patterns = [command[i + 1] for i, arg in enumerate(command) if arg == "--include"]
    assert patterns and not any("safetensors" in p or p == "*" for p in patterns)
    # The run itself stays offline; the hub is reached on 443 outside the cluster's ranges.
    (main,) = pod["containers"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in main["env"]
    egress = objects["NetworkPolicy"]["spec"]["egress"]
    hub = [rule for rule in egress if rule.get("ports") == [{"protocol": "TCP", "port": 443}]]
    assert hub and hub[0]["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"


def test_the_hf_token_comes_from_the_stack_secret_and_never_in_plain_text(tmp_path):
    def edit(config):
        config["llmd-fleet:hfToken"] = {"secure": "v1:AAAAciphertextAAAA"}

    out, objects, _ = _rendered(tmp_path, stacks=_stack_dir(tmp_path, edit))
    (init,) = objects["Job"]["spec"]["template"]["spec"]["initContainers"]
    token = [e for e in init["env"] if e["name"] == "HF_TOKEN"]
    assert token == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}}}
    ]
    text = b"".join(_tree(out).values())
    assert b"ciphertext" not in text and b"AAAA" not in text
    # The main container, which talks to the gateway, never holds the token.
    (main,) = objects["Job"]["spec"]["template"]["spec"]["containers"]
    assert all(e["name"] != "HF_TOKEN" for e in main["env"])


def test_without_an_hf_token_no_secret_is_referenced(tmp_path):
    _, objects, _ = _rendered(tmp_path)
    assert b"secretKeyRef" not in yaml.safe_dump(objects["Job"]).encode()


def test_prometheus_from_the_observability_config(tmp_path):
    _, objects, workload = _rendered(tmp_path)
    prometheus = workload["metrics"]["prometheus"]
    assert prometheus["url"] == "http://prometheus-operated.monitoring.svc:9090"
    assert prometheus["filters"] == ['namespace="llm-d"']
    assert workload["report"]["prometheus"] == {"summary": True, "per_stage": True}
    egress = objects["NetworkPolicy"]["spec"]["egress"]
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    assert {"to": [monitoring], "ports": [{"protocol": "TCP", "port": 9090}]} in egress


def test_no_prometheus_no_metrics_section(tmp_path):
    def edit(config):
        config.setdefault("llmd-fleet:observability", {})["prometheus"] = "none"

    _, _, workload = _rendered(tmp_path, stacks=_stack_dir(tmp_path, edit))
    assert "metrics" not in workload and workload["report"]["prometheus"] is None


def test_the_job_runs_once_restricted_and_is_not_part_of_the_stack(tmp_path):
    _, objects, workload = _rendered(tmp_path)
    job = objects["Job"]
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    for container in (*pod["initContainers"], *pod["containers"]):
        assert container["image"].startswith("quay.io/inference-perf/inference-perf:")
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The ConfigMap carries exactly the workload file the container reads.
    data = objects["ConfigMap"]["data"]["config.yml"]
    assert yaml.safe_load(data) == workload
    assert "--config_file /etc/llmd-fleet-bench/config.yml" in pod["containers"][0]["command"][2]
    # Never deployed by the stack program: no bench object in any golden rendering.
    for golden in (REPO / "tests" / "golden").rglob("*"):
        if golden.is_file():
            assert "-bench" not in golden.read_text(errors="replace"), golden


def test_rendering_twice_is_byte_identical(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert run(["bench", REFERENCE_STACK, "--out", str(first)]) == 0
    assert run(["bench", REFERENCE_STACK, "--out", str(second)]) == 0
    assert _tree(first) == _tree(second)
    config = _config()
    assert bench_files(config, BenchOptions()) == bench_files(config, BenchOptions())


# --- Bad input.


def test_unknown_stack_exits_2(tmp_path, capsys):
    assert run(["bench", "no-such-stack", "--out", str(tmp_path / "o")]) == 2
    assert "onprem-h100" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_bad_out_is_refused_and_left_alone(tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep")
    assert run(["bench", REFERENCE_STACK, "--out", str(precious)]) == 2
    assert "--out" in capsys.readouterr().err
    assert (precious / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--stages", "3000,500"], "must rise"),
        (["--stages", "0"], "outside 1-100000"),
        (["--stages", "1e9"], "not a whole number"),
        (["--stages", ",".join(["1"] * 11)], "1 to 10"),
        (["--stages", "500;rm -rf /"], "not a whole number"),
        (["--gateway-address", "10.0.0.1"], "runs in the cluster"),
        (["--prometheus-url", "http://x/$(id)"], "--prometheus-url"),
        (["--prometheus-url", "file:///etc/passwd"], "--prometheus-url"),
    ],
)
def test_bad_options_exit_2_and_keep_the_earlier_output(tmp_path, capsys, extra, message):
    out = tmp_path / "bench"
    assert run(["bench", REFERENCE_STACK, "--out", str(out)]) == 0
    before = _tree(out)
    capsys.readouterr()
    assert run(["bench", REFERENCE_STACK, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert _tree(out) == before


def test_a_managed_gateway_needs_its_address(tmp_path, capsys):
    assert run(["bench", "gke-h100", "--out", str(tmp_path / "o")]) == 2
    assert "--gateway-address is required" in capsys.readouterr().err
    assert run(["bench", "gke-h100", "--out", str(tmp_path / "o"), "--gateway-address", "10.0.0.999"]) == 2
    assert "--gateway-address" in capsys.readouterr().err


def _served_window(config: StackConfig, tokens: int) -> StackConfig:
    roles = config.serving.roles
    update = {
        "prefill": roles.prefill.model_copy(update={"max_model_len": tokens}),
        "decode": roles.decode.model_copy(update={"max_model_len": tokens}),
    }
    serving = config.serving.model_copy(update={"roles": roles.model_copy(update=update)})
    return config.model_copy(update={"serving": serving})


def test_a_context_window_too_small_is_refused_naming_the_key():
    with pytest.raises(BenchError, match=r"llmd-fleet:serving\.roles\.decode\.maxModelLen: 4096 tokens"):
        shape(_served_window(_config(), 4096))


def test_a_smaller_window_scales_the_shape_below_it():
    fitted = shape(_served_window(_config(), 131_072))
    assert fitted.max_model_len == 131_072
    assert fitted.peak_request <= 131_072 and fitted.input_max > 90_000


def test_the_command_line_exits_2_without_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "llmd_fleet.cli.main", "bench", "no-such-stack"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "no stack file" in proc.stderr


def test_parse_stages_refuses_empty_parts():
    with pytest.raises(BenchError):
        parse_stages("500,,1000")


# --- The summary, on inference-perf's report format (tests/fixtures/bench/make_samples.py wrote
# the samples with the tool's own report functions).


def test_summary_of_a_report_directory():
    rows = {row.label: row for row in report.summarize(report.read(str(SAMPLES)))}
    assert list(rows) == ["stage 0", "stage 1", "all"]
    top = rows["stage 1"]
    stage = json.loads((SAMPLES / "stage_1_lifecycle_metrics.json").read_text())["successes"]
    assert top.agents == 3000
    assert top.requests_per_min == pytest.approx(stage["throughput"]["requests_per_sec"] * 60)
    assert top.input_tokens_per_min == pytest.approx(stage["throughput"]["input_tokens_per_sec"] * 60)
    assert top.output_tokens_per_min == pytest.approx(stage["throughput"]["output_tokens_per_sec"] * 60)
    assert top.ttft_p90_s == pytest.approx(stage["latency"]["time_to_first_token"]["p90"])
    assert top.median_input_tokens is not None and top.median_output_tokens is not None
    assert 190_000 <= top.median_input_tokens <= 200_000 and 300 <= top.median_output_tokens <= 340
    assert (top.queue_p90_s, top.server_ttft_p90_s, top.preemptions) == (1.2, 3.6, 7.0)
    assert rows["stage 0"].preemptions == 0.0 and rows["all"].preemptions == 7.0


def _job_log() -> str:
    """What the Job's container prints: inference-perf's own log lines, then each summary file
    between marker lines (the script in llmd_fleet/cli/bench/workload.py)."""
    parts = ["INFO - Stage 0 - run started", "\x1b[1m┃ Stage ┃ Successes ┃"]
    for path in sorted(SAMPLES.glob("*.json")):
        parts += [f"==> llmd-fleet-bench report {path.name} <==", path.read_text()]
    parts.append("==> llmd-fleet-bench end <==")
    return "\n".join(parts)


def test_summary_of_the_job_log_matches_the_directory(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text(_job_log())
    assert report.summarize(report.read(str(log))) == report.summarize(report.read(str(SAMPLES)))
    assert run(["bench-summary", str(log)]) == 0
    printed = capsys.readouterr().out
    assert "| stage 1 | 3,000 |" in printed and "| 7 |" in printed


def test_the_job_script_prints_the_reports_between_the_markers(tmp_path):
    """Run the Job's own shell script with a stand-in `inference-perf` that writes the sample
    files: the summary reads the same rows back from what it prints."""
    config = _config()
    job = yaml.safe_load(bench_files(config, BenchOptions())["manifests/job-glm52-bench.yaml"])
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    reports, bin_dir = tmp_path / "reports", tmp_path / "bin"
    reports.mkdir()
    bin_dir.mkdir()
    fake = bin_dir / "inference-perf"
    fake.write_text(f"#!/bin/sh\ncp {SAMPLES}/*.json {reports}/\necho done\n")
    fake.chmod(0o755)
    proc = subprocess.run(
        ["/bin/sh", "-c", script.replace("/work/reports", str(reports))],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert report.summarize(report.read_log(proc.stdout)) == report.summarize(report.read(str(SAMPLES)))


def test_the_summary_without_prometheus_says_preemptions_were_not_measured(tmp_path, capsys):
    for name in ("summary_lifecycle_metrics.json", "stage_0_lifecycle_metrics.json"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    assert run(["bench-summary", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "preemptions: not measured" in printed and "vllm:num_preemptions_total" in printed


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no inference-perf lifecycle report"),
        ("just some log\n", "no inference-perf lifecycle report"),
        ("==> llmd-fleet-bench report summary_lifecycle_metrics.json <==\n{not json\n", "not JSON"),
    ],
)
def test_bad_summary_input_exits_2(tmp_path, capsys, content, message):
    log = tmp_path / "log"
    log.write_text(content)
    assert run(["bench-summary", str(log)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_summary_of_a_missing_path_exits_2(tmp_path, capsys):
    assert run(["bench-summary", str(tmp_path / "nothing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_the_preemption_counter_is_in_the_metric_catalogue():
    from devtools.metrics_catalogue.catalogue import load

    assert load().problem(report.PREEMPTION_METRIC) is None


# --- The cached inference-perf environment.


def test_the_environment_key_follows_the_pinned_version():
    from devtools.bench import env

    assert env.env_key("0.0.1") != env.env_key("0.0.2")
    assert env.env_dir().name == f"inference-perf-{env.env_key(env.inference_perf_version())}"


def test_without_the_pinned_python_the_build_fails_and_says_why(monkeypatch, tmp_path):
    from devtools.bench import env
    from devtools.vllm_check.env import EnvError

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(env, "_runs_as", lambda python: False)
    wanted = ".".join(map(str, env.python_version()))
    with pytest.raises(EnvError, match=f"needs Python {wanted} and none runs here"):
        env.base_python()


def test_the_validation_entry_refuses_a_stack_that_cannot_bench(tmp_path, capsys, monkeypatch):
    from devtools.bench import env

    monkeypatch.setenv("LLMD_FLEET_STACKS_DIR", str(STACKS_DIR))
    assert env.main(["no-such-stack"]) == 2
    assert "no-such-stack" in capsys.readouterr().err
    assert env.main([]) == 2
