"""Scraping, alerts, dashboards and the plan's live figures (`components/llmd_fleet/layers/observability/`,
`components/llmd_fleet/plan/observability.py`)."""

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.cli.plan_output import fit_tables
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.core.yaml_documents import yaml_documents
from llmd_fleet.layers.observability.alerts import fleet_alerts, promtool_tests, rule_groups
from llmd_fleet.layers.observability.component import rank_port_names
from llmd_fleet.layers.observability.dashboards import (
    DASHBOARD_LABEL,
    dashboard_json,
    dashboard_queries,
    fleet_dashboards,
)
from llmd_fleet.layers.observability.live import live_figures, live_table
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.observability import NIXL_XFER_TIME_TOP_BUCKET_S, plan_observability
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.targets.specs import SPECS
from llmd_fleet.versions import versions
from tests.support import REPO, all_stacks, stack_raw_config, vllm_stacks


def _config(stack: str = "onprem-h100", **observability: Any):
    raw = copy.deepcopy(stack_raw_config(stack))
    if observability:
        raw["observability"] = {**raw.get("observability", {}), **observability}
    return parse_config(raw)


def _obs(config):
    return plan_observability(config, plan_fleet(config))


def _render_with(tmp_path: Path, stack: str, observability: dict[str, Any]) -> list[dict[str, Any]]:
    """Render a copy of `stack` with `llmd-fleet:observability` set to `observability`."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    document["config"]["llmd-fleet:observability"] = observability
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    out = tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", stack, "--out", str(out)]) == 0
    return [
        d for p in sorted((out / "manifests").rglob("*.yaml")) for d in yaml_documents(p.read_text()) if d
    ]


def _kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# --- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", vllm_stacks())
def test_nic_line_rate_and_scraper_default_per_target(stack):
    # The defaults: the stack's settings without its own `observability` section.
    raw = copy.deepcopy(stack_raw_config(stack))
    declared = raw.pop("observability", None) or {}
    config = parse_config(raw)
    kind = config.target.kind
    assert {g.nic_gbps for g in config.fleet.node_groups.values()} == {SPECS[kind].nic_gbps}
    assert config.observability.prometheus == ("gmp" if kind == "gke" else "operator")
    assert config.observability.namespace == ("gmp-system" if kind == "gke" else "monitoring")
    # What the stack declares wins over the default.
    observability = _config(stack).observability
    for field, value in declared.items():
        attribute = re.sub(r"(?<!^)(?=[A-Z])", "_", field).lower()
        assert getattr(observability, attribute) == value, field


def test_explicit_observability_values_are_kept():
    raw = copy.deepcopy(stack_raw_config("gke-h100"))
    raw["fleet"]["nodeGroups"]["h100"]["nicGbps"] = 100
    raw["observability"] = {"prometheus": "install", "namespace": "prom"}
    config = parse_config(raw)
    assert config.fleet.node_groups["h100"].nic_gbps == 100
    assert (config.observability.prometheus, config.observability.namespace) == ("install", "prom")
    raw["observability"] = {"prometheus": "gmp", "namespace": "gke-gmp-system"}
    assert parse_config(raw).observability.namespace == "gke-gmp-system"


def test_bad_observability_input_is_refused_with_the_key():
    raw = copy.deepcopy(stack_raw_config())
    raw["observability"] = {"prometheus": "gmp"}
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.problems == [
        (
            "llmd-fleet:observability.prometheus",
            "gmp (Managed Service for Prometheus) exists only on kind gke",
        )
    ]
    raw = copy.deepcopy(stack_raw_config())
    raw["fleet"]["nodeGroups"]["h100"]["nicGbps"] = 6400
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.problems == [
        ("llmd-fleet:fleet.nodeGroups.h100.nicGbps", "must be <= 3200 Gb/s (got 6400)")
    ]


# --- plan-derived thresholds ---------------------------------------------------------------------


def test_kv_transfer_bound_follows_the_slower_nic_share():
    onprem = _obs(_config("onprem-h100")).kv_transfer
    # 202,752 tokens x 62,252 B x 8 bit over 400 Gb/s per GPU, twice.
    assert onprem.gbps_per_gpu == 400
    assert onprem.line_rate_seconds == pytest.approx(202_752 * 62_252 * 8 / 400e9)
    assert onprem.bound_seconds == 0.51
    assert _obs(_config("gke-h100")).kv_transfer.bound_seconds == 1.01  # 8 x 200 Gb/s for 8 GPUs
    assert _obs(_config("eks-h100")).kv_transfer.gbps_per_gpu == 400  # 32 x 100 Gb/s for 8 GPUs
    raw = copy.deepcopy(stack_raw_config())
    raw["fleet"]["nodeGroups"]["h100"]["nicGbps"] = 1
    slow = _obs(parse_config(raw)).kv_transfer
    # Never at or above vLLM's top bucket: the p90 could not exceed it and the alert never fire.
    assert slow.bound_seconds < NIXL_XFER_TIME_TOP_BUCKET_S


def test_alert_thresholds_come_from_the_plan():
    config = _config()
    obs = _obs(config)
    alerts = {a.name: a for a in fleet_alerts(obs)}
    assert alerts["NixlTransferSlow"].expr.endswith(f"> {obs.kv_transfer.bound_seconds:g}")
    assert alerts["PrefillRanksNotReady"].expr.endswith("< 224")
    assert alerts["DecodeRanksNotReady"].expr.endswith("< 320")
    # One rollout step (45 min load + 10 min drain) plus the margin.
    assert alerts["DecodeRanksNotReady"].for_ == "70m"
    band_bytes = dict(obs.band_max_bytes)
    for priority, limit in band_bytes.items():
        assert (
            f'priority="{priority}"}}) > {int(limit * 0.9)}'
            in alerts["EppFlowControlQueueBytesNearLimit"].expr
        )
    lease = RouterNames(pool=config.serving.name, namespace=config.serving.namespace).leader_lease
    assert obs.leader_lease == lease and f'name="{lease}"' in alerts["EppLeaderMissing"].expr


def test_alerts_follow_the_features_of_the_stack():
    raw = copy.deepcopy(stack_raw_config())
    raw["router"] = {"replicas": 1, "flowControl": False}
    for role in ("prefill", "decode"):
        raw["serving"]["roles"][role]["mtpTokens"] = 0
    raw["serving"]["kvTier"] = {"cpuOffload": False, "peerToPeer": False}
    # what the decode HBM holds without a CPU tier, with no MTP (one token per 19.1 ms step: 6.05 s
    # per answer, 8.05 s per turn): 703 contexts x 8.05 / 6.05 = 935 agents
    raw["workload"]["agents"] = 900
    config = parse_config(raw)
    names = {a.name for a in fleet_alerts(_obs(config))}
    assert not names & {
        "EppLeaderMissing",
        "MtpAcceptanceCollapse",
        "EppFlowControlRejections",
        "EppFlowControlQueueBytesNearLimit",
        "CpuTierAllocationFailures",
    }
    assert {"VllmPreemptions", "NixlTransferFailures", "EppNoReadyEndpoints"} <= names


@pytest.mark.parametrize("stack", all_stacks())
def test_every_alert_has_severity_runbook_metric_and_two_unit_tests(stack):
    config = _config(stack)
    obs = _obs(config)
    alerts = fleet_alerts(obs)
    assert len({a.name for a in alerts}) == len(alerts)
    for rule in rule_groups(obs)[0]["rules"]:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "runbook", "metric", "threshold"}, rule["alert"]
        assert all(rule["annotations"].values()), rule["alert"]
    tests = promtool_tests(obs, "rules.yaml")["tests"]
    for alert in alerts:
        (fires,) = [t for t in tests if t["name"] == f"{alert.name} fires"]
        (silent,) = [t for t in tests if t["name"] == f"{alert.name} stays silent on a healthy fleet"]
        assert fires["alert_rule_test"][0]["exp_alerts"], alert.name
        assert silent["alert_rule_test"][0]["exp_alerts"] == [], alert.name
        assert fires["input_series"] != silent["input_series"], alert.name


# --- rendered monitoring objects -----------------------------------------------------------------


def _template_ports(objects: list[dict[str, Any]], role: str) -> set[str]:
    (ds,) = _kind(objects, "DisaggregatedSet")
    (spec,) = [r["spec"] for r in ds["spec"]["roles"] if r["name"] == role]
    containers = spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    return {p["name"] for c in containers for p in c.get("ports", [])}


@pytest.mark.parametrize("stack", ["onprem-h100", "eks-h100"])
def test_operator_stacks_scrape_every_rank_and_the_router(rendered, stack):
    objects = rendered(stack)
    monitors = {m["metadata"]["name"]: m for m in _kind(objects, "PodMonitor")}
    assert set(monitors) == {"glm52-prefill", "glm52-decode", "glm52-tokenizer"}
    for role in ("prefill", "decode"):
        endpoints = monitors[f"glm52-{role}"]["spec"]["podMetricsEndpoints"]
        ports = [e["port"] for e in endpoints]
        assert ports == rank_port_names(role, 8)
        # Each named port is one of the pod's rank API servers (decode: the engine, not the sidecar).
        assert set(ports) <= _template_ports(objects, role)
        assert monitors[f"glm52-{role}"]["spec"]["selector"]["matchLabels"]["llm-d.ai/role"] == role
        targets = {r["targetLabel"] for e in endpoints for r in e["relabelings"]}
        assert targets == {"role", "component"}
    (service_monitor,) = _kind(objects, "ServiceMonitor")
    (endpoint,) = service_monitor["spec"]["endpoints"]
    secret_name = endpoint["authorization"]["credentials"]["name"]
    (secret,) = [s for s in _kind(objects, "Secret") if s["metadata"]["name"] == secret_name]
    assert secret["type"] == "kubernetes.io/service-account-token"
    reader = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    bindings = {b["metadata"]["name"]: b for b in _kind(objects, "ClusterRoleBinding")}
    roles = {r["metadata"]["name"]: r for r in _kind(objects, "ClusterRole")}
    reader_binding = bindings["llmd-fleet-llm-d-glm52-metrics-reader"]
    assert reader_binding["subjects"] == [{"kind": "ServiceAccount", "name": reader, "namespace": "llm-d"}]
    assert roles["llmd-fleet-llm-d-glm52-metrics-reader"]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    # The EPP itself reviews the scraper's token.
    auth = bindings["llmd-fleet-llm-d-glm52-epp-metrics-auth"]
    assert auth["subjects"][0]["name"] == "glm52-epp"
    resources = {
        r for rule in roles["llmd-fleet-llm-d-glm52-epp-metrics-auth"]["rules"] for r in rule["resources"]
    }
    assert resources == {"tokenreviews", "subjectaccessreviews"}
    (rule,) = _kind(objects, "PrometheusRule")
    assert {r["alert"] for r in rule["spec"]["groups"][0]["rules"]} >= {"VllmPreemptions", "EppLeaderMissing"}
    assert not _kind(objects, "PodMonitoring")


def test_gke_uses_managed_collection(rendered):
    objects = rendered("gke-h100")
    monitorings = {m["metadata"]["name"]: m["spec"] for m in _kind(objects, "PodMonitoring")}
    assert set(monitorings) == {"glm52-prefill", "glm52-decode", "glm52-epp", "glm52-tokenizer"}
    assert [e["port"] for e in monitorings["glm52-decode"]["endpoints"]] == rank_port_names("decode", 8)
    assert monitorings["glm52-prefill"]["targetLabels"]["fromPod"] == [
        {"from": "llm-d.ai/role", "to": "role"},
        {"from": "app.kubernetes.io/component", "to": "component"},
    ]
    (epp_endpoint,) = monitorings["glm52-epp"]["endpoints"]
    assert epp_endpoint["authorization"]["credentials"]["secret"]["name"] == "glm52-metrics-reader-token"
    (binding,) = [b for b in _kind(objects, "RoleBinding") if "secret-read" in b["metadata"]["name"]]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}]
    assert len(_kind(objects, "Rules")) == 1
    assert not _kind(objects, "PodMonitor") and not _kind(objects, "PrometheusRule")


@pytest.mark.parametrize("stack", all_stacks())
def test_dashboards_are_configmaps_for_the_sidecar(rendered, stack):
    fleet = _config(stack).serving.name
    maps = [
        c
        for c in _kind(rendered(stack), "ConfigMap")
        if c["metadata"]["name"].startswith(f"{fleet}-dashboard-")
    ]
    assert {c["metadata"]["name"] for c in maps} == {
        f"{fleet}-dashboard-{k}" for k in ("fleet", "prefill", "decode", "router")
    }
    for config_map in maps:
        assert DASHBOARD_LABEL.items() <= config_map["metadata"]["labels"].items()
        ((key, text),) = config_map["data"].items()
        board = json.loads(text)
        assert board["uid"] == f"llmd-{key.removesuffix('.json')}"
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)) and 0 not in ids
        assert all(
            t["datasource"]["uid"] == "${datasource}"
            for p in board["panels"]
            if p["type"] != "row"
            for t in [p]
        )


def test_install_mode_installs_the_pinned_chart(tmp_path):
    objects = _render_with(tmp_path, "onprem-h100", {"prometheus": "install", "namespace": "prom"})
    (namespace,) = [n for n in _kind(objects, "Namespace") if n["metadata"]["name"] == "prom"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    releases = [yaml.safe_load(p.read_text()) for p in (tmp_path / "out" / "helm").rglob("*.yaml")]
    (release,) = [r for r in releases if r and "kube-prometheus-stack" in json.dumps(r)]
    chart = versions().chart("kube-prometheus-stack")
    assert chart.version in json.dumps(release)
    spec = release["values"]["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False
    assert spec["ruleSelectorNilUsesHelmValues"] is False
    assert len(_kind(objects, "PodMonitor")) == 3 and len(_kind(objects, "PrometheusRule")) == 1


def test_none_mode_renders_no_scrape_or_rule_objects(tmp_path):
    objects = _render_with(tmp_path, "onprem-h100", {"prometheus": "none", "dashboards": False})
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"PodMonitor", "ServiceMonitor", "PrometheusRule", "PodMonitoring", "Rules"}
    assert not [c for c in _kind(objects, "ConfigMap") if "dashboard" in c["metadata"]["name"]]
    assert not [r for r in _kind(objects, "ClusterRole") if "metrics" in r["metadata"]["name"]]


def test_monitor_labels_reach_every_monitor_and_rule(tmp_path):
    objects = _render_with(tmp_path, "onprem-h100", {"monitorLabels": {"release": "kube-prometheus-stack"}})
    tagged = [o for o in objects if o["kind"] in {"PodMonitor", "ServiceMonitor", "PrometheusRule"}]
    assert len(tagged) == 5
    assert all(o["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in tagged)


# --- dashboards and the plan's live table --------------------------------------------------------


def test_dashboards_render_deterministically_with_the_issue_figures():
    config = _config()
    obs = _obs(config)
    boards = {b.key: b for b in fleet_dashboards(obs)}
    for board in boards.values():
        assert dashboard_json(obs.pool, board) == dashboard_json(obs.pool, board)
    fleet = " ".join(dashboard_queries(boards["fleet"]))
    for metric in (
        "vllm:generation_tokens_total",
        "llm_d_epp_request_total",
        "vllm:num_preemptions_total",
        "vllm:external_prefix_cache_hits_total",
        "llm_d_epp_request_ttft_seconds_bucket",
        "llm_d_epp_flow_control_request_queue_duration_seconds_bucket",
        "vllm:nixl_bytes_transferred_sum",
        "vllm:nixl_num_failed_transfers_total",
        "vllm:kv_offload_store_bytes_total",
        "vllm:kv_offload_load_time_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    ):
        assert metric in fleet, metric
    assert "by (pod, engine)" in " ".join(dashboard_queries(boards["decode"]))
    router = " ".join(dashboard_queries(boards["router"]))
    assert (
        "llm_d_router_epp_kv_cache_index_lookup_hits_total" in router
        and "leader_election_master_status" in router
    )


def test_docs_list_every_dashboard_panel_and_alert():
    docs = (REPO / "docs" / "observability.md").read_text()
    config = _config()
    obs = _obs(config)
    for board in fleet_dashboards(obs):
        for panel in board.panels():
            assert f"| {board.key} | {panel.title} |" in docs, (board.key, panel.title)
    for alert in fleet_alerts(obs):
        assert f"| `{alert.name}` | {alert.severity} |" in docs, alert.name


def test_plan_prints_each_figure_next_to_its_panel_and_query(capsys):
    assert run(["plan", "onprem-h100"]) == 0
    out = capsys.readouterr().out
    config = _config()
    table = live_table(config, plan_fleet(config))
    assert fit_tables(table) in out  # the plan prints it fitted to 100 columns
    figures = {f.figure: f for f in live_figures(config, plan_fleet(config))}
    assert figures["decode KV cache per rank"].planned.startswith("476,789 tokens")
    assert "| rank endpoints the router picks from | 544 |" in table
    assert 'count(up{namespace="llm-d", role="decode"} == 1)' in table
