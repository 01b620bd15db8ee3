"""The day-two replay's scaling scenario (docs/day-two.md, "Scaling"): the twin's
kube-controller-manager runs the HorizontalPodAutoscaler KEDA would make from each rendered
ScaledObject, reading the trigger's metric through the external metrics API from a stand-in for
KEDA's metrics server that evaluates the trigger's query on the replay's Prometheus.

What is real: the HPA controller (kube-controller-manager's `horizontalpodautoscaling`, on with
`--controllers=*`), the API server's aggregation layer, the DisaggregatedSetRoleScaler's /scale
subresource and the LWS controller acting on it, Prometheus and the endpoint pickers' metrics.
Stand-ins: KEDA's operator (the HPA is derived here, `keda_hpa`, as its controller builds it) and
KEDA's metrics server (devtools/daytwo/metrics_adapter, built with
sigs.k8s.io/custom-metrics-apiserver; it answers the trigger's query as KEDA's Prometheus scaler
reads it).

KEDA facts (kedacore/keda, read from source): controllers/keda/hpa.go `newHPAForScaledObject`:
the HPA is named `keda-hpa-<ScaledObject>`, minReplicas is minReplicaCount when above 0 (else 1),
maxReplicas is maxReplicaCount (default 100), behavior is
`advanced.horizontalPodAutoscalerConfig.behavior` as it is, labels are the ScaledObject's plus
`app.kubernetes.io/{name,part-of,managed-by}`, and each external metric's selector is
`scaledobject.keda.sh/name=<ScaledObject>` (`getScaledObjectMetricSpecs`).
pkg/scalers/prometheus_scaler.go `GetMetricSpecForScaling`: the metric is named
`s<trigger index>-prometheus` (`GenerateMetricNameWithIndex`), its target
`GetMetricTargetMili(metricType, threshold)`: the threshold in milli-units as `averageValue`
(AverageValue) or `value` (Value). cooldownPeriod only times a scale to zero, which an HPA with
minReplicas >= 1 never does, so it maps to nothing here.
"""

import base64
import json
import math
import random
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import tool_cache
from devtools.dataplane import netns, replay

KEDA_API = "keda.sh/v1alpha1"
ROLE_SCALER_API = "disaggregatedset.x-k8s.io/v1"
ROLE_SCALER_KIND = "DisaggregatedSetRoleScaler"
HPA_API = "autoscaling/v2"
SCALED_OBJECT_LABEL = "scaledobject.keda.sh/name"
EXTERNAL_METRICS = "external.metrics.k8s.io"
APISERVICE_NAME = f"v1beta1.{EXTERNAL_METRICS}"
# KEDA's default maxReplicaCount and the HPA's floor of minReplicas (controllers/keda/hpa.go).
KEDA_DEFAULT_MAX = 100
KEDA_DEFAULT_MIN = 1
# The stand-in's Service: ExternalName `localhost`, so the aggregator's proxy dials the API
# server's own host (k8s.io/apiserver pkg/util/proxy ResolveCluster: an ExternalName Service is
# reached at `https://<externalName>:<APIService port>`), verified as `<name>.<namespace>.svc`.
ADAPTER_NAME = "llmd-fleet-twin-metrics-adapter"
ADAPTER_NAMESPACE = "kube-system"
GOMOD_DIR = Path(__file__).resolve().parent / "metrics_adapter"
MODULE = "sigs.k8s.io/custom-metrics-apiserver"


class BuildError(Exception):
    """The external-metrics stand-in could not be built."""


# --- KEDA's HPA from a ScaledObject (pure) ------------------------------------------------


def milli(threshold: str) -> str:
    """A threshold as KEDA's `GetMetricTargetMili` makes it: int64(threshold x 1000) milli-units,
    written as a Kubernetes quantity."""
    return f"{int(float(threshold) * 1000)}m"


