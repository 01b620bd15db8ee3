"""The preflight probe pair's NetworkPolicy (pure), with `serving.preflight`: the metadata
exchange between its two pods and nothing else. Its bytes go over the GPU NICs, which no
NetworkPolicy of ours sees (llmd_fleet/security/isolation.py, "Secondary interfaces"); a UCX that
falls back to TCP on the pod network is refused here and fails the probe
(llmd_fleet/layers/preflight/component.py). On GKE (fabric `tcpxo`) UCX's TCP transport would
otherwise pick eth0 (UCX_NET_DEVICES defaults to all devices, openucx src/ucp/core/ucp_context.c;
the TCP transport prefers the default-route interface, src/uct/tcp/tcp_iface.c PREFER_DEFAULT);
the fabric pins it to eth1..eth8 (UCX_NET_DEVICES, llmd_fleet/targets/gke/tcpxo_plan.py), and
UCX binds its listening sockets to those interfaces' addresses only, so it needs no pod-network
port. UCX_TCP_PORT_RANGE is left at 0 (the kernel picks): a pinned range would only narrow
flows no NetworkPolicy here filters.

| from | to | ports |
|---|---|---|
| preflight pod | the other preflight pod | the probe's metadata port |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges, PolicySpec, pods, tcp
from llmd_fleet.layers.preflight.specs import PORT, probe_selector
from llmd_fleet.plan.fleet import FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    """The layer's NetworkPolicies in the serving namespace, by name: the flows of the module's
    table (none with the preflight off); the layer's `namespace_flows` in
    llmd_fleet/stack/registry.py."""
    if not config.serving.preflight.enabled:
        return {}
    probe = pods(probe_selector(config))
    return {
        "preflight": {
            "podSelector": {"matchLabels": probe_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [probe], "ports": tcp(PORT)}],
            "egress": [{"to": [probe], "ports": tcp(PORT)}],
        }
    }
