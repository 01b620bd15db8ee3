"""The gateway proxies' NetworkPolicy (pure), with an in-cluster implementation (agentgateway,
istio); a managed gateway (GKE's) runs no proxy pod in the namespace.

| from | to | ports |
|---|---|---|
| anyone | gateway proxies | the listener port |
| observability namespace | gateway proxies | metrics |
| gateway proxies | endpoint picker | ext_proc gRPC |
| gateway proxies | serving pods | client ports |
| gateway proxies | the implementation's control plane | its xDS port |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges, PolicySpec, namespace, pods, tcp
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.layers.gateway.specs import (
    GATEWAY_NAME,
    GATEWAY_NAME_LABEL,
    GATEWAY_POLICY,
    IMPLEMENTATION_NAMESPACE,
)
from llmd_fleet.layers.router.specs import GRPC_PORT, epp_selector
from llmd_fleet.layers.serving.specs import policy_ports, pool_selector
from llmd_fleet.plan.fleet import FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

GATEWAY_XDS_PORT = {"agentgateway": 9978, "istio": 15012}
"""Where a gateway proxy gets its configuration: agentgateway's controller xDS (chart value
controller.service.ports.agwGrpc), istiod's xDS and CA."""
GATEWAY_METRICS_PORT = 15020
"""Prometheus port of agentgateway and Istio gateway proxies."""


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    """The layer's NetworkPolicies in the serving namespace, by name: the flows of the module's
    table (none with a managed gateway); the layer's `namespace_flows` in
    llmd_fleet/stack/registry.py."""
    implementation = config.gateway.implementation
    if implementation in MANAGED_IMPLEMENTATIONS:
        return {}
    return {
        GATEWAY_POLICY: {
            "podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: GATEWAY_NAME}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                # Clients: the Gateway's listener, from anywhere its Service admits.
                {"ports": tcp(config.gateway.listener_port)},
                {"from": [namespace(config.observability.namespace)], "ports": tcp(GATEWAY_METRICS_PORT)},
            ],
            "egress": [
                {"to": [pods(epp_selector(config))], "ports": tcp(GRPC_PORT)},
                {"to": [pods(pool_selector(config))], "ports": tcp(*policy_ports(plan).client)},
                {
                    "to": [namespace(IMPLEMENTATION_NAMESPACE[implementation])],
                    "ports": tcp(GATEWAY_XDS_PORT[implementation]),
                },
            ],
        }
    }