def metric_name(index: int, trigger: dict[str, Any]) -> str:
    """KEDA's external metric name of trigger `index` (only the Prometheus scaler is mapped)."""
    if trigger.get("type") != "prometheus":
        raise ValueError(f"trigger {index}: type {trigger.get('type')!r} is not mapped (only prometheus)")
    return f"s{index}-prometheus"


def keda_hpa(scaled_object: dict[str, Any]) -> dict[str, Any]:
    """The HorizontalPodAutoscaler KEDA's operator makes for `scaled_object`. Pure."""
    meta, spec = scaled_object["metadata"], scaled_object["spec"]
    name = meta["name"]
    hpa_name = f"keda-hpa-{name}"[:63]
    metrics = []
    for index, trigger in enumerate(spec.get("triggers", [])):
        kind = trigger.get("metricType", "AverageValue")
        field = {"AverageValue": "averageValue", "Value": "value"}.get(kind)
        if field is None:
            raise ValueError(
                f"{name}: trigger {index}: metricType {kind!r} is not mapped (AverageValue, Value)"
            )
        metrics.append(
            {
                "type": "External",
                "external": {
                    "metric": {
                        "name": metric_name(index, trigger),
                        "selector": {"matchLabels": {SCALED_OBJECT_LABEL: name[:63]}},
                    },
                    "target": {"type": kind, field: milli(trigger["metadata"]["threshold"])},
                },
            }
        )
    minimum = spec.get("minReplicaCount")
    hpa_spec: dict[str, Any] = {
        "scaleTargetRef": dict(spec["scaleTargetRef"]),
        "minReplicas": minimum if minimum else KEDA_DEFAULT_MIN,
        "maxReplicas": spec.get("maxReplicaCount", KEDA_DEFAULT_MAX),
        "metrics": metrics,
    }
    behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior")
    if behavior:
        hpa_spec["behavior"] = behavior
    labels = {
        "app.kubernetes.io/name": hpa_name,
        "app.kubernetes.io/part-of": name[:63],
        "app.kubernetes.io/managed-by": "keda-operator",
        **(meta.get("labels") or {}),
    }
    return {
        "apiVersion": HPA_API,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": hpa_name, "namespace": meta["namespace"], "labels": labels},
        "spec": hpa_spec,
    }


def keda_bool(text: object, default: bool) -> bool:
    """A trigger's boolean metadata as KEDA's typed config reads it (`strconv.ParseBool`). Pure."""
    if text is None:
        return default
    word = str(text)
    if word in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if word in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(f"{word!r} is not a boolean")


def prometheus_value(body: str, ignore_null: bool) -> float:
    """The value KEDA's Prometheus scaler reads from an instant query's answer
    (pkg/scalers/prometheus_scaler.go `ExecutePromQuery`): an empty result, an empty value or a
    NaN/Inf value is 0 with `ignoreNullValues` (its default) and an error without; more than one
    element is an error. ValueError for each error. Pure."""
    result = json.loads(body)["data"]["result"]
    if not result:
        if ignore_null:
            return 0.0
        raise ValueError("the result is empty")
    if len(result) > 1:
        raise ValueError("the query returned multiple elements")
    value = result[0].get("value") or []
    if not value:
        if ignore_null:
            return 0.0
        raise ValueError("the value list is empty")
    if len(value) < 2:
        raise ValueError("the query did not return enough values")
    number = float(value[1])
    if math.isinf(number) or math.isnan(number):
        if ignore_null:
            return 0.0
        raise ValueError(f"the query returns {number}")
    return number


@dataclass(frozen=True)
class TriggerState:
    """What one pass of KEDA's scale loop read from a ScaledObject's triggers."""

    active: bool
    """Some trigger's value is above its `activationThreshold` (default 0)."""
    error: bool
    """Some trigger could not be read."""
    values: tuple[str, ...]
    """Each trigger's value, or why it could not be read, for the printed line."""


