"""The day-two replay's scaling scenario, its pure parts (devtools/daytwo/scaling.py,
docs/day-two.md "Scaling"): the HPA KEDA's operator makes from a ScaledObject, what the
external-metrics stand-in serves, the aggregation objects, the burst, the line, and the day-two
stack's own autoscaling declaration (short cooldown, a role that can scale up on its nodes)."""

import base64
import threading
from typing import Any

import pytest

from devtools.daytwo import deploy, scaling
from devtools.twin import cluster
from devtools.twin.kube import ApiError, Resource
from devtools.twin.pki import FRONT_PROXY_CLIENT, Pki
from llmd_fleet.layers.autoscaling.component import role_scaler_name, scaled_object_spec
from llmd_fleet.layers.autoscaling.rules import autoscaling_cooldown_seconds
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import REFERENCE_STACK, REPO, stack_raw_config

STACK = "day-two"


def _scaled_object(stack: str = STACK, role: str = "prefill") -> dict[str, Any]:
    config = parse_config(stack_raw_config(stack))
    plan = plan_fleet(config)
    return {
        "apiVersion": scaling.KEDA_API,
        "kind": "ScaledObject",
        "metadata": {
            "name": role_scaler_name(config, role),  # type: ignore[arg-type]
            "namespace": config.serving.namespace,
            "labels": {"app.kubernetes.io/part-of": "llmd-fleet"},
        },
        "spec": scaled_object_spec(config, plan, plan.role(role)),  # type: ignore[arg-type]
    }


def test_the_hpa_is_the_one_keda_builds_from_the_day_two_scaled_object():
    so = _scaled_object()
    hpa = scaling.keda_hpa(so)
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["metadata"]["name"] == "keda-hpa-glm52-prefill"
    assert hpa["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "keda-operator"
    assert hpa["metadata"]["labels"]["app.kubernetes.io/part-of"] == "llmd-fleet"  # the ScaledObject's wins
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "name": "glm52-prefill",
    }
    assert (spec["minReplicas"], spec["maxReplicas"]) == (3, 4)
    (metric,) = spec["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"] == {
        "name": "s0-prometheus",
        "selector": {"matchLabels": {"scaledobject.keda.sh/name": "glm52-prefill"}},
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "50m"}
    # The behavior is the ScaledObject's, unchanged: the harness shortens nothing.
    assert spec["behavior"] == so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]


def test_a_value_trigger_and_keda_defaults():
    so = {
        "apiVersion": scaling.KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {
            "scaleTargetRef": {"name": "t"},
            "minReplicaCount": 0,
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "Value",
                    "metadata": {"query": "q0", "threshold": "0.8"},
                },
                {"type": "prometheus", "metadata": {"query": "q1", "threshold": "12"}},
            ],
        },
    }
    spec = scaling.keda_hpa(so)["spec"]
    # minReplicaCount 0 is HPA minReplicas 1; no maxReplicaCount is KEDA's 100; no behavior.
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 100)
    assert "behavior" not in spec
    assert [m["external"]["metric"]["name"] for m in spec["metrics"]] == ["s0-prometheus", "s1-prometheus"]
    assert spec["metrics"][0]["external"]["target"] == {"type": "Value", "value": "800m"}
    # metricType defaults to AverageValue (KEDA's ScaledObject specification).
    assert spec["metrics"][1]["external"]["target"] == {"type": "AverageValue", "averageValue": "12000m"}


def test_unmapped_triggers_are_refused():
    base = {
        "apiVersion": scaling.KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": "x", "namespace": "n"},
    }
    cpu = {**base, "spec": {"scaleTargetRef": {"name": "t"}, "triggers": [{"type": "cpu", "metadata": {}}]}}
    with pytest.raises(ValueError, match="only prometheus"):
        scaling.keda_hpa(cpu)
    odd = {
        **base,
        "spec": {
            "scaleTargetRef": {"name": "t"},
            "triggers": [{"type": "prometheus", "metricType": "Utilization", "metadata": {"threshold": "1"}}],
        },
    }
    with pytest.raises(ValueError, match="Utilization"):
        scaling.keda_hpa(odd)


def test_the_twin_applies_keda_s_hpa_beside_each_scaled_object():
    so = _scaled_object()
    other = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    (hpa,) = scaling.keda_hpas([other, so])
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["metadata"]["name"] == "keda-hpa-" + so["metadata"]["name"]
    assert scaling.keda_hpas([other]) == []


def test_the_stand_in_serves_the_rendered_query_under_keda_s_metric_name():
    so = _scaled_object()
    (metric,) = scaling.adapter_metrics([so, {"apiVersion": "v1", "kind": "ConfigMap"}])
    assert metric == {
        "namespace": "llm-d",
        "scaledObject": "glm52-prefill",
        "metric": "s0-prometheus",
        "query": so["spec"]["triggers"][0]["metadata"]["query"],
    }
    assert "llm_d_epp_inflight_tokens" in metric["query"]


