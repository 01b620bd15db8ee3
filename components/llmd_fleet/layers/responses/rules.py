"""The responses section's rules against the rest of the stack. Pure."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.responses.config import responses_section_problems
from llmd_fleet.targets.gke.config import GkeTarget


def responses_problems(config: StackConfig) -> list[Problem]:
    """The response store fits the target (its database, the GKE gateway's address)."""
    if config.responses is None:
        return []
    return responses_section_problems(
        config.responses,
        config.target.kind,
        config.target.gke if isinstance(config.target, GkeTarget) else None,
        config.gateway.implementation,
        key(config, "responses"),
    )
