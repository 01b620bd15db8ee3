"""The Responses layer's ports and selectors (pure): the agentic API and, on-prem, CloudNativePG."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.layers.responses.config import ResponsesConfig

AGENTIC_API_PORT = 9000
"""The agentic API's HTTP port (llm-d guides/agentic-api manifests: containerPort and Service)."""
POSTGRES_PORT = 5432
CNPG_STATUS_PORT = 8000
"""CloudNativePG's instance manager status endpoint; the operator polls it (CNPG security docs,
"Exposed Ports")."""
CNPG_METRICS_PORT = 9187
CNPG_NAMESPACE = "cnpg-system"
CNPG_CLUSTER_LABEL = "cnpg.io/cluster"
"""Label CloudNativePG puts on every pod of a Cluster."""


def is_managed_gateway(config: StackConfig) -> bool:
    return config.gateway.implementation in MANAGED_IMPLEMENTATIONS


def agentic_api_selector(responses: ResponsesConfig) -> dict[str, str]:
    return {"app.kubernetes.io/component": "agentic-api", "app.kubernetes.io/instance": responses.name}


def database_selector(responses: ResponsesConfig) -> dict[str, str]:
    """Every PostgreSQL pod of the on-prem Cluster (the label CloudNativePG sets)."""
    return {CNPG_CLUSTER_LABEL: f"{responses.name}-postgres"}
