"""The first pass of KEDA's scale loop in the day-two replay's KEDA stand-in (devtools/daytwo/
scaling.py `prometheus_value`, `trigger_state`, `keda_scale`; deploy.py `Deployer._first_pass`),
against kedacore/keda v2.20.2 pkg/scalers/prometheus_scaler.go `ExecutePromQuery` and
pkg/scaling/executor/scale_scaledobjects.go `RequestScale` (docs/day-two.md, "Scaling")."""

import json
import threading
from typing import Any

import pytest

from devtools.daytwo import deploy, scaling
from devtools.twin import cluster
from devtools.twin.kube import ApiError, Resource
from tests.devtools.test_daytwo_scaling import STACK, _scaled_object
from tests.support import REPO


def _answer(*values: str) -> str:
    return json.dumps(
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, v]} for v in values]},
        }
    )


def test_prometheus_values_are_read_as_kedas_scaler_reads_them() -> None:
    assert scaling.prometheus_value(_answer("0.25"), True) == 0.25
    # An empty result, or NaN/Inf, is 0 with ignoreNullValues (its default), an error without.
    for body in (_answer(), _answer("NaN"), _answer("+Inf")):
        assert scaling.prometheus_value(body, True) == 0.0
        with pytest.raises(ValueError):
            scaling.prometheus_value(body, False)
    with pytest.raises(ValueError, match="multiple elements"):
        scaling.prometheus_value(_answer("1", "2"), True)
    with pytest.raises(ValueError, match="did not return enough values"):
        scaling.prometheus_value(json.dumps({"data": {"result": [{"value": [1.0]}]}}), True)


def test_trigger_metadata_booleans_are_parsed_as_go_parses_them() -> None:
    assert scaling.keda_bool(None, True) is True
    assert scaling.keda_bool("false", True) is False
    assert scaling.keda_bool("T", False) is True
    with pytest.raises(ValueError):
        scaling.keda_bool("yes", True)


def _state(so: dict[str, Any], answer: str | None) -> scaling.TriggerState:
    return scaling.trigger_state(so, lambda expr: answer)


def test_a_trigger_is_active_only_above_its_activation_threshold() -> None:
    so = _scaled_object()
    assert not _state(so, _answer("0")).active
    assert _state(so, _answer("0.01")).active
    so["spec"]["triggers"][0]["metadata"]["activationThreshold"] = "0.5"
    assert not _state(so, _answer("0.4")).active
    assert _state(so, _answer("0.6")).active
    silent = _state(so, None)
    assert silent.error and not silent.active
    assert "Prometheus did not answer" in silent.values[0]


def test_the_rendered_scaled_object_is_lifted_to_its_minimum_at_once_when_idle() -> None:
    """The day-two stack's prefill ScaledObject (minReplicaCount 3, no idleReplicaCount): the
    DisaggregatedSet controller seeds its scaler at 1; KEDA's first pass sets 3 unless a trigger is
    active (then the HPA scales) or the trigger cannot be read (then nothing is written)."""
    spec = _scaled_object()["spec"]
    idle = scaling.TriggerState(False, False, ())
    assert scaling.keda_scale(spec, 1, idle) == (3, "below minReplicaCount and no trigger is active")
    assert scaling.keda_scale(spec, 3, idle) is None
    assert scaling.keda_scale(spec, 1, scaling.TriggerState(True, False, ())) is None
    assert scaling.keda_scale(spec, 1, scaling.TriggerState(False, True, ())) is None


