"""NetworkPolicies of KEDA's namespace (pure), with `serving.autoscaling` and `keda: install`:
deny everything, then

| from | to | ports |
|---|---|---|
| KEDA operator | Prometheus pods of the observability namespace (with prometheusAddress: any) | its port |
| the API server | KEDA metrics adapter (the external metrics API the HPA reads) | 6443 |
| the API server | KEDA admission webhooks (ScaledObject validation) | 9443 |
| KEDA metrics adapter | KEDA operator | gRPC 9666 |
| every KEDA pod | the API server | TCP 443 and 6443, any address |
| every KEDA pod | kube-dns | 53 UDP and TCP |

The API server's address is not known offline, so the two flows from it admit any source on the
adapter's and the webhooks' ports; nothing else reaches a KEDA pod. The autoscaling layer has no
flow in the serving namespace: KEDA reads Prometheus, not the pods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmd_fleet.core.netpol import API_SERVER_PORTS, PolicySpec, deny_all_but_dns, namespace, pods, tcp
from llmd_fleet.plan.observability import prometheus_port

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# KEDA's pods and ports (the pinned kedacore/charts keda: the `app` labels of its Deployments, the
# metrics adapter's `service.portHttpsTarget`, the operator's gRPC port the adapter dials through
# `--metrics-service-address`, the webhooks' default `--port`).
KEDA_OPERATOR = {"app": "keda-operator"}
KEDA_METRICS_ADAPTER = {"app": "keda-operator-metrics-apiserver"}
KEDA_WEBHOOKS = {"app": "keda-admission-webhooks"}
KEDA_METRICS_API_PORT = 6443
KEDA_OPERATOR_GRPC_PORT = 9666
KEDA_WEBHOOK_PORT = 9443
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
"""Label prometheus-operator puts on every Prometheus server pod (v0.93.0
pkg/prometheus/server/statefulset.go)."""


def keda_namespace_flows(config: StackConfig) -> dict[str, PolicySpec]:
    """name suffix -> NetworkPolicy spec, for KEDA's namespace (only when the stack installs KEDA)."""
    scaling = config.serving.autoscaling
    assert scaling is not None
    if scaling.prometheus_address is None:
        # The default address: prometheus-operated of the observability namespace.
        prometheus_peer: dict[str, Any] = {
            "to": [{**namespace(config.observability.namespace), **pods(PROMETHEUS_POD)}],
            "ports": tcp(prometheus_port(config)),
        }
    else:
        # An address the stack cannot resolve offline: its port, any destination.
        prometheus_peer = {"ports": tcp(prometheus_port(config))}
    api_server = {"ports": tcp(*API_SERVER_PORTS)}
    return {
        **deny_all_but_dns(),
        "operator": {
            "podSelector": {"matchLabels": dict(KEDA_OPERATOR)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [pods(KEDA_METRICS_ADAPTER)], "ports": tcp(KEDA_OPERATOR_GRPC_PORT)}],
            # The triggers' queries; watches, leader lease and the scale subresource writes.
            "egress": [prometheus_peer, api_server],
        },
        "metrics-adapter": {
            "podSelector": {"matchLabels": dict(KEDA_METRICS_ADAPTER)},
            "policyTypes": ["Ingress", "Egress"],
            # The API server's aggregation layer serves external.metrics.k8s.io from here.
            "ingress": [{"ports": tcp(KEDA_METRICS_API_PORT)}],
            "egress": [
                {"to": [pods(KEDA_OPERATOR)], "ports": tcp(KEDA_OPERATOR_GRPC_PORT)},
                api_server,
            ],
        },
        "webhooks": {
            "podSelector": {"matchLabels": dict(KEDA_WEBHOOKS)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": tcp(KEDA_WEBHOOK_PORT)}],
            "egress": [api_server],
        },
    }
