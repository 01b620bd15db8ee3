"""A small evaluator of Kubernetes NetworkPolicy semantics (networking.k8s.io/v1), for tests.

It decides whether one connection is allowed by a set of NetworkPolicy objects, the way the API
documents it:

- a pod is isolated for a direction when at least one policy in its namespace selects it and
  lists that direction in `policyTypes` (absent: Ingress, plus Egress when `egress` is given);
- an isolated pod accepts a connection when any selecting policy has a rule of that direction
  whose peers and ports both match; no `from`/`to` means every peer, no `ports` every port;
- a peer is a `podSelector` (in the policy's namespace), a `namespaceSelector` (with an optional
  `podSelector`, both must match) or an `ipBlock` (`cidr` minus `except`, matched against the
  endpoint's IP);
- a connection needs both the source's egress and the destination's ingress;
- endpoints outside the cluster (no namespace) and host-network pods are never isolated.

Named ports are not supported (the fleet's policies use numbers); `endPort` is.
"""

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace and labels) or an address outside the cluster (no namespace)."""

    name: str
    ip: str
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    host_network: bool = False

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None and not self.host_network


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector: matchLabels and matchExpressions, all must hold; {} matches everything."""
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {operator!r}")
    return True


@dataclass(frozen=True)
class Cluster:
    """The policies and the namespaces' labels."""

    policies: tuple[Mapping[str, Any], ...]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> "Cluster":
        policies, namespaces = [], {}
        for obj in objects:
            if obj.get("kind") == "NetworkPolicy":
                policies.append(obj)
            elif obj.get("kind") == "Namespace":
                namespaces[obj["metadata"]["name"]] = dict(obj["metadata"].get("labels") or {})
        return cls(tuple(policies), namespaces)

    def labels_of_namespace(self, namespace: str) -> dict[str, str]:
        # The API server sets kubernetes.io/metadata.name on every namespace.
        return {**self.namespace_labels.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    def _selecting(self, pod: Endpoint, direction: str) -> list[Mapping[str, Any]]:
        selecting = []
        for policy in self.policies:
            if policy["metadata"].get("namespace") != pod.namespace:
                continue
            spec = policy.get("spec") or {}
            types = spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]
            if direction in types and selector_matches(spec.get("podSelector") or {}, pod.labels):
                selecting.append(policy)
        return selecting

    def _peer_matches(self, peer: Mapping[str, Any], policy_namespace: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            block = peer["ipBlock"]
            address = ipaddress.ip_address(other.ip)
            if address not in ipaddress.ip_network(block["cidr"]):
                return False
            return not any(address in ipaddress.ip_network(e) for e in block.get("except") or ())
        if not other.is_pod:
            return False
        assert other.namespace is not None
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.labels_of_namespace(other.namespace)):
                return False
        elif other.namespace != policy_namespace:
            return False
        return selector_matches(peer.get("podSelector"), other.labels)

    @staticmethod
    def _port_matches(rule_ports: list[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
        if not rule_ports:
            return True
        for entry in rule_ports:
            if entry.get("protocol", "TCP") != protocol:
                continue
            if "port" not in entry:
                return True
            if not isinstance(entry["port"], int):
                raise ValueError(f"named ports are not supported: {entry['port']!r}")
            if entry["port"] <= port <= entry.get("endPort", entry["port"]):
                return True
        return False

    def _direction_allows(
        self, pod: Endpoint, other: Endpoint, port: int, protocol: str, direction: str
    ) -> bool:
        if not pod.is_pod:
            return True
        selecting = self._selecting(pod, direction)
        if not selecting:
            return True
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in selecting:
            for rule in (policy.get("spec") or {}).get(key) or ():
                peers = rule.get(peers_key)
                peer_ok = not peers or any(
                    self._peer_matches(peer, policy["metadata"]["namespace"], other) for peer in peers
                )
                if peer_ok and self._port_matches(rule.get("ports"), port, protocol):
                    return True
        return False

    def allows(self, source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP") -> bool:
        """Whether a connection from `source` to `destination:port` gets through."""
        return self._direction_allows(
            source, destination, port, protocol, "Egress"
        ) and self._direction_allows(destination, source, port, protocol, "Ingress")
