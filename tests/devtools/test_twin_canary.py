"""The canary steps of the engine run (devtools/twin/canary.py): every step's config is a stack
the program accepts and plans, with the canary's room; the read-back checks catch a wrong route,
a canary left behind and a stable revision that changed. `make e2e` runs the steps."""

import json
from typing import Any

import pytest

from devtools.twin import canary
from devtools.twin.engine import engine_config
from llmd_fleet.cli.stack_file import read_stack_file
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.model import SECRET_KEYS
from llmd_fleet.stack.parse import parse_config
from tests.support import STACKS_DIR


def _config(stack: str) -> dict[str, Any]:
    values = read_stack_file(STACKS_DIR, stack).values
    document = {k: json.loads(v) if v.startswith(("{", "[")) else v for k, v in values.items()}
    config, _ = engine_config({"config": document})
    return config


@pytest.mark.parametrize("stack", ["onprem-h100", "quickstart-h100"])
def test_every_step_is_a_stack_the_program_plans(stack: str) -> None:
    config = _config(stack)
    steps = canary.steps(config)
    assert [s.name for s in steps] == [
        "canary 0%",
        "canary 25%",
        "rollback",
        "canary 100%",
        "promote",
        "promoted",
    ]
    for step in steps:
        raw = {k.split(":", 1)[1]: v for k, v in step.config.items() if k.startswith("llmd-fleet:")}
        raw = {k: v for k, v in raw.items() if k not in SECRET_KEYS}
        plan = plan_fleet(parse_config(raw))
        assert (plan.canary is not None) == (step.weights is not None), step.name
        if plan.canary is not None:
            assert plan.canary.weight == step.weights[1]  # type: ignore[index]
    # Rollback returns to the stack as it was; promotion ends on the canary's revision.
    assert steps[2].config == config
    assert steps[5].config["llmd-fleet:model"]["revision"] == canary.CANARY_REVISION
    assert steps[4].stable_updated  # vLLM serves model.revision


def test_the_read_back_checks() -> None:
    step = canary.steps(_config("onprem-h100"))[1]
    good = {"backends": [("glm52", 75), ("glm52-canary", 25)], "canary_set": True, "canary_pool": True,
            "stable": ("u", 1)}  # fmt: skip
    assert canary.step_problems(step, "glm52", ("u", 1), good, 0) == []
    assert canary.step_problems(step, "glm52", ("u", 1), {**good, "backends": [("glm52", 1)]}, 0)
    assert canary.step_problems(step, "glm52", ("u", 1), {**good, "stable": ("u", 2)}, 0) == [
        "canary: canary 25%: the stable DisaggregatedSet changed (1 -> 2)"
    ]
    assert canary.step_problems(step, "glm52", ("v", 1), good, 0) == [
        "canary: canary 25%: the stable DisaggregatedSet was replaced"
    ]
    rollback = canary.steps(_config("onprem-h100"))[2]
    left = {**good, "backends": [("glm52", 1)]}
    assert canary.step_problems(rollback, "glm52", ("u", 1), left, 0) == [
        "canary: rollback: the canary's DisaggregatedSet/InferencePool should be gone (set True, pool True)"
    ]
    gone = {**left, "canary_set": False, "canary_pool": False}
    assert canary.step_problems(rollback, "glm52", ("u", 1), gone, 0) == []
    assert canary.step_problems(rollback, "glm52", ("u", 1), {**gone, "backends": [("glm52", 50)]}, 0)
    assert canary.step_line("rollback", {"update": 2, "delete": 20}, 3.04, "route glm52 -").startswith(
        "canary: rollback 0 created, 2 updated, 20 deleted, 0 replaced; route glm52 - (3.0 s)"
    )
