"""Pure facts of the serving pods other layers refer to."""

from dataclasses import dataclass

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.plan.fleet import FleetPlan


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
