"""The endpoint picker's and the tokenizer's ports and selectors, and the probabilistic admitter's
shedding curve derived from the plan (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


TOKENIZER_PORT = 8000
GRPC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090
INFLIGHT_PRODUCER = "inflight-load"
"""Name of the EPP config's inflight-load-producer; its series carry it as `producer_name`."""


def epp_selector(config: StackConfig) -> dict[str, str]:
    """The labels that select this stack's endpoint-picker pods (Service, NetworkPolicies)."""
    return {
        "app.kubernetes.io/component": "endpoint-picker",
        "app.kubernetes.io/instance": config.serving.name,
    }


def tokenizer_selector(config: StackConfig) -> dict[str, str]:
    """The labels that select this stack's tokenizer pods (Service, NetworkPolicies)."""
    return {"app.kubernetes.io/component": "tokenizer", "app.kubernetes.io/instance": config.serving.name}


@dataclass(frozen=True)
class RouterNames:
    """Names of the router's objects, derived from the pool (the DisaggregatedSet) name."""

    pool: str
    namespace: str

    @property
    def epp(self) -> str:
        return f"{self.pool}-epp"

    @property
    def tokenizer(self) -> str:
        return f"{self.pool}-tokenizer"

    @property
    def tokenizer_url(self) -> str:
        return f"http://{self.tokenizer}.{self.namespace}.svc:{TOKENIZER_PORT}"

    @property
    def leader_lease(self) -> str:
        """The Lease the EPP replicas elect a leader on: `epp-<pool namespace>-<pool name>.llm-d.ai`
        (llm-d-router pkg/epp/server/controller_manager.go NewDefaultManager, LeaderElectionID)."""
        return f"epp-{self.namespace}-{self.pool}.llm-d.ai"


# --- The probabilistic admitter's shedding curve, derived from the plan.
