"""The observability section's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key, names
from llmd_fleet.labels import common_labels

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# The recommended labels the fleet sets on every object it declares (labels.py common_labels).
RESERVED_LABEL_PREFIX = "app.kubernetes.io/"


def observability_problems(config: StackConfig) -> list[Problem]:
    """Managed Service for Prometheus exists only on GKE; `monitorLabels` adds labels but never
    replaces the fleet's own (`app.kubernetes.io/*`: what owns, manages and groups the object)."""
    problems: list[Problem] = []
    if config.observability.prometheus == "gmp" and config.target.kind != "gke":
        problems.append(
            Problem(
                key(config, "observability", "prometheus"),
                "gmp (Managed Service for Prometheus) exists only on kind gke",
            )
        )
    own = common_labels("monitoring", config.serving.name)
    for label in config.observability.monitor_labels:
        if label in own or label.startswith(RESERVED_LABEL_PREFIX):
            problems.append(
                Problem(
                    key(config, "observability", "monitor_labels", label),
                    f"the stack sets the {RESERVED_LABEL_PREFIX}* labels of its objects itself "
                    f"({names(sorted(own))}): use a label of your own, e.g. team or release",
                )
            )
    return problems