def trigger_state(scaled_object: dict[str, Any], query: Callable[[str], str | None]) -> TriggerState:
    """One pass over the ScaledObject's Prometheus triggers (`keda_hpa` has refused any other
    kind), each query answered by `query` (the answer's body, None when Prometheus does not
    answer) (pkg/scalers/prometheus_scaler.go `GetMetricsAndActivity`: active when the value is
    above `activationThreshold`)."""
    active = error = False
    values = []
    for index, trigger in enumerate(scaled_object["spec"].get("triggers", [])):
        meta = trigger.get("metadata") or {}
        body = query(str(meta["query"]))
        try:
            if body is None:
                raise ValueError("Prometheus did not answer")
            value = prometheus_value(body, keda_bool(meta.get("ignoreNullValues"), True))
        except (ValueError, KeyError, TypeError) as exc:
            error = True
            values.append(f"trigger {index}: error ({exc})")
            continue
        threshold = float(meta.get("activationThreshold") or 0)
        active = active or value > threshold
        values.append(f"trigger {index}: {value:g} (activationThreshold {threshold:g})")
    return TriggerState(active, error, tuple(values))


def keda_scale(spec: dict[str, Any], current: int, state: TriggerState) -> tuple[int, str] | None:
    """What one pass of KEDA's scale loop writes to the target's `/scale`, with the reason, or
    None (kedacore/keda v2.20.2 pkg/scaling/executor/scale_scaledobjects.go `RequestScale`; the
    HPA does every other change). For the loop's first pass at the ScaledObject's creation:
    `scaleToZeroOrIdle` acts at once then unless `initialCooldownPeriod` is set (no
    lastActiveTime yet). Pure."""
    minimum = int(spec.get("minReplicaCount") or 0)
    idle = spec.get("idleReplicaCount")
    if state.active:
        if (idle is not None and current < minimum) or current == 0:
            return (minimum if minimum > 0 else 1), "scaleFromZeroOrIdle: a trigger is active"
        return None
    if state.error:
        return None  # with or without a fallback, the loop writes nothing; the HPA falls back
    if (idle is not None and current > int(idle)) or (current > 0 and minimum == 0):
        if int(spec.get("initialCooldownPeriod") or 0) > 0:
            return None
        return (int(idle) if idle is not None else minimum), "scaleToZeroOrIdle: no trigger is active"
    if idle is None and current < minimum:
        return minimum, "below minReplicaCount and no trigger is active"
    return None


