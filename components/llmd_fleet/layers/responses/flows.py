"""The Responses layer's NetworkPolicies in the serving namespace (pure), with
`llmd-fleet:responses`: what the agentic API and, on-prem, the CloudNativePG pods may reach and be
reached from.

| from | to | ports |
|---|---|---|
| gateway (proxy pods, or GKE's proxy-only subnet) | agentic API | 9000 |
| GKE load-balancer health checks | agentic API | 9000 |
| in-cluster gateway proxies | agentic API | 9000 |
| agentic API | the gateway (its proxy pods, or GKE's reserved gateway address) | the listener |
| agentic API | PostgreSQL: the CloudNativePG pods, Cloud SQL's private service range, RDS's subnets | 5432 |
| CloudNativePG pods | each other | 5432 (replication), 8000 (instance manager) |
| the operator's namespace | CloudNativePG pods | 8000 |
| observability namespace | CloudNativePG pods | 9187 (metrics) |
| CloudNativePG pods | the API server | TCP 443 and 6443, any address |
| CloudNativePG pods | the backup store outside the cluster | its endpoint's port |
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from llmd_fleet.core.netpol import (
    API_SERVER_PORTS,
    ClusterRanges,
    Peer,
    PolicySpec,
    health_check_peers,
    namespace,
    outside_cluster,
    pods,
    tcp,
)
from llmd_fleet.layers.gateway.specs import GATEWAY_POLICY, gateway_peers, gateway_proxies
from llmd_fleet.layers.responses.config import S3BackupConfig
from llmd_fleet.layers.responses.specs import (
    AGENTIC_API_PORT,
    CNPG_METRICS_PORT,
    CNPG_NAMESPACE,
    CNPG_STATUS_PORT,
    POSTGRES_PORT,
    agentic_api_selector,
    database_selector,
    is_managed_gateway,
)
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.targets.specs import SPECS

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def database_peers(config: StackConfig) -> list[Peer]:
    """Where the response store answers: the CloudNativePG pods, or the managed database's
    private range (the kind's `ResponsesStore.peers`: Cloud SQL's Private Service Access range,
    RDS's own subnets)."""
    responses = config.responses
    assert responses is not None
    store = SPECS[config.target.kind].responses
    if store is not None and store.peers is not None:
        return store.peers(config)
    return [pods(database_selector(responses))]


def _gateway_destination(config: StackConfig) -> list[Peer]:
    """Where the agentic API sends inference requests: the address the kind reserved for its
    managed gateway, or the in-cluster gateway's proxies."""
    store = SPECS[config.target.kind].responses
    address = store.gateway_address(config) if store is not None else None
    if address is not None:
        return [{"ipBlock": {"cidr": f"{address}/32"}}]
    return [gateway_proxies()]


def _backup_port(backup: S3BackupConfig) -> int:
    parts = urlsplit(backup.endpoint)
    return parts.port or (443 if parts.scheme == "https" else 80)


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    responses = config.responses
    if responses is None:
        return {}
    agentic = pods(agentic_api_selector(responses))
    health_checks = health_check_peers(ranges)
    specs: dict[str, PolicySpec] = {}
    if not is_managed_gateway(config):
        # The in-cluster proxies route /v1/responses, /v1/conversations, /v1/messages and
        # /v1/models to the agentic API.
        specs[GATEWAY_POLICY] = {"egress": [{"to": [agentic], "ports": tcp(AGENTIC_API_PORT)}]}
    specs["agentic-api"] = {
        "podSelector": {"matchLabels": agentic_api_selector(responses)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {"from": gateway_peers(config, ranges), "ports": tcp(AGENTIC_API_PORT)},
            *([{"from": health_checks, "ports": tcp(AGENTIC_API_PORT)}] if health_checks else []),
        ],
        "egress": [
            # Inference requests go back through the gateway, so the endpoint picker routes them.
            {"to": _gateway_destination(config), "ports": tcp(config.gateway.listener_port)},
            {"to": database_peers(config), "ports": tcp(POSTGRES_PORT)},
        ],
    }
    kind_store = SPECS[config.target.kind].responses
    if kind_store is not None and not kind_store.managed:  # CloudNativePG in the cluster
        store = pods(database_selector(responses))
        egress: list[dict[str, Any]] = [
            {"to": [store], "ports": tcp(POSTGRES_PORT, CNPG_STATUS_PORT)},
            # The instance manager reads and updates its Cluster, Pods and Secrets.
            {"ports": tcp(*API_SERVER_PORTS)},
        ]
        if isinstance(responses.backup, S3BackupConfig):
            egress.append({"to": [outside_cluster(ranges)], "ports": tcp(_backup_port(responses.backup))})
        specs["response-store"] = {
            "podSelector": {"matchLabels": database_selector(responses)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [agentic], "ports": tcp(POSTGRES_PORT)},
                {"from": [store], "ports": tcp(POSTGRES_PORT, CNPG_STATUS_PORT)},
                {"from": [namespace(CNPG_NAMESPACE)], "ports": tcp(CNPG_STATUS_PORT)},
                {"from": [namespace(config.observability.namespace)], "ports": tcp(CNPG_METRICS_PORT)},
            ],
            "egress": egress,
        }
    return specs
