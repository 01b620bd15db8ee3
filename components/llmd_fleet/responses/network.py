"""NetworkPolicies of the Responses layer in the serving namespace (pure): what the agentic API
and, on-prem, the CloudNativePG pods may reach and be reached from. llmd_fleet/security/network_policy.py
adds them to the namespace's default deny when `llmd-fleet:responses` is set.

| from | to | ports |
|---|---|---|
| gateway (proxy pods, or GKE's proxy-only subnet) | agentic API | 9000 |
| GKE load-balancer health checks | agentic API | 9000 |
| agentic API | the gateway (its proxy pods, or GKE's reserved gateway address) | the listener |
| agentic API | PostgreSQL: the CloudNativePG pods, Cloud SQL's private service range, RDS's subnets | 5432 |
| CloudNativePG pods | each other | 5432 (replication), 8000 (instance manager) |
| the operator's namespace | CloudNativePG pods | 8000 |
| observability namespace | CloudNativePG pods | 9187 (metrics) |
| CloudNativePG pods | the API server | TCP 443 and 6443, any address |
| CloudNativePG pods | the backup store outside the cluster | its endpoint's port |
"""

from typing import Any
from urllib.parse import urlsplit

from llmd_fleet.config.fleet import StackConfig
from llmd_fleet.config.responses import (
    ResponsesGkeDatabaseConfig,
    S3BackupConfig,
    database_subnet_cidrs,
    gke_gateway_address,
)
from llmd_fleet.responses.layer import (
    AGENTIC_API_PORT,
    CNPG_METRICS_PORT,
    CNPG_NAMESPACE,
    CNPG_STATUS_PORT,
    POSTGRES_PORT,
    agentic_api_selector,
    database_selector,
    is_managed_gateway,
)
from llmd_fleet.router.gateway import GATEWAY_NAME
from llmd_fleet.security.network_policy import (
    API_SERVER_PORTS,
    GATEWAY_NAME_LABEL,
    ClusterRanges,
    _namespace,
    _outside_cluster,
    _pods,
    _tcp,
    gateway_peers,
)


def database_peers(config: StackConfig) -> list[dict[str, Any]]:
    """Where the response store answers: the CloudNativePG pods, or the managed database's
    private range (Cloud SQL's Private Service Access range, RDS's own subnets)."""
    responses = config.responses
    assert responses is not None
    target = config.target
    if target.kind == "gke":
        settings = responses.database.gke or ResponsesGkeDatabaseConfig()
        return [{"ipBlock": {"cidr": settings.private_service_cidr}}]
    if target.kind == "eks":
        assert target.eks is not None
        return [{"ipBlock": {"cidr": c}} for c in database_subnet_cidrs(target.eks.vpc_cidr).values()]
    return [_pods(database_selector(responses))]


def _gateway_destination(config: StackConfig) -> list[dict[str, Any]]:
    if is_managed_gateway(config):
        assert config.target.gke is not None and config.responses is not None
        address = gke_gateway_address(config.responses, config.target.gke)
        return [{"ipBlock": {"cidr": f"{address}/32"}}]
    return [_pods({GATEWAY_NAME_LABEL: GATEWAY_NAME})]


def _backup_port(backup: S3BackupConfig) -> int:
    parts = urlsplit(backup.endpoint)
    return parts.port or (443 if parts.scheme == "https" else 80)


def responses_policy_specs(config: StackConfig, ranges: ClusterRanges) -> dict[str, dict[str, Any]]:
    """name suffix -> NetworkPolicy spec of the Responses layer (empty when it is off)."""
    responses = config.responses
    if responses is None:
        return {}
    agentic = _pods(agentic_api_selector(responses))
    health_checks = [{"ipBlock": {"cidr": cidr}} for cidr in ranges.health_check_sources]
    specs: dict[str, dict[str, Any]] = {
        "agentic-api": {
            "podSelector": {"matchLabels": agentic_api_selector(responses)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": gateway_peers(config, ranges), "ports": _tcp(AGENTIC_API_PORT)},
                *([{"from": health_checks, "ports": _tcp(AGENTIC_API_PORT)}] if health_checks else []),
            ],
            "egress": [
                # Inference requests go back through the gateway, so the endpoint picker routes them.
                {"to": _gateway_destination(config), "ports": _tcp(config.gateway.listener_port)},
                {"to": database_peers(config), "ports": _tcp(POSTGRES_PORT)},
            ],
        }
    }
    if config.target.kind == "onprem":
        store = _pods(database_selector(responses))
        egress: list[dict[str, Any]] = [
            {"to": [store], "ports": _tcp(POSTGRES_PORT, CNPG_STATUS_PORT)},
            # The instance manager reads and updates its Cluster, Pods and Secrets.
            {"ports": _tcp(*API_SERVER_PORTS)},
        ]
        if isinstance(responses.backup, S3BackupConfig):
            egress.append({"to": [_outside_cluster(ranges)], "ports": _tcp(_backup_port(responses.backup))})
        specs["response-store"] = {
            "podSelector": {"matchLabels": database_selector(responses)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [agentic], "ports": _tcp(POSTGRES_PORT)},
                {"from": [store], "ports": _tcp(POSTGRES_PORT, CNPG_STATUS_PORT)},
                {"from": [_namespace(CNPG_NAMESPACE)], "ports": _tcp(CNPG_STATUS_PORT)},
                {"from": [_namespace(config.observability.namespace)], "ports": _tcp(CNPG_METRICS_PORT)},
            ],
            "egress": egress,
        }
    return specs


def gateway_egress_rules(config: StackConfig) -> list[dict[str, Any]]:
    """What an in-cluster gateway's proxies must reach besides the pool: the agentic API."""
    if config.responses is None:
        return []
    return [{"to": [_pods(agentic_api_selector(config.responses))], "ports": _tcp(AGENTIC_API_PORT)}]
