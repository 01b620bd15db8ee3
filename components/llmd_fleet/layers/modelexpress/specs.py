"""The ModelExpress server's names other layers refer to (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.plan.weight_load import MX_SERVER_PORT

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

COMPONENT = "modelexpress"


def server_selector(config: StackConfig) -> dict[str, str]:
    """The labels that select this stack's ModelExpress server pods (Service, NetworkPolicies)."""
    return {"app.kubernetes.io/component": COMPONENT, "app.kubernetes.io/instance": config.serving.name}


def server_name(serving_name: str) -> str:
    """Name of the server's Deployment, Service, ServiceAccount and Role."""
    return f"{serving_name}-modelexpress"


def server_address(serving_name: str, namespace: str) -> str:
    """The clients' MX_SERVER_ADDRESS: the server's Service, host:port."""
    return f"{server_name(serving_name)}.{namespace}.svc:{MX_SERVER_PORT}"
