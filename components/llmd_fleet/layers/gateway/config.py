"""The `gateway` section. Pure."""

from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.targets.specs import SPECS

MANAGED_IMPLEMENTATIONS = frozenset(name for spec in SPECS.values() for name in spec.platform_gateways)
"""The gateway classes a target's platform provides and manages (`TargetSpec.platform_gateways`)."""


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class GatewayConfig(_Model):
    """The Gateway API layer in front of the router."""

    implementation: Literal["agentgateway", "istio", "gke-l7-rilb"] = "agentgateway"
    """Gateway implementation: agentgateway or istio, installed by the stack, or `gke-l7-rilb`,
    GKE's managed regional internal Application Load Balancer (gke only; its default there)."""
    listener_port: Annotated[int, Field(ge=1, le=65535)] = 80
    """HTTP listener port of the Gateway."""
    request_timeout_seconds: Annotated[int, Field(ge=30, le=7200)] = 1800
    """Request timeout, long enough for a 200k-token prefill plus a long stream: the HTTPRoute's
    `timeouts.request`, or on GKE's managed gateway (which does not implement route timeouts) the
    GCPBackendPolicy `timeoutSec` of the InferencePool's backend service."""
