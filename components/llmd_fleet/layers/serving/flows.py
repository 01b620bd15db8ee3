"""The serving pods' NetworkPolicy (pure).

| from | to | ports |
|---|---|---|
| gateway (proxy pods, or GKE's proxy-only subnet), endpoint picker | serving pods | the pool's target ports |
| endpoint picker | serving pods | KV-event publishers |
| serving pod | serving pod of the same fleet | any port (DP RPC, NIXL, p2p KV, NCCL/Gloo bootstrap) |
| observability namespace | serving pods | every engine port and the DP supervisors (metrics) |
| GKE load-balancer health checks | serving pods | client ports |
| serving pods (vLLM only) | outside the cluster's pod and Service ranges | TCP 443 (the model hub) |

Between serving pods every port is open: vLLM's DP coordinator, torch.distributed (NCCL/Gloo
bootstrap) and UCX's TCP transport pick ephemeral ports, so the named ports (DP RPC, NIXL side
channel, p2p, KV events) are not all they use. RDMA, EFA and TCPXO traffic on the GPU NICs is not
pod-network traffic and no NetworkPolicy of ours sees it; on GKE that includes NIXL's UCX TCP,
pinned to the GPU NICs by the `tcpxo` fabric (llmd_fleet/security/isolation.py, "Secondary
interfaces").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import (
    ClusterRanges,
    PolicySpec,
    health_check_peers,
    model_hub_egress,
    namespace,
    pods,
    tcp,
)
from llmd_fleet.layers.gateway.specs import gateway_peers
from llmd_fleet.layers.router.specs import epp_selector
from llmd_fleet.layers.serving.specs import MODEL_SERVER_POLICY, policy_ports, pool_selector
from llmd_fleet.plan.fleet import FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    """The layer's NetworkPolicies in the serving namespace, by name: the flows of the module's
    table; the layer's `namespace_flows` in llmd_fleet/stack/registry.py."""
    ports = policy_ports(plan)
    fleet = pods(pool_selector(config))
    epp = pods(epp_selector(config))
    health_checks = health_check_peers(ranges)
    # The simulator downloads nothing (its own tokenizer, no weights): no hub egress.
    downloads = [model_hub_egress(ranges)] if config.serving.engine == "vllm" else []
    return {
        MODEL_SERVER_POLICY: {
            "podSelector": {"matchLabels": pool_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [*gateway_peers(config, ranges), epp], "ports": tcp(*ports.client)},
                # No rule without ports: an empty `ports` would admit every port (the simulator
                # publishes no KV events).
                *([{"from": [epp], "ports": tcp(*ports.kv_events)}] if ports.kv_events else []),
                # DP RPC, NIXL, p2p KV, NCCL/Gloo bootstrap: any port inside the fleet.
                {"from": [fleet]},
                {"from": [namespace(config.observability.namespace)], "ports": tcp(*ports.engine)},
                *([{"from": health_checks, "ports": tcp(*ports.client)}] if health_checks else []),
            ],
            "egress": [{"to": [fleet]}, *downloads],
        }
    }