def test_the_roles_start_at_the_hpa_minimum():
    so = _scaled_object()
    assert scaling.starting_replicas([so], "glm52") == {"prefill": 3}
    assert scaling.role_of(so, "glm52") == "prefill"
    with pytest.raises(ValueError, match="not a role scaler"):
        scaling.role_of(so, "other")


def test_the_api_service_points_at_the_stand_in_through_an_external_name_service():
    service, api = scaling.aggregation_objects(6443, b"PEM")
    assert service["spec"] == {"type": "ExternalName", "externalName": "localhost"}
    assert api["metadata"]["name"] == "v1beta1.external.metrics.k8s.io"
    assert api["spec"]["service"] == {
        "name": service["metadata"]["name"],
        "namespace": service["metadata"]["namespace"],
        "port": 6443,
    }
    assert base64.b64decode(api["spec"]["caBundle"]) == b"PEM"
    assert "insecureSkipTLSVerify" not in api["spec"]


def test_available_reads_the_condition():
    assert scaling.available({"status": {"conditions": [{"type": "Available", "status": "True"}]}})
    assert not scaling.available({"status": {"conditions": [{"type": "Available", "status": "False"}]}})
    assert not scaling.available({})


def test_hpa_status_values_and_summary():
    status = {
        "currentMetrics": [{"type": "External", "external": {"current": {"averageValue": "123m"}}}],
    }
    seen = scaling.current_values(status)
    assert seen == ["123m"]
    assert scaling.quantity("123m") == pytest.approx(0.123)
    assert scaling.quantity("2") == 2.0
    hpa = scaling.keda_hpa(_scaled_object())
    assert scaling.metric_summary(hpa, [*seen, "40m"]) == (
        "s0-prometheus peaked at 0.123 (target AverageValue 0.05)"
    )
    assert "never read" in scaling.metric_summary(hpa, [])
    assert scaling.scale_down_window(hpa) == 90


def _pod(name: str, group: str, ready: bool, going: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {
            "leaderworkerset.sigs.k8s.io/name": "lws",
            "leaderworkerset.sigs.k8s.io/group-index": group,
        },
    }
    if going:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_ready_groups_counts_whole_ready_groups_not_being_deleted():
    pods = [
        _pod("a", "0", True),
        _pod("b", "1", True),
        _pod("c", "2", False),
        _pod("d", "3", True, going=True),
    ]
    assert scaling.ready_groups(pods, 1) == 2
    assert scaling.ready_groups(pods, 2) == 0


def test_the_burst_prompts_are_long_unique_and_paced():
    template = {
        "id": "t",
        "session": "s0",
        "at_ms": 5,
        "phase": "agent",
        "headers": {"x-llm-d-inference-objective": "agent-interactive", "x-session": "s0"},
        "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16},
    }
    burst = scaling.Burst(per_second=4.0, seconds=2.5, prompt_words=50, max_tokens=8)
    entries = scaling.burst_entries(template, burst)
    assert len(entries) == 10
    assert [e["at_ms"] for e in entries[:3]] == [0, 250, 500]
    assert len({e["id"] for e in entries}) == 10
    firsts = {e["body"]["messages"][0]["content"].split()[:5][-1] for e in entries}
    assert len(firsts) > 1  # prompts differ from their first words (no shared prefix)
    for e in entries:
        assert e["headers"]["x-session"] == e["session"]
        assert e["headers"]["x-llm-d-inference-objective"] == "agent-interactive"
        assert e["body"]["max_tokens"] == 8 and e["body"]["model"] == "m"
        assert len(e["body"]["messages"][0]["content"].split()) >= 50


def test_the_scale_line_is_the_issue_s():
    assert scaling.scale_line("prefill", 3, 4, 81.26, 142.04) == (
        "scale: prefill 3 -> 4 under a burst in 81.3 s (HPA with external-metrics stand-in), "
        "back to 3 in 142.0 s"
    )
    assert scaling.scale_line("prefill", 3, 3, 240, None).endswith("not back to 3")
    assert scaling.scale_failures("prefill", 3, 4, 4, 100.0) == []
    assert len(scaling.scale_failures("prefill", 3, 3, 4, None)) == 2
    (burst_failed,) = scaling.scale_failures("prefill", 3, 4, 4, 100.0, failed=2, requests=300)
    assert "2 of the burst's 300 requests were not served" in burst_failed
    # The burst ends at the HPA's decision; the instance it adds must still turn Ready.
    (not_ready,) = scaling.scale_failures("prefill", 3, 4, 4, 100.0, up_ready=False)
    assert not_ready == "scale: prefill's instances added by the HPA (3 -> 4) did not all turn Ready"
    # A role that never scaled up says so once, not also that its new instances were not Ready.
    assert len(scaling.scale_failures("prefill", 3, 3, 4, 100.0, up_ready=False)) == 1


