"""The endpoint picker's and the tokenizer's NetworkPolicies (pure).

| from | to | ports |
|---|---|---|
| gateway (proxy pods, or GKE's proxy-only subnet) | endpoint picker | ext_proc gRPC |
| GKE load-balancer health checks | endpoint picker | ext_proc and gRPC health |
| observability namespace | endpoint picker, tokenizer | metrics ports |
| endpoint picker | serving pods | client ports (requests, metrics), KV-event publishers |
| endpoint picker | tokenizer | HTTP |
| endpoint picker | the API server | TCP 443 and 6443, any address (its address is not known offline) |
| tokenizer | outside the cluster's pod and Service ranges | TCP 443 (the model hub) |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import (
    API_SERVER_PORTS,
    ClusterRanges,
    PolicySpec,
    health_check_peers,
    model_hub_egress,
    namespace,
    pods,
    tcp,
)
from llmd_fleet.layers.gateway.specs import gateway_peers
from llmd_fleet.layers.router.specs import (
    GRPC_PORT,
    HEALTH_PORT,
    METRICS_PORT,
    TOKENIZER_PORT,
    epp_selector,
    tokenizer_selector,
)
from llmd_fleet.layers.serving.specs import policy_ports, pool_selector
from llmd_fleet.plan.fleet import FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    """The layer's NetworkPolicies in the serving namespace, by name: the flows of the module's
    table; the layer's `namespace_flows` in llmd_fleet/stack/registry.py."""
    ports = policy_ports(plan)
    monitoring = namespace(config.observability.namespace)
    epp = pods(epp_selector(config))
    health_checks = health_check_peers(ranges)
    return {
        "endpoint-picker": {
            "podSelector": {"matchLabels": epp_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": gateway_peers(config, ranges), "ports": tcp(GRPC_PORT)},
                {"from": [monitoring], "ports": tcp(METRICS_PORT)},
                *([{"from": health_checks, "ports": tcp(GRPC_PORT, HEALTH_PORT)}] if health_checks else []),
            ],
            "egress": [
                {"to": [pods(pool_selector(config))], "ports": tcp(*ports.client, *ports.kv_events)},
                {"to": [pods(tokenizer_selector(config))], "ports": tcp(TOKENIZER_PORT)},
                # Watches and the leader lease. The API server's address is known only to the
                # cluster (on EKS its interfaces sit in the pods' own subnets), so any address.
                {"ports": tcp(*API_SERVER_PORTS)},
            ],
        },
        "tokenizer": {
            "podSelector": {"matchLabels": tokenizer_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [epp], "ports": tcp(TOKENIZER_PORT)},
                # Its HTTP server's /metrics (llmd_fleet/layers/observability/component.py scrapes it).
                {"from": [monitoring], "ports": tcp(TOKENIZER_PORT)},
            ],
            # The tokenizer and chat template come from the model hub.
            "egress": [model_hub_egress(ranges)],
        },
    }
