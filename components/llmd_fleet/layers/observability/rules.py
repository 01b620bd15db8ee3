"""The observability section's rules. Pure."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import Problem, key


def observability_problems(config: StackConfig) -> list[Problem]:
    """Managed Service for Prometheus exists only on GKE."""
    if config.observability.prometheus == "gmp" and config.target.kind != "gke":
        return [
            Problem(
                key(config, "observability", "prometheus"),
                "gmp (Managed Service for Prometheus) exists only on kind gke",
            )
        ]
    return []