@pytest.mark.parametrize(
    ("spec", "current", "active", "expected"),
    [
        # scaleFromZeroOrIdle: active at 0 replicas, to minReplicaCount or 1.
        ({"minReplicaCount": 0}, 0, True, 1),
        ({"minReplicaCount": 2}, 0, True, 2),
        ({"minReplicaCount": 2, "idleReplicaCount": 0}, 0, True, 2),
        # scaleToZeroOrIdle: no lastActiveTime yet, so at once unless initialCooldownPeriod is set.
        ({"minReplicaCount": 0}, 2, False, 0),
        ({"minReplicaCount": 0, "initialCooldownPeriod": 60}, 2, False, None),
        ({"minReplicaCount": 2, "idleReplicaCount": 0}, 2, False, 0),
        # Nothing to do.
        ({"minReplicaCount": 0}, 0, False, None),
        ({"minReplicaCount": 1}, 4, True, None),
    ],
)
def test_request_scale_cases(spec: dict[str, Any], current: int, active: bool, expected: int | None) -> None:
    decision = scaling.keda_scale(spec, current, scaling.TriggerState(active, False, ()))
    assert (decision[0] if decision else None) == expected


class _Twin:
    """An API server where the ScaledObject exists and its target's `/scale` says `replicas`;
    records what is applied and patched."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.applied: list[str] = []
        self.patched: list[tuple[str, Any]] = []

    def read(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    def resource(self, api_version: str, kind: str) -> Resource:
        return Resource(api_version, "disaggregatedsetrolescalers", True)

    def get(self, path: str) -> dict[str, Any]:
        return {"spec": {"replicas": self.replicas}}

    def apply(self, obj: dict[str, Any]) -> None:
        self.applied.append(obj["kind"])

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        if method != "PATCH":
            raise ApiError(405, "not allowed", f"{method} {path}")
        self.patched.append((path, body))
        return body


def _run_stand_in(twin: _Twin, monkeypatch: pytest.MonkeyPatch, answer: str | None) -> list[str]:
    monkeypatch.setattr(cluster, "client", lambda root: twin)
    asked: list[str] = []

    def query(expr: str) -> str | None:
        asked.append(expr)
        return answer

    deployer = deploy.Deployer([[]], [None], REPO, STACK, by_engine=False, query=query)
    deployer.say = deployer.lines.append  # type: ignore[method-assign,assignment]
    so = _scaled_object()
    deployer._keda_stand_in([so], threading.Event(), threading.Event())
    assert asked == [so["spec"]["triggers"][0]["metadata"]["query"]]
    # The next revision's up leaves the ScaledObject as it is: its HPA is applied again, and no
    # new scale loop starts (KEDA's keeps running).
    lines = list(deployer.lines)
    deployer._keda_stand_in([_scaled_object()], threading.Event(), threading.Event())
    assert len(asked) == 1 and deployer.lines == lines
    return lines


def test_the_stand_in_writes_the_minimum_to_scale_once_the_hpa_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    twin = _Twin(replicas=1)
    lines = _run_stand_in(twin, monkeypatch, _answer("0"))
    assert twin.applied == ["HorizontalPodAutoscaler"] * 2
    assert twin.patched == [
        ("/apis/disaggregatedset.x-k8s.io/v1/namespaces/llm-d/disaggregatedsetrolescalers/glm52-prefill/scale",
         {"spec": {"replicas": 3}}),
    ]  # fmt: skip
    (line,) = lines
    assert line.startswith(
        "day-two: KEDA stand-in: ScaledObject glm52-prefill: HPA keda-hpa-glm52-prefill made"
    )
    assert line.endswith(
        "DisaggregatedSetRoleScaler glm52-prefill 1 -> 3 (below minReplicaCount and no trigger is active)"
    )


def test_the_stand_in_writes_nothing_when_prometheus_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # KEDA's scaler errors without an answer, and RequestScale writes nothing then: the HPA
    # controller lifts the role to minReplicas at its first sync instead.
    twin = _Twin(replicas=1)
    (line,) = _run_stand_in(twin, monkeypatch, None)
    assert twin.applied == ["HorizontalPodAutoscaler"] * 2 and twin.patched == []
    assert "error (Prometheus did not answer)" in line
    assert line.endswith("DisaggregatedSetRoleScaler glm52-prefill left at 1")
