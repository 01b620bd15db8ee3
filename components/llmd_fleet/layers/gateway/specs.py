"""The Gateway's names and traffic sources other layers refer to (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges, Peer, pods
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

GATEWAY_NAME = "llm-d-inference-gateway"
IMPLEMENTATION_NAMESPACE = {"agentgateway": "agentgateway-system", "istio": "istio-system"}
# Managed implementations: the platform runs the controller, the stack installs nothing for it.
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
"""Label in-cluster gateway implementations put on the proxy pods of a Gateway (agentgateway's
deployer, Istio's gateway template)."""


GATEWAY_POLICY = "gateway"
"""The proxies' policy; optional layers add their flows to it (Responses)."""


def gateway_proxies() -> Peer:
    """The Gateway's proxy pods in this namespace (in-cluster implementations)."""
    return pods({GATEWAY_NAME_LABEL: GATEWAY_NAME})


def gateway_peers(config: StackConfig, ranges: ClusterRanges) -> list[Peer]:
    """Where gateway traffic comes from: the Gateway's proxy pods in this namespace, or for a
    managed gateway its proxies' subnet."""
    if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
        peers = [{"ipBlock": {"cidr": cidr}} for cidr in ranges.gateway_sources]
    else:
        peers = [gateway_proxies()]
    # An empty `from` would admit every source.
    assert peers, "a gateway without sources"
    return peers
