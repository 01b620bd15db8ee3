"""The ModelExpress server's NetworkPolicy and the serving pods' way to it (pure), with
`serving.weightLoading: modelexpress`. Peer weight transfers run serving pod to serving pod (open
in the serving pods' own policy); the server only answers the pods' gRPC and keeps its records
through the API server.

| from | to | ports |
|---|---|---|
| serving pods | the ModelExpress server | its gRPC port |
| the ModelExpress server | the API server | TCP 443 and 6443 (its metadata lives in custom resources) |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import API_SERVER_PORTS, ClusterRanges, PolicySpec, pods, tcp
from llmd_fleet.layers.modelexpress.specs import server_selector
from llmd_fleet.layers.serving.specs import MODEL_SERVER_POLICY, pool_selector
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.plan.weight_load import MX_SERVER_PORT

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    """The layer's NetworkPolicies in the serving namespace, by name: the flows of the module's
    table (none without `serving.weightLoading: modelexpress`); the layer's `namespace_flows` in
    llmd_fleet/stack/registry.py."""
    if config.serving.weight_loading != "modelexpress":
        return {}
    return {
        MODEL_SERVER_POLICY: {
            "egress": [{"to": [pods(server_selector(config))], "ports": tcp(MX_SERVER_PORT)}]
        },
        "modelexpress-server": {
            "podSelector": {"matchLabels": server_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [pods(pool_selector(config))], "ports": tcp(MX_SERVER_PORT)}],
            "egress": [{"ports": tcp(*API_SERVER_PORTS)}],
        },
    }
