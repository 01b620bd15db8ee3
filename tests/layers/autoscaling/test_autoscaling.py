"""Per-role autoscaling (serving.autoscaling): config rules naming their keys, the External
DisaggregatedSet roles, the ScaledObjects KEDA reads, the plan sized for the maxima, and KEDA's
install, against the rendered objects of the shipped variant stack."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.metrics_catalogue.catalogue import catalogue
from llmd_fleet.cli.check import CrdSchemas
from llmd_fleet.layers.autoscaling.component import (
    decode_kv_query,
    prefill_backlog_query,
    scaled_object_spec,
)
from llmd_fleet.layers.router.epp_config import _index_size, build_epp_config, epp_cpus
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import CRD_DIR, problems_by_key, stack_raw_config

STACK = "onprem-h100-autoscale"


@pytest.fixture
def raw() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(STACK))


def _set(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    *parents, leaf = path.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return raw


A = "llmd-fleet:serving.autoscaling"
BAD = [
    ("serving.autoscaling.prefill.minInstances", 4, f"{A}.prefill.minInstances", "must equal"),
    # The old variant's start: instances 3 above minInstances 2, which LWS and KEDA never honour.
    ("serving.roles.prefill.instances", 3, f"{A}.prefill.minInstances", "starts at minInstances"),
    ("serving.autoscaling.decode.maxInstances", 2, f"{A}.decode.maxInstances", "at least"),
    ("serving.autoscaling.decode.maxInstances", 7, f"{A}.decode.maxInstances", "need 76 nodes"),
    ("serving.autoscaling.decode.maxInstances", 10**9, f"{A}.decode.maxInstances", "<= 4096"),
    ("serving.autoscaling.decode.maxInstances", -1, f"{A}.decode.maxInstances", ">= 1"),
    ("serving.autoscaling.prefill.minInstances", 0, f"{A}.prefill.minInstances", ">= 1 instances"),
    ("serving.autoscaling.prefill.cooldownSeconds", 2700, f"{A}.prefill.cooldownSeconds", "longer than"),
    ("serving.autoscaling.prefill.cooldownSeconds", 7200, f"{A}.prefill.cooldownSeconds", "<= 3600"),
    ("serving.modelLoadMinutes", 60, f"{A}.decode.cooldownSeconds", "the default"),
    ("serving.drainSeconds", 1790, "llmd-fleet:serving.drainSeconds", "at most 1740"),
    (
        "serving.autoscaling.prefill.targetBacklogSeconds",
        float("inf"),
        f"{A}.prefill.targetBacklogSeconds",
        "",
    ),
    ("serving.autoscaling.prefill.targetBacklogSeconds", 0, f"{A}.prefill.targetBacklogSeconds", "> 0"),
    (
        "serving.autoscaling.decode.targetKvCacheUtilization",
        1.5,
        f"{A}.decode.targetKvCacheUtilization",
        "<= 1",
    ),
    (
        "serving.autoscaling.prefill.prefillTokensPerSecond",
        None,
        f"{A}.prefill.prefillTokensPerSecond",
        "required",
    ),
    ("serving.autoscaling.prefill.pollingIntervalSeconds", 1, f"{A}.prefill.pollingIntervalSeconds", ">= 5"),
    ("serving.autoscaling.keda", "helm", f"{A}.keda", "'install'"),
    ("serving.autoscaling.kedaNamespace", "KEDA;rm -rf", f"{A}.kedaNamespace", ""),
    ("serving.autoscaling.prometheusAddress", "http://x/$(id)", f"{A}.prometheusAddress", "http(s) URL"),
    ("serving.autoscaling.prometheusAddress", "file:///etc/passwd", f"{A}.prometheusAddress", "http(s) URL"),
    ("serving.autoscaling.decode.replicas", 3, f"{A}.decode.replicas", "unknown key"),
    ("observability.prometheus", "none", f"{A}.prometheusAddress", "required unless"),
    ("router.mode", "active-active", f"{A}.prefill.enabled", "active-passive"),
]


@pytest.mark.parametrize(("path", "value", "key", "words"), BAD, ids=[f"{p}={v!r}" for p, v, *_ in BAD])
def test_bad_autoscaling_input_names_the_key(raw, path, value, key, words):
    if path == "router.mode":
        raw = _set(raw, "router.prefixRouting", "precise")
        raw = _set(raw, "router.flowControl", False)
    problems = problems_by_key(_set(raw, path, value))
    assert key in problems, problems
    assert words in problems[key], problems[key]


def test_the_variant_parses_and_the_reference_has_no_autoscaling(raw):
    config = parse_config(raw)
    assert config.serving.autoscaling is not None
    assert config.serving.autoscaling.prefill.enabled and config.serving.autoscaling.decode.enabled
    reference = parse_config(stack_raw_config())
    assert reference.serving.autoscaling is None
    assert not any(r.autoscaled for r in plan_fleet(reference).roles)


def test_an_explicit_address_lifts_the_prometheus_requirement(raw):
    raw = _set(raw, "observability.prometheus", "none")
    raw = _set(raw, "serving.autoscaling.prometheusAddress", "https://thanos.example.internal:10902")
    config = parse_config(raw)
    spec = scaled_object_spec(config, plan_fleet(config), plan_fleet(config).role("decode"))
    assert spec["triggers"][0]["metadata"]["serverAddress"] == "https://thanos.example.internal:10902"


def test_disabled_roles_keep_their_instances(raw):
    raw = _set(raw, "serving.autoscaling.prefill.enabled", False)
    # A maximum the node group could never hold is ignored while the role is off.
    raw = _set(raw, "serving.autoscaling.prefill.maxInstances", 4000)
    plan = plan_fleet(parse_config(raw))
    prefill, decode = plan.role("prefill"), plan.role("decode")
    assert not prefill.autoscaled and prefill.max_instances == prefill.min_instances == 2
    assert decode.autoscaled and (decode.min_instances, decode.max_instances) == (3, 5)


def test_the_plan_sizes_surge_and_router_for_the_maxima(raw):
    plan = plan_fleet(parse_config(raw))
    # 5 x 4 + 5 x 8 = 60 of 68 nodes at the maxima: one decode instance of surge fits.
    assert (plan.role("decode").max_surge, plan.role("decode").max_unavailable) == (1, 0)
    assert plan.router.endpoints == 5 * 32 + 5 * 64
    # One more prefill instance and the surge no longer fits: decode replaces in place.
    tighter = plan_fleet(parse_config(_set(raw, "serving.autoscaling.prefill.maxInstances", 7)))
    assert (tighter.role("decode").max_surge, tighter.role("decode").max_unavailable) == (0, 1)


def _objects(rendered: Any, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendered(STACK) if o["kind"] == kind]


def test_autoscaled_roles_are_external_and_carry_no_replicas(rendered):
    (dset,) = _objects(rendered, "DisaggregatedSet")
    roles = {r["name"]: r for r in dset["spec"]["roles"]}
    for name in ("prefill", "decode"):
        assert roles[name]["scaling"] == {"mode": "External"}
        assert "replicas" not in roles[name]["spec"]
    # The LWS webhook refuses External roles with more than one slice.
    assert dset["spec"].get("slices", 1) == 1
    (fixed,) = [o for o in rendered("onprem-h100") if o["kind"] == "DisaggregatedSet"]
    assert all("scaling" not in r and r["spec"]["replicas"] > 0 for r in fixed["spec"]["roles"])


def test_scaled_objects_target_the_role_scalers(rendered):
    scaled = {o["metadata"]["name"]: o for o in _objects(rendered, "ScaledObject")}
    assert sorted(scaled) == ["glm52-decode", "glm52-prefill"]
    for role, (low, high) in {"prefill": (2, 5), "decode": (3, 5)}.items():
        spec = scaled[f"glm52-{role}"]["spec"]
        assert scaled[f"glm52-{role}"]["metadata"]["namespace"] == "llm-d"
        assert spec["scaleTargetRef"] == {
            "apiVersion": "disaggregatedset.x-k8s.io/v1",
            "kind": "DisaggregatedSetRoleScaler",
            "name": f"glm52-{role}",
        }
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (low, high)
        behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        # Cooldown longer than the 45-minute model load; one instance per 600 s drain + 60 s.
        assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 45 * 60 + 300 > 45 * 60
        assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 660}]
        # KEDA's cooldownPeriod only times a scale to zero (minReplicaCount >= 1 never takes it):
        # rendering it would claim a delay it never applies; the stabilization window is the one.
        assert spec["minReplicaCount"] >= 1 and "cooldownPeriod" not in spec
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        assert trigger["metadata"]["serverAddress"] == "http://prometheus-operated.monitoring.svc:9090"
    prefill = scaled["glm52-prefill"]["spec"]["triggers"][0]
    assert prefill["metricType"] == "AverageValue" and prefill["metadata"]["threshold"] == "30"
    decode = scaled["glm52-decode"]["spec"]["triggers"][0]
    assert decode["metricType"] == "Value" and decode["metadata"]["threshold"] == "0.8"


def test_the_scaler_kind_has_the_scale_subresource_the_scaled_objects_need():
    crd = yaml.safe_load(
        (CRD_DIR / "disaggregatedset.x-k8s.io" / "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml")
        .read_text()
        .removeprefix("---\n")
    )
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1"
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }


def test_scaled_objects_validate_against_keda_schema(rendered):
    validator = CrdSchemas([CRD_DIR]).validator("keda.sh", "v1alpha1", "ScaledObject")
    for scaled in _objects(rendered, "ScaledObject"):
        broken = copy.deepcopy(scaled)
        broken["spec"]["pollingInterval"] = 0  # below the schema's minimum of 1
        assert not list(validator.iter_errors(scaled))
        assert list(validator.iter_errors(broken))


def test_prefill_reads_only_the_leaders_in_flight_tokens(raw):
    config = parse_config(raw)
    query = prefill_backlog_query(config, plan_fleet(config))
    assert 'leader_election_master_status{namespace="llm-d", name="epp-llm-d-glm52.llm-d.ai"}) == 1' in query
    assert query.endswith("/ 100000")
    # A single EPP replica elects no leader: its series is the only one.
    single = parse_config(_set(raw, "router.replicas", 1))
    assert "leader_election" not in prefill_backlog_query(single, plan_fleet(single))


def test_prefill_counts_only_live_endpoints_of_its_own_producer(raw):
    # At the pinned router a removed endpoint's in-flight series is never pruned (llm-d-router
    # #2529): the query keeps only endpoints the EPP's per-endpoint queue gauge, rebuilt every
    # scrape, still lists, joined per EPP pod (llm-d's keda-epp-token-aware README workaround).
    # `make promtool` evaluates it on a removed endpoint's frozen series.
    config = parse_config(raw)
    query = prefill_backlog_query(config, plan_fleet(config))
    assert 'producer_name="inflight-load"' in query
    assert (
        'and on (pod, target_pod) label_replace(llm_d_epp_per_endpoint_queue_size{namespace="llm-d", '
        'name="glm52"}, "target_pod", "$1", "model_server_endpoint", "(.+)")' in query
    )
    assert "label_replace(llm_d_epp_inflight_tokens{" in query and '"endpoint_name", "(.+)")' in query
    # The producer the EPP config names is the one the query reads.
    epp = build_epp_config(config, plan_fleet(config), "http://tokenizer:8000")
    (producer,) = [p.name for p in epp.plugins if p.type == "inflight-load-producer"]
    assert f'producer_name="{producer}"' in query


def test_scaling_queries_read_metrics_the_fleet_exposes(raw):
    config = parse_config(raw)
    for query in (prefill_backlog_query(config, plan_fleet(config)), decode_kv_query(config)):
        assert catalogue().problems(query) == [], query


def test_the_in_flight_producer_is_added_only_for_prefill_autoscaling(raw):
    def producers(config_raw: dict[str, Any]) -> list[str]:
        config = parse_config(config_raw)
        epp = build_epp_config(config, plan_fleet(config), "http://tokenizer:8000")
        return [p.type for p in epp.plugins]

    assert "inflight-load-producer" in producers(raw)
    assert "inflight-load-producer" not in producers(_set(raw, "serving.autoscaling.prefill.enabled", False))
    assert "inflight-load-producer" not in producers(stack_raw_config())


def test_keda_is_installed_pinned_unless_preinstalled(raw, tmp_path: Path):
    from llmd_fleet.cli.main import run

    out = tmp_path / "out"
    assert run(["render", STACK, "--out", str(out)]) == 0
    release = yaml.safe_load((out / "helm" / "keda.keda.yaml").read_text())
    assert (release["chart"], release["version"]) == ("keda", versions().chart("keda").version)
    # Least privilege: the operator may scale the role scalers, not `*/scale` of every group.
    assert release["values"]["rbac"]["scaledRefKinds"] == [
        {"apiGroup": "disaggregatedset.x-k8s.io", "kind": "disaggregatedsetrolescalers"}
    ]
    assert sorted(p.name for p in (out / "manifests" / "keda").iterdir()) == [
        f"networkpolicy-keda-{s}.yaml"
        for s in ("default-deny", "dns", "metrics-adapter", "operator", "webhooks")
    ]


def _synthesize(tmp_path: Path, edit: Any) -> Any:
    from llmd_fleet.cli.synth import synthesize
    from tests.support import STACKS_DIR

    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    edit(document["config"]["llmd-fleet:serving"]["autoscaling"])
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(document))
    return synthesize(tmp_path, STACK)


def test_preinstalled_keda_installs_nothing_but_the_scaled_objects(tmp_path):
    synthesis = _synthesize(tmp_path, lambda a: a.update(keda="preinstalled"))
    types = [r.type for r in synthesis.resources]
    assert not [r for r in synthesis.resources if r.type.endswith("helm.sh/v3:Release") and "keda" in r.name]
    assert not [r for r in synthesis.resources if r.name.startswith("autoscaling-keda")]
    assert types.count("kubernetes:keda.sh/v1alpha1:ScaledObject") == 2


def test_the_component_parents_its_children(tmp_path):
    synthesis = _synthesize(tmp_path, lambda a: None)
    urns = [r.urn for r in synthesis.registrations if r.urn.rsplit("::", 1)[-1].startswith("autoscaling-")]
    names = {urn.rsplit("::", 1)[-1] for urn in urns}
    assert names >= {
        "autoscaling-prefill",
        "autoscaling-decode",
        "autoscaling-keda",
        "autoscaling-keda-namespace",
    }
    assert all("llmd-fleet:serving:Autoscaling$" in urn for urn in urns), urns


def test_only_the_enabled_role_gets_a_scaled_object(tmp_path):
    synthesis = _synthesize(tmp_path, lambda a: a["prefill"].update(enabled=False))
    scaled = [r.name for r in synthesis.resources if r.type.endswith(":ScaledObject")]
    assert scaled == ["autoscaling-decode"]


def test_keda_operator_egress_follows_the_prometheus_address(raw):
    from llmd_fleet.layers.autoscaling.flows import keda_namespace_flows

    default = keda_namespace_flows(parse_config(raw))["operator"]["egress"][0]
    assert default == {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 9090}],
    }
    explicit = _set(raw, "serving.autoscaling.prometheusAddress", "https://thanos.example.internal")
    # An address the stack cannot resolve offline: its port (https: 443), any destination.
    assert keda_namespace_flows(parse_config(explicit))["operator"]["egress"][0] == {
        "ports": [{"protocol": "TCP", "port": 443}]
    }


def test_an_autoscaled_role_starts_at_its_minimum(raw):
    # LWS seeds a fresh External role's scaler at 1 and KEDA lifts it to minReplicaCount, so the
    # config's start (`instances`) must be the minimum; the shipped variant says so.
    config = parse_config(raw)
    plan = plan_fleet(config)
    for name in ("prefill", "decode"):
        role = plan.role(name)
        assert role.autoscaled and role.instances == role.min_instances
        spec = scaled_object_spec(config, plan, role)
        assert spec["minReplicaCount"] == getattr(config.serving.roles, name).instances


def test_the_router_is_sized_for_the_maxima_not_the_start(raw):
    # The prefix index and the EPP's CPU follow the most ranks the roles can run: starting
    # lower (the same maxima) changes neither.
    high = raw
    for name in ("prefill", "decode"):
        high = _set(high, f"serving.roles.{name}.instances", 5)
        high = _set(high, f"serving.autoscaling.{name}.minInstances", 5)
    low_plan, high_plan = plan_fleet(parse_config(raw)), plan_fleet(parse_config(high))
    assert _index_size(low_plan) == _index_size(high_plan)
    assert epp_cpus(low_plan, 10) == epp_cpus(high_plan, 10)
