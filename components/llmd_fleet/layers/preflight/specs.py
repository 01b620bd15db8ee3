"""The preflight pods' names and port other layers refer to (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.conventions import PREFLIGHT_COMPONENT

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

PORT = 5590
"""TCP port of the probe's metadata exchange (target side); the pods' only pod-network flow."""


def probe_selector(config: StackConfig) -> dict[str, str]:
    """What selects exactly the preflight pods of this stack."""
    return {
        "app.kubernetes.io/component": PREFLIGHT_COMPONENT,
        "app.kubernetes.io/instance": config.serving.name,
    }


def job_name(config: StackConfig) -> str:
    """The preflight Job's name (`llmd-fleet status` reads its result by it)."""
    return f"{config.serving.name}-preflight"