def keda_hpas(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The HPAs KEDA's operator would make from the rendering's ScaledObjects, in their order: what
    the twin applies beside them, since it runs no KEDA (the ScaledObjects themselves are created
    as rendered, by `pulumi up` or the server-side apply, against the vendored CRD). Pure."""
    return [
        keda_hpa(o) for o in objects if o.get("apiVersion") == KEDA_API and o.get("kind") == "ScaledObject"
    ]


def adapter_metrics(objects: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """What the stand-in serves: per ScaledObject and Prometheus trigger, the metric KEDA's HPA asks
    for and the trigger's query. Pure."""
    out = []
    for o in objects:
        if o.get("apiVersion") != KEDA_API or o.get("kind") != "ScaledObject":
            continue
        for index, trigger in enumerate(o["spec"].get("triggers", [])):
            out.append(
                {
                    "namespace": o["metadata"]["namespace"],
                    "scaledObject": o["metadata"]["name"],
                    "metric": metric_name(index, trigger),
                    "query": trigger["metadata"]["query"],
                }
            )
    return out


def aggregation_objects(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The Service and APIService that put the stand-in behind the API server's aggregation layer
    as `v1beta1.external.metrics.k8s.io` (KEDA's metrics server registers the same group). Pure."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE_NAME},
            "spec": {
                "group": EXTERNAL_METRICS,
                "version": "v1beta1",
                "service": {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE, "port": port},
                "caBundle": base64.b64encode(ca_pem).decode(),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


def role_of(scaled_object: dict[str, Any], set_name: str) -> str:
    """The DisaggregatedSet role a ScaledObject scales: its DisaggregatedSetRoleScaler is named
    `<set>-<role>` (llmd_fleet/layers/autoscaling/component.py `role_scaler_name`). Pure."""
    target = scaled_object["spec"]["scaleTargetRef"]["name"]
    prefix = f"{set_name}-"
    if not target.startswith(prefix):
        raise ValueError(f"{target}: not a role scaler of DisaggregatedSet {set_name}")
    return str(target[len(prefix) :])


def starting_replicas(objects: Iterable[dict[str, Any]], set_name: str) -> dict[str, int]:
    """Per autoscaled role, the replicas it runs at without load: its HPA's minReplicas (LWS
    seeds an External role's scaler at 1 and the HPA lifts it there). Pure."""
    return {
        role_of(o, set_name): int(keda_hpa(o)["spec"]["minReplicas"])
        for o in objects
        if o.get("apiVersion") == KEDA_API
        and o.get("kind") == "ScaledObject"
        and o["spec"]["scaleTargetRef"].get("kind") == ROLE_SCALER_KIND
    }


def available(apiservice: dict[str, Any]) -> bool:
    """The APIService's Available condition is True (the aggregator reached the stand-in). Pure."""
    return any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in (apiservice.get("status") or {}).get("conditions") or []
    )


def current_values(status: dict[str, Any]) -> list[str]:
    """The external metrics' current values in an HPA's status (quantities). Pure."""
    out = []
    for m in status.get("currentMetrics") or []:
        current = (m.get("external") or {}).get("current") or {}
        value = current.get("averageValue", current.get("value"))
        if value is not None:
            out.append(str(value))
    return out


def quantity(text: str) -> float:
    """A Kubernetes quantity as a number (the suffixes an HPA status uses: none, m, k, M, G)."""
    scale = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
    if text and text[-1] in scale:
        return float(text[:-1]) * scale[text[-1]]
    return float(text)


def metric_summary(hpa: dict[str, Any], seen: list[str]) -> str:
    """`<name> peaked at <v> (target <type> <t>)` from the values the HPA reported. Pure."""
    metric = hpa["spec"]["metrics"][0]["external"]
    target = metric["target"]
    field = "averageValue" if target["type"] == "AverageValue" else "value"
    peak = f"{max(map(quantity, seen)):g}" if seen else "never read"
    return (
        f"{metric['metric']['name']} peaked at {peak} (target {target['type']} {quantity(target[field]):g})"
    )


def scale_down_window(hpa: dict[str, Any]) -> int | None:
    """The HPA's scale-down stabilization window (the rendered cooldown). Pure."""
    down = (hpa["spec"].get("behavior") or {}).get("scaleDown") or {}
    window = down.get("stabilizationWindowSeconds")
    return None if window is None else int(window)


def ready_groups(pods: list[dict[str, Any]], size: int) -> int:
    """Groups of one role with all `size` pods Ready and none being deleted. Pure."""
    from devtools.twin import lws_checks

    return sum(
        1
        for members in lws_checks.groups(pods).values()
        if len(members) == size
        and all(map(lws_checks.is_ready, members))
        and not any(p["metadata"].get("deletionTimestamp") for p in members)
    )


# --- the burst (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Burst:
    """Requests with long, unique prompts at a fixed rate: each holds its prompt's tokens in the
    leader picker's in-flight count on a prefill endpoint until its first token (the router's
    inflight-load-producer releases the prefill share at the first chunk)."""

    per_second: float
    seconds: float
    prompt_words: int
    max_tokens: int


def burst_entries(template: dict[str, Any], burst: Burst, seed: int = 7) -> list[dict[str, Any]]:
    """The burst's replay entries, made from one steady entry (`template`: its band, headers and
    model). Every prompt starts with its own words, so no prefix is cached and every request is
    prefilled remotely in full. Pure."""
    rng = random.Random(seed)
    shared = replay._text(rng, burst.prompt_words)
    count = int(burst.per_second * burst.seconds)
    out = []
    for i in range(count):
        session = f"burst-{i:04d}"
        headers = {h: (session if v == template["session"] else v) for h, v in template["headers"].items()}
        body = {
            **template["body"],
            "messages": [{"role": "user", "content": f"burst {i}: {replay._text(rng, 24)} {shared}"}],
            "max_tokens": burst.max_tokens,
        }
        out.append(
            {
                **template,
                "id": session,
                "session": session,
                "turn": 0,
                "headers": headers,
                "body": body,
                "at_ms": int(i * 1000 / burst.per_second),
            }
        )
    return out


# --- the line (pure) -------------------------------------------------------------------------


def scale_line(role: str, a: int, b: int, up_s: float, down_s: float | None) -> str:
    """`scale: <role> <a> -> <b> under a burst in <S> s (HPA with external-metrics stand-in),
    back to <a> in <S> s` (docs/day-two.md)."""
    back = f"back to {a} in {down_s:.1f} s" if down_s is not None else f"not back to {a}"
    return (
        f"scale: {role} {a} -> {b} under a burst in {up_s:.1f} s (HPA with external-metrics stand-in), {back}"
    )


def scale_failures(
    role: str,
    a: int,
    b: int,
    maximum: int,
    down_s: float | None,
    failed: int = 0,
    requests: int = 0,
    up_ready: bool = True,
) -> list[str]:
    """The scenario fails when the HPA did not scale up within the burst, when the instances it
    added did not turn Ready (`up_ready`), when the role did not come back down, or when a
    request of the burst was not served (a load that never reached the engines would scale on
    the picker's bookkeeping alone)."""
    failures = []
    if failed:
        failures.append(f"scale: {failed} of the burst's {requests} requests were not served")
    if b <= a:
        failures.append(f"scale: {role} stayed at {a} under the burst (maxReplicas {maximum})")
    elif not up_ready:
        failures.append(f"scale: {role}'s instances added by the HPA ({a} -> {b}) did not all turn Ready")
    if down_s is None:
        failures.append(f"scale: {role} did not come back to {a} after the burst")
    return failures


# --- the stand-in (processes) --------------------------------------------------------------


def ensure() -> Path:
    """The stand-in's binary, built from devtools/daytwo/metrics_adapter first if the cache has
    none (its cold build time printed)."""
    from llmd_fleet.versions import versions

    pinned = versions().tools.custom_metrics_apiserver
    return tool_cache.go_wrapper_tool(
        GOMOD_DIR,
        MODULE,
        pinned,
        "[tools].custom-metrics-apiserver",
        "metrics-adapter",
        "the external-metrics stand-in",
        BuildError,
    )


def adapter_argv(binary: Path, port: int, config: Path, cert: Path, key: Path, kubeconfig: Path) -> list[str]:
    """The stand-in's command: serving on loopback with a certificate for its Service name,
    delegating authentication and authorization to the twin's API server (the library's
    defaults, as every aggregated API server does)."""
    return [
        str(binary),
        f"--metrics-config={config}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--v=2",
    ]


class IntoNamespace:
    """TCP from 127.0.0.1:<port> on the host into `host:port` inside the run's namespace `ns`
    (the stand-in on the host reads the Prometheus in the pod network)."""

    def __init__(self, ns: str, host: str, port: int) -> None:
        self.ns, self.target = ns, (host, port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = int(self.listener.getsockname()[1])
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.listener.settimeout(0.5)
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = netns._in_namespace(
                netns.ns_name(self.ns), lambda: socket.create_connection(self.target, timeout=10)
            )
        except OSError:
            client.close()
            return
        netns.splice(client, upstream)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
