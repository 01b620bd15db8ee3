"""The gateway section's rules. Pure."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import Problem, key


def gateway_problems(config: StackConfig) -> list[Problem]:
    """GKE's managed gateway class exists only on GKE."""
    if config.gateway.implementation == "gke-l7-rilb" and config.target.kind != "gke":
        return [Problem(key(config, "gateway", "implementation"), "gke-l7-rilb exists only on kind gke")]
    return []
