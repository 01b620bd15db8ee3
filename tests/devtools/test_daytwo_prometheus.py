"""The day-two replay's Prometheus (devtools/daytwo/prometheus.py): the monitors' translation into
scrape jobs and file-discovery targets against prometheus-operator's documented semantics, the
rule file, the build's pin, and the live alerts' lines."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.daytwo import prometheus
from devtools.promtool import build as promtool
from llmd_fleet.versions import versions

POD_MONITOR: dict[str, Any] = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PodMonitor",
    "metadata": {"name": "glm52-decode", "namespace": "llm-d"},
    "spec": {
        "namespaceSelector": {"matchNames": ["llm-d"]},
        "selector": {"matchLabels": {"app.kubernetes.io/instance": "glm52", "llm-d.ai/role": "decode"}},
        "podMetricsEndpoints": [
            {
                "interval": "15s",
                "path": "/metrics",
                "port": "rank1",
                "relabelings": [
                    {"sourceLabels": ["__meta_kubernetes_pod_label_llm_d_ai_role"], "targetLabel": "role"},
                    {"action": "Drop", "regex": "x", "sourceLabels": ["__name__"]},
                ],
            }
        ],
    },
}
SERVICE_MONITOR: dict[str, Any] = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "ServiceMonitor",
    "metadata": {"name": "glm52-epp", "namespace": "llm-d"},
    "spec": {
        "namespaceSelector": {"matchNames": ["llm-d"]},
        "selector": {"matchLabels": {"app.kubernetes.io/component": "endpoint-picker"}},
        "endpoints": [
            {
                "port": "http-metrics",
                "interval": "15s",
                "authorization": {"type": "Bearer", "credentials": {"name": "s", "key": "token"}},
                "metricRelabelings": [{"action": "drop", "regex": "a|b", "sourceLabels": ["__name__"]}],
            }
        ],
    },
}
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


def test_pod_monitor_targets_are_selected_pods_at_the_named_port() -> None:
    pods = [
        pod("d0", "decode", "10.244.0.10"),
        pod("p0", "prefill", "10.244.0.11"),  # not selected
        pod("d1", "decode", None),  # no address yet
        pod("d2", "decode", "10.244.0.12", namespace="other"),  # not a selected namespace
        pod("d3", "decode", "10.244.0.13", phase="Succeeded"),  # dropped as the operator does
    ]
    groups = prometheus.pod_targets(POD_MONITOR, POD_MONITOR["spec"]["podMetricsEndpoints"][0], pods)
    assert [g["targets"] for g in groups] == [["10.244.0.10:8201"]]
    labels = groups[0]["labels"]
    assert labels["__meta_kubernetes_pod_label_llm_d_ai_role"] == "decode"
    assert labels["__meta_kubernetes_pod_container_port_name"] == "rank1"
    assert labels["__meta_kubernetes_namespace"] == "llm-d"


def test_a_native_sidecars_port_is_a_target_as_prometheus_pod_discovery_lists_it() -> None:
    """Prometheus' pod discovery lists initContainers' ports after the containers' (native
    sidecars, the routing sidecar among them), labelled `__meta_kubernetes_pod_container_init`."""
    decode = pod("d0", "decode", "10.244.0.10")
    decode["spec"]["initContainers"] = [
        {
            "name": "routing-proxy",
            "restartPolicy": "Always",
            "ports": [{"name": "proxy", "containerPort": 8000}],
        }
    ]
    monitor = {**POD_MONITOR, "spec": {**POD_MONITOR["spec"], "podMetricsEndpoints": [{"port": "proxy"}]}}
    (group,) = prometheus.pod_targets(monitor, {"port": "proxy"}, [decode])
    assert group["targets"] == ["10.244.0.10:8000"]
    assert group["labels"]["__meta_kubernetes_pod_container_name"] == "routing-proxy"
    assert group["labels"]["__meta_kubernetes_pod_container_init"] == "true"
    (engine,) = prometheus.pod_targets(monitor, {"port": "rank1"}, [decode])
    assert engine["labels"]["__meta_kubernetes_pod_container_init"] == "false"


def test_match_expressions_and_own_namespace_default() -> None:
    monitor = {
        **POD_MONITOR,
        "spec": {
            **POD_MONITOR["spec"],
            "namespaceSelector": {},
            "selector": {
                "matchExpressions": [{"key": "llm-d.ai/role", "operator": "In", "values": ["prefill"]}]
            },
        },
    }
    pods = [pod("p0", "prefill", "10.244.0.11"), pod("p1", "prefill", "10.244.0.14", namespace="other")]
    groups = prometheus.pod_targets(monitor, {"port": "rank0"}, pods)
    assert [g["targets"] for g in groups] == [["10.244.0.11:8200"]]


def test_jobs_follow_the_operator_naming_and_relabelling(tmp_path: Path) -> None:
    token = tmp_path / "token"
    job_list = prometheus.jobs([POD_MONITOR, SERVICE_MONITOR], tmp_path, token)
    assert [j.name for j in job_list] == [
        "podMonitor/llm-d/glm52-decode/0",
        "serviceMonitor/llm-d/glm52-epp/0",
    ]
    pod_job, svc_job = (j.config for j in job_list)
    assert pod_job["scrape_interval"] == "15s" and pod_job["metrics_path"] == "/metrics"
    relabels = pod_job["relabel_configs"]
    assert {"target_label": "job", "replacement": "llm-d/glm52-decode"} in relabels
    assert {"target_label": "endpoint", "replacement": "rank1"} in relabels
    # The monitor's own relabelings come after the operator's, in Prometheus' spelling.
    assert relabels[-2:] == [
        {"source_labels": ["__meta_kubernetes_pod_label_llm_d_ai_role"], "target_label": "role"},
        {"action": "drop", "regex": "x", "source_labels": ["__name__"]},
    ]
    assert "authorization" not in pod_job
    assert {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"} in svc_job[
        "relabel_configs"
    ]
    assert svc_job["authorization"] == {"type": "Bearer", "credentials_file": str(token)}
    assert svc_job["metric_relabel_configs"] == [
        {"action": "drop", "regex": "a|b", "source_labels": ["__name__"]}
    ]
    assert svc_job["scrape_interval"] == "15s"


def test_the_readers_token_is_written_once_the_api_server_has_it(tmp_path: Path) -> None:
    """Prometheus starts before the first `pulumi up` creates the reader's Secret: its token file
    is empty (a picker scrape is refused) until the token appears, then holds it."""
    tokens = iter([None, None, "t0ken"])
    calls: list[int] = []

    def token() -> str | None:
        calls.append(1)
        return next(tokens)

    monitor = prometheus.Monitor(
        tmp_path / "prometheus-bin", tmp_path, tmp_path, [SERVICE_MONITOR], lambda: [], [], token
    )
    config = yaml.safe_load((tmp_path / "prometheus" / "prometheus.yaml").read_text())
    (job,) = config["scrape_configs"]
    token_file = Path(job["authorization"]["credentials_file"])
    assert token_file.read_text() == ""
    monitor.write_targets()
    monitor.write_targets()
    assert token_file.read_text() == ""
    monitor.write_targets()
    assert token_file.read_text() == "t0ken"
    monitor.write_targets()
    assert len(calls) == 3  # not asked again once known


def test_service_monitor_targets_are_the_picker_processes() -> None:
    pickers = [
        {
            "metadata": {
                "name": "glm52-epp-0",
                "namespace": "llm-d",
                "labels": {"app.kubernetes.io/component": "endpoint-picker"},
            },
            "status": {"podIP": "10.244.0.3", "phase": "Running"},
        },
        {
            "metadata": {
                "name": "other",
                "namespace": "llm-d",
                "labels": {"app.kubernetes.io/component": "tokenizer"},
            },
            "status": {"podIP": "10.244.0.9", "phase": "Running"},
        },
    ]
    endpoint = SERVICE_MONITOR["spec"]["endpoints"][0]
    backing = prometheus.picker_pods(SERVICE_MONITOR, [SERVICE], endpoint, pickers)
    groups = prometheus.pod_targets({**SERVICE_MONITOR, "spec": {"selector": {}}}, endpoint, backing)
    # The Service port's targetPort, on the pods the Service selects.
    assert [g["targets"] for g in groups] == [["10.244.0.3:9091"]]
    assert groups[0]["labels"]["__meta_kubernetes_service_name"] == "glm52-epp"
    unselected = {**SERVICE, "metadata": {**SERVICE["metadata"], "labels": {}}}
    assert prometheus.picker_pods(SERVICE_MONITOR, [unselected], endpoint, pickers) == []


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


def test_rules_and_config_are_valid_for_promtool(tmp_path: Path) -> None:
    rule = {
        "kind": "PrometheusRule",
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "vector(1) > 0", "for": "2m"}]}]},
    }
    (tmp_path / "rules.yaml").write_text(prometheus.rules_text([rule]))
    assert yaml.safe_load((tmp_path / "rules.yaml").read_text())["groups"][0]["rules"][0]["for"] == "2m"
    config = prometheus.config_text(
        prometheus.jobs([POD_MONITOR], tmp_path, tmp_path / "token"), tmp_path / "rules.yaml"
    )
    (tmp_path / "prometheus.yaml").write_text(config)
    assert yaml.safe_load(config)["global"]["evaluation_interval"] == "30s"
    assert prometheus.live_rules([rule], lambda r: r.get("for") == "2m") == ["A"]
    assert prometheus.live_rules([rule], lambda r: False) == []


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
