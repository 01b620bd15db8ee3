"""NetworkPolicy building blocks every layer's flows use (pure): peers, ports, the cluster's
address ranges and a namespace's default deny.

Each layer states its own flows (`llmd_fleet/layers/<layer>/flows.py`);
`llmd_fleet/security/isolation.py` takes their union for the serving namespace.
"""

import ipaddress
from dataclasses import dataclass
from typing import Any

PolicySpec = dict[str, Any]
"""A NetworkPolicy `spec` (camelCase, as the API server takes it)."""
Peer = dict[str, Any]
"""One entry of a rule's `from` or `to`."""
Rule = dict[str, Any]
"""One ingress or egress rule."""

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (Kubernetes 1.22+): selects a namespace by name."""
KUBE_DNS = {"k8s-app": "kube-dns"}
"""Cluster DNS pods in kube-system: CoreDNS on kubeadm and EKS, kube-dns on GKE."""
MODEL_HUB_PORT = 443
API_SERVER_PORTS = (443, 6443)
"""The API server behind the `kubernetes` Service: 443 on GKE and EKS, 6443 on kubeadm control
planes (policies see the endpoint after the Service's DNAT)."""
ANY_IPV4 = "0.0.0.0/0"


@dataclass(frozen=True)
class ClusterRanges:
    """Address ranges of the cluster, from the target config."""

    pods: tuple[str, ...]
    """Where pod IPs come from."""
    services: tuple[str, ...]
    """Where Service IPs come from."""
    gateway_sources: tuple[str, ...] = ()
    """Addresses a managed gateway's proxies connect from (GKE: the proxy-only subnet)."""
    health_check_sources: tuple[str, ...] = ()
    """Addresses a managed load balancer's health checks come from."""


def tcp(*ports: int) -> list[dict[str, Any]]:
    """A rule's `ports`: each TCP port once, in order."""
    return [{"protocol": "TCP", "port": port} for port in sorted(set(ports))]


def namespace(name: str) -> Peer:
    """A peer: every pod of the namespace called `name`."""
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def pods(labels: dict[str, str]) -> Peer:
    """A peer: the pods of the policy's own namespace that carry `labels`."""
    return {"podSelector": {"matchLabels": dict(labels)}}


def outside_cluster(ranges: ClusterRanges) -> Peer:
    """Every IPv4 address except the cluster's pod and Service ranges. An ipBlock's `except`
    must lie inside its `cidr`, which 0.0.0.0/0 guarantees; overlapping entries are merged."""
    networks = ipaddress.collapse_addresses(
        ipaddress.IPv4Network(c) for c in (*ranges.pods, *ranges.services)
    )
    return {"ipBlock": {"cidr": ANY_IPV4, "except": [str(n) for n in networks]}}


def health_check_peers(ranges: ClusterRanges) -> list[Peer]:
    """A managed load balancer's health-check sources (none in-cluster)."""
    return [{"ipBlock": {"cidr": cidr}} for cidr in ranges.health_check_sources]


def deny_all_but_dns() -> dict[str, PolicySpec]:
    """The first two policies of a namespace: everything not allowed by a later policy is refused,
    in both directions, and every pod may resolve names through the cluster DNS."""
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "dns": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns_egress()]},
    }


def dns_egress() -> Rule:
    """Name lookups: the cluster DNS pods, UDP and TCP 53."""
    return {
        "to": [{**namespace("kube-system"), **pods(KUBE_DNS)}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }


def model_hub_egress(ranges: ClusterRanges) -> Rule:
    """Downloads from the model hub (weights, tokenizer, chat template): TCP 443 to any address
    outside the cluster."""
    return {"to": [outside_cluster(ranges)], "ports": tcp(MODEL_HUB_PORT)}