def test_the_day_two_stack_autoscales_prefill_with_a_short_declared_cooldown():
    config = parse_config(stack_raw_config(STACK))
    auto = config.serving.autoscaling
    assert auto is not None and auto.prefill.enabled and not auto.decode.enabled
    cooldown = autoscaling_cooldown_seconds(config.serving, auto.prefill)
    # Longer than the declared model load (the library's rule), far under the default 360 s.
    assert config.serving.model_load_seconds < cooldown <= 120
    # One more instance fits the node group beside decode's instances.
    plan = plan_fleet(config)
    role = plan.role("prefill")
    nodes = role.max_instances * 1 + config.serving.roles.decode.instances * 2
    assert role.max_instances > role.min_instances and nodes <= config.fleet.node_groups["kind"].count


def test_the_api_server_has_the_aggregation_layer(tmp_path):
    state = cluster.State(
        stack=REFERENCE_STACK,
        ports={"etcd": 1, "etcd_peer": 2, "etcd_metrics": 3, "apiserver": 4, "kwok": 5},
        binaries={
            n: f"/bin/{n}" for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
        },
    )
    pki = Pki(tmp_path / "pki")
    lines = cluster.command_lines(state, tmp_path, pki, None)
    api = lines["kube-apiserver"]
    assert f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}" in api
    assert f"--proxy-client-cert-file={pki.front_proxy_client_cert}" in api
    assert f"--proxy-client-key-file={pki.front_proxy_client_key}" in api
    assert f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}" in api
    assert "--requestheader-username-headers=X-Remote-User" in api
    # The controller manager runs every default controller, the HPA's among them.
    assert "--controllers=*" in lines["kube-controller-manager"]
    assert pki.front_proxy_client_cert in pki.files() and pki.front_proxy_ca_cert in pki.files()


def test_the_stand_in_is_built_from_the_pinned_library():
    from llmd_fleet.versions import versions

    gomod = (scaling.GOMOD_DIR / "go.mod").read_text()
    assert f"\t{scaling.MODULE} {versions().tools.custom_metrics_apiserver}\n" in gomod
    main = (scaling.GOMOD_DIR / "main.go").read_text()
    # KEDA's label on the metric's selector is what the stand-in matches a ScaledObject by.
    assert f'"{scaling.SCALED_OBJECT_LABEL}"' in main


class _TwinWithoutScaler:
    """An API server where the ScaledObject exists and its target's `/scale` answers only from
    the `scaler_after`-th look on; records what is applied."""

    def __init__(self, scaler_after: int) -> None:
        self.scaler_after = scaler_after
        self.scale_reads = 0
        self.applied: list[tuple[str, int]] = []

    def read(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    def resource(self, api_version: str, kind: str) -> Resource:
        return Resource(api_version, "disaggregatedsetrolescalers", True)

    def get(self, path: str) -> dict[str, Any]:
        assert path.endswith("/disaggregatedsetrolescalers/glm52-prefill/scale"), path
        self.scale_reads += 1
        if self.scale_reads < self.scaler_after:
            raise ApiError(404, "not found", f"GET {path}")
        return {"spec": {"replicas": 1}}

    def apply(self, obj: dict[str, Any]) -> None:
        self.applied.append((obj["kind"], self.scale_reads))


def _stand_in(twin: _TwinWithoutScaler, monkeypatch: pytest.MonkeyPatch, returned: bool) -> list[Any]:
    monkeypatch.setattr(cluster, "client", lambda root: twin)
    monkeypatch.setattr(deploy, "KEDA_POLL_S", 0.01)
    monkeypatch.setattr(deploy, "KEDA_TARGET_WAIT_S", 0.2)
    deployer = deploy.Deployer([[]], [None], REPO, STACK, by_engine=False)
    left: list[Any] = [_scaled_object()]
    done, failed = threading.Event(), threading.Event()
    if returned:
        done.set()
    deployer._keda_stand_in(left, done, failed)
    return left


def test_the_keda_stand_in_makes_the_hpa_only_once_its_target_answers_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # KEDA's operator checks the scale target before it creates the HPA: an HPA made before the
    # DisaggregatedSet controller made the role's scaler waits for the HPA controller's next sync.
    twin = _TwinWithoutScaler(scaler_after=3)
    left = _stand_in(twin, monkeypatch, returned=False)
    assert left == []
    assert twin.applied == [("HorizontalPodAutoscaler", 3)]


def test_the_keda_stand_in_leaves_a_scaled_object_whose_target_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    twin = _TwinWithoutScaler(scaler_after=10**9)
    left = _stand_in(twin, monkeypatch, returned=True)
    assert [o["kind"] for o in left] == ["ScaledObject"]
    assert twin.applied == []
