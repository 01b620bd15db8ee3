"""Pure facts of the serving pods other layers refer to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmd_fleet.plan.fleet import FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

HF_TOKEN_SECRET = "llm-d-hf-token"
"""The Secret holding the Hugging Face token (`hfToken`), which the engines and the router's
tokenizer read."""


@dataclass(frozen=True)
class PolicyPorts:
    """The fleet's ports, from the plan."""

    client: tuple[int, ...]
    """The pool's target ports: prefill engines, decode routing sidecars."""
    engine: tuple[int, ...]
    """Every vLLM API server port (each serves /metrics) and the DP supervisors."""
    kv_events: tuple[int, ...]
    """KV-event publishers the endpoint picker subscribes to."""


def policy_ports(plan: FleetPlan) -> PolicyPorts:
    """The serving pods' ports the NetworkPolicies open, by purpose, over both roles."""
    return PolicyPorts(
        client=tuple(sorted({p for role in plan.roles for p in role.client_ports})),
        engine=tuple(
            sorted(
                {
                    p
                    for role in plan.roles
                    for p in (*role.engine_ports, *([role.supervisor_port] if role.supervisor_port else []))
                }
            )
        ),
        kv_events=tuple(sorted({p for role in plan.roles for p in role.kv_events_ports})),
    )


def pool_selector(config: StackConfig) -> dict[str, str]:
    """Labels that select every serving pod (both roles) of this stack's DisaggregatedSet."""
    return {"llm-d.ai/inference-serving": "true", "app.kubernetes.io/instance": config.serving.name}


MODEL_SERVER_POLICY = "model-server"
"""The serving pods' policy; optional layers add their flows to it (ModelExpress)."""


# Labels the DisaggregatedSet controller puts on every pod it creates, whatever the revision or
# slice: GenerateLabels (lws v0.10.0 pkg/utils/disaggregatedset/utils.go) returns app, name, role,
# slice and revision labels, and the LeaderWorkerSet manager merges them into the leader and
# worker templates of each role's LeaderWorkerSet (pkg/controllers/disaggregatedset/lws_manager.go).
DS_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
DS_ROLE_LABEL = "disaggregatedset.x-k8s.io/role"


def role_pod_selector(config: StackConfig, role: str) -> dict[str, str]:
    """Labels that select every pod of one role of this stack's DisaggregatedSet, in every
    revision (old and new groups during a rollout) and slice."""
    return {DS_NAME_LABEL: config.serving.name, DS_ROLE_LABEL: role}


def role_budget_name(config: StackConfig, role: str) -> str:
    """Name of the role's PodDisruptionBudget: `<set>-<role>`."""
    return f"{config.serving.name}-{role}"


def role_budget_spec(config: StackConfig, role: str) -> dict[str, Any]:
    """spec of the PodDisruptionBudget of one serving role: at most one of its groups disrupted
    by evictions (drains) at a time.

    A role runs as LeaderWorkerSet groups of `size` pods with RecreateGroupOnPodRestart, so one
    evicted pod takes its whole group down until every pod of the group is Ready again (the
    model loaded). `maxUnavailable: 1` counts pods: an eviction is allowed only while every pod
    of the role is healthy, i.e. while no group of the role is down, and the disruption
    controller counts the evicted pod at once, so a second eviction in the role is refused
    (429) until the first group is back. Counted in pods, it holds for any number of groups
    (External scaling included). `AlwaysAllow` lets a drain evict a pod that is not Ready: one of
    the group already down (or still loading), whose eviction disrupts nothing more; the default
    (`IfHealthyBudget`) would block the drain of that node until the group is back, which it
    cannot be while one of its pods waits on the node being drained. Rollouts delete pods
    rather than evict them, so the budget never holds a rollout back."""
    return {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": role_pod_selector(config, role)},
    }
