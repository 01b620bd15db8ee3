"""Kind onprem's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem
from llmd_fleet.targets.rules import preinstalled_platform_problems, range_problems

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def onprem_problems(config: StackConfig) -> list[Problem]:
    return range_problems(config) + preinstalled_platform_problems(config)
