"""The day-two replay's Prometheus (devtools/daytwo/prometheus.py): the operator's passes and
Prometheus' reloads, the targets files, the rule file, the build's pin, and the live alerts'
lines. Discovery's labels: test_daytwo_discovery.py; the generator: test_daytwo_operator_config.py."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.daytwo import operator_config, prometheus
from devtools.promtool import build as promtool
from llmd_fleet.versions import versions

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "glm52-epp",
        "namespace": "llm-d",
        "labels": {"app.kubernetes.io/component": "endpoint-picker"},
    },
    "spec": {
        "selector": {"app.kubernetes.io/component": "endpoint-picker"},
        "ports": [{"name": "grpc", "port": 9002}, {"name": "http-metrics", "port": 9090, "targetPort": 9091}],
    },
}


def pod(
    name: str, role: str, ip: str | None, namespace: str = "llm-d", phase: str = "Running"
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if ip:
        status["podIP"] = ip
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/instance": "glm52", "llm-d.ai/role": role},
        },
        "spec": {
            "containers": [
                {
                    "name": "vllm",
                    "ports": [
                        {"name": "rank0", "containerPort": 8200},
                        {"name": "rank1", "containerPort": 8201},
                    ],
                }
            ]
        },
        "status": status,
    }


def test_stale_targets_are_those_of_pods_the_target_files_no_longer_list() -> None:
    def target(pod: str, port: int) -> dict[str, Any]:
        return {
            "scrapePool": "podMonitor/llm-d/glm52-prefill/0",
            "scrapeUrl": f"http://{pod}:{port}/metrics",
            "discoveredLabels": {"__meta_kubernetes_pod_name": pod},
            "health": "down" if pod == "gone" else "up",
        }

    answer = json.dumps(
        {"data": {"activeTargets": [target("p0", 8000), target("gone", 8200), target("gone", 8000)]}}
    )
    assert prometheus.stale_targets(answer, {"p0", "p1"}) == [
        "http://gone:8000/metrics",
        "http://gone:8200/metrics",
    ]
    assert prometheus.stale_targets(answer, {"p0", "gone"}) == []


def test_rules_file_and_live_rules() -> None:
    rule = {
        "kind": "PrometheusRule",
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "vector(1) > 0", "for": "2m"}]}]},
    }
    assert yaml.safe_load(prometheus.rules_text([rule]))["groups"][0]["rules"][0]["for"] == "2m"
    assert prometheus.live_rules([rule], lambda r: r.get("for") == "2m") == ["A"]
    assert prometheus.live_rules([rule], lambda r: False) == []


def test_the_picker_processes_stand_where_the_twins_picker_pods_are() -> None:
    twin_picker = {"metadata": {"name": "epp-abc", "labels": {"app": "epp", "pod-template-hash": "x"}}}
    engine = {"metadata": {"name": "decode-0", "labels": {"app": "vllm"}}}
    process = {"metadata": {"name": "epp-0", "labels": {"app": "epp"}}}
    assert prometheus.picker_backed([twin_picker, engine], [process], {"app": "epp"}) == [engine, process]
    # An empty selector selects nothing here (a Deployment always has one).
    assert prometheus.picker_backed([twin_picker], [], {}) == [twin_picker]


GENERATED_JOB: dict[str, Any] = {
    "job_name": "podMonitor/llm-d/glm52-decode/0",
    "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": ["llm-d"]}}],
    "relabel_configs": [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}],
}


def monitor_with(tmp_path: Path, passes: list[Any], inputs: list[object]) -> prometheus.Monitor:
    given = iter(passes)
    seen = iter(inputs)
    return prometheus.Monitor(
        tmp_path / "prometheus-bin",
        tmp_path,
        tmp_path,
        [SERVICE],
        lambda: [],
        [],
        {"app": "epp"},
        lambda file: next(given),
        lambda: next(seen),
    )


def test_the_operator_runs_again_only_when_its_inputs_change(tmp_path: Path) -> None:
    """Before the stack's first up nothing is served: Prometheus starts with no jobs. The
    operator's pass runs again when the monitors or the reader's token change, and only then."""
    first = operator_config.Generated({}, [])  # monitors served, none made yet
    second = operator_config.Generated(
        {"global": {"evaluation_interval": "30s"}, "scrape_configs": [GENERATED_JOB]}, ["rejected x"]
    )
    monitor = monitor_with(tmp_path, [None, first, second], ["none", "none", "monitors", "monitors", "token"])
    assert monitor.reconcile() is True  # nothing served: an empty configuration
    config_file = tmp_path / "prometheus" / "prometheus.yaml"
    assert yaml.safe_load(config_file.read_text())["scrape_configs"] == []
    assert oct(config_file.stat().st_mode & 0o777) == "0o600"  # it holds the reader's token
    assert monitor.reconcile() is False  # same inputs: no pass
    assert monitor.reconcile() is False  # a pass, and the same configuration: no reload
    assert monitor.reconcile() is False
    assert monitor.reconcile() is True
    (job,) = yaml.safe_load(config_file.read_text())["scrape_configs"]
    assert "kubernetes_sd_configs" not in job and job["file_sd_configs"]
    assert monitor.warnings == ["rejected x"]
    assert monitor.generated["scrape_configs"] == [GENERATED_JOB]  # kept as written, for discovery


def test_targets_files_are_rewritten_only_when_their_targets_change(tmp_path: Path) -> None:
    pods = [pod("d0", "decode", "10.244.0.10")]
    monitor = monitor_with(
        tmp_path, [operator_config.Generated({"scrape_configs": [GENERATED_JOB]}, [])], ["x"]
    )
    monitor.list_pods = lambda: pods
    monitor.reconcile()
    monitor.write_targets()
    file = operator_config.job_file(monitor.targets_dir, GENERATED_JOB["job_name"])
    groups = json.loads(file.read_text())
    assert sorted(t for g in groups for t in g["targets"]) == ["10.244.0.10:8200", "10.244.0.10:8201"]
    assert monitor.written == {"d0"}
    before = file.stat().st_mtime_ns
    monitor.write_targets()
    assert file.stat().st_mtime_ns == before
    pods.append(pod("d1", "decode", "10.244.0.11"))
    monitor.write_targets()
    assert monitor.written == {"d0", "d1"} and file.stat().st_mtime_ns != before


def test_alert_times_and_line() -> None:
    times: dict[str, prometheus.AlertTimes] = {}
    prometheus.observe(times, set(), 100.0)
    prometheus.observe(times, {"EppLeaderMissing"}, 250.0)
    prometheus.observe(times, {"EppLeaderMissing"}, 260.0)  # still firing: the first time stays
    assert prometheus.alert_line("EppLeaderMissing", "f", 100.0, 300.0, times["EppLeaderMissing"]) is None
    prometheus.observe(times, set(), 345.25)
    assert (
        prometheus.alert_line(
            "EppLeaderMissing", "both endpoint pickers stopped", 100.0, 300.0, times["EppLeaderMissing"]
        )
        == "alert: EppLeaderMissing fired 150.0 s after both endpoint pickers stopped, "
        "resolved 45.2 s after recovery"
    )
    payload = {
        "data": {
            "alerts": [
                {"labels": {"alertname": "A"}, "state": "firing"},
                {"labels": {"alertname": "B"}, "state": "pending"},
            ]
        }
    }
    assert prometheus.firing_names(json.dumps(payload)) == {"A"}


def test_the_build_follows_the_promtool_pin() -> None:
    gomod = (prometheus.GOMOD_DIR / "go.mod").read_text()
    assert f"require {promtool.MODULE} {versions().tools.promtool}\n" in gomod
    assert "cmd/prometheus" in (prometheus.GOMOD_DIR / "tools.go").read_text()
    # The same replace directives as promtool's wrapper (the module's own).
    replaces = [
        line
        for line in (promtool.GOMOD_DIR / "go.mod").read_text().splitlines()
        if line.startswith(("replace", "exclude"))
    ]
    assert replaces and all(line in gomod.splitlines() for line in replaces)


def test_ensure_refuses_a_wrapper_of_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promtool, "module_version", lambda: "v0.399.0")
    with pytest.raises(prometheus.BuildError, match=r"\[tools\].promtool"):
        prometheus.ensure()


def test_offline_rules_are_the_alerts_expressions_as_recording_rules() -> None:
    rule = {
        "kind": "PrometheusRule",
        "spec": {
            "groups": [
                {
                    "name": "g",
                    "rules": [
                        {"alert": "A", "expr": "up < 1", "for": "17m"},
                        {"alert": "B", "expr": "vector(1)"},
                        {"record": "r", "expr": "up"},
                    ],
                }
            ]
        },
    }
    doc = yaml.safe_load(prometheus.offline_rules_text([rule], ["A"], "30s"))
    assert doc == {
        "groups": [
            {
                "name": "offline",
                "interval": "30s",
                "rules": [{"record": "llmd_fleet_alert_expr:A", "expr": "up < 1"}],
            }
        ]
    }


def test_held_steps_and_the_offline_line() -> None:
    dump = "\n".join(
        [
            '{__name__="llmd_fleet_alert_expr:A", role="decode"} 2 1000000',
            '{__name__="llmd_fleet_alert_expr:A"} 0 1030000',
            '{__name__="llmd_fleet_alert_expr:A"} 0 1060000',
            '{__name__="llmd_fleet_alert_expr:A"} 0 1150000',  # after a gap: a new hold
            '{__name__="other"} 1 1000000',
        ]
    )
    steps = prometheus.held_steps(dump)
    assert steps == {"A": [1000000, 1030000, 1060000, 1150000]}
    assert prometheus.longest_hold_s(steps["A"], 30) == 60.0
    assert prometheus.offline_line("A", "2m", steps["A"], 20, 30) == (
        "day-two: promtool: A (for 2m): expression held at 4 of 20 evaluations, longest 60 s: would not fire"
    )
    assert prometheus.offline_line("A", "1m", steps["A"], 20, 30).endswith("would fire")
    assert prometheus.offline_line("B", "", [], 20, 30).endswith(
        "held at 0 of 20 evaluations, longest 0 s: would not fire"
    )
    assert prometheus.offline_line("B", "", [5], 20, 30).endswith(": would fire")
    assert prometheus.offline_line("B", "", [], 20, 30, ["vllm:num_preemptions_total"]).endswith(
        "would not fire (no series scraped of vllm:num_preemptions_total)"
    )
    rule = {"alert": "B", "annotations": {"metric": "llm_d_epp_request_error_total, llm_d_epp_request_total"}}
    assert prometheus.annotated_metrics(rule) == ["llm_d_epp_request_error_total", "llm_d_epp_request_total"]
    assert prometheus.annotated_metrics({"alert": "C"}) == []


def test_durations() -> None:
    assert prometheus.duration_s("17m") == 1020
    assert prometheus.duration_s("1h30m") == 5400
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        prometheus.duration_s("2 minutes")


def test_scrape_problems_name_jobs_without_targets_and_what_the_operator_rejected(tmp_path: Path) -> None:
    from devtools.daytwo import alerts

    monitor = monitor_with(tmp_path, [], [])
    monitor.generated = {"scrape_configs": [{"job_name": "a"}, {"job_name": "b"}]}
    # A target down is no problem here (the tokenizer's kwok pods), a job without targets is.
    assert alerts.scrape_problems(monitor, {"a": (0, 1), "b": (2, 2)}) == []
    assert alerts.scrape_problems(monitor, {"a": (1, 1)}) == ["prometheus: b: no targets before the fault"]
    monitor.warnings = ['level=WARN msg="skipping object" object=llm-d/glm52-epp']
    assert alerts.scrape_problems(monitor, {"a": (1, 1), "b": (1, 1)}) == [
        'prometheus-operator: level=WARN msg="skipping object" object=llm-d/glm52-epp'
    ]
