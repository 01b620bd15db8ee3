"""The observability section's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key, names
from llmd_fleet.labels import common_labels
from llmd_fleet.targets.specs import SPECS, kinds_where

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# The recommended labels the fleet sets on every object it declares (labels.py common_labels).
RESERVED_LABEL_PREFIX = "app.kubernetes.io/"


def observability_problems(config: StackConfig) -> list[Problem]:
    """A scraper a target's platform provides (GKE's Managed Service for Prometheus) exists only
    there (`TargetSpec.platform_prometheus`); `monitorLabels` adds labels but never
    replaces the fleet's own (`app.kubernetes.io/*`: what owns, manages and groups the object)."""
    problems: list[Problem] = []
    mode = config.observability.prometheus
    owners = kinds_where(lambda spec: mode in dict(spec.platform_prometheus))
    if mode is not None and owners and config.target.kind not in owners:
        what = dict(SPECS[owners[0]].platform_prometheus)[mode]
        problems.append(
            Problem(
                key(config, "observability", "prometheus"),
                f"{mode} ({what}) exists only on kind {' or '.join(owners)}",
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
