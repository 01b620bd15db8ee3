"""Fixtures of the policy tests: the reference stack's recorded resources (once per session) and
its policy config."""

import dataclasses
from typing import Any

import pytest

from llmd_fleet.cli.policy_check import (
    load_policy_config,
)
from llmd_fleet.cli.synth import Recorded, synthesize
from tests.support import REFERENCE_STACK, REPO, STACKS_DIR


@pytest.fixture(scope="session")
def reference() -> list[Recorded]:
    """Every resource of the reference stack, as `pulumi up` would register it."""
    return list(synthesize(STACKS_DIR, REFERENCE_STACK).resources)


@pytest.fixture(scope="session")
def reference_policy_config() -> dict[str, Any]:
    return load_policy_config(REPO / "policies" / "config" / f"{REFERENCE_STACK}.json")


@pytest.fixture
def decode_dp_48(monkeypatch) -> None:
    """The real program, given a plan whose decode DP (48) does not fill its 8 x 8 GPUs (the
    config layer would refuse such a role, so the plan is edited after it)."""
    import llmd_fleet.cli.main
    import llmd_fleet.cli.synth
    from llmd_fleet.stack.plans import plan_models as real_plan_models

    def plan_models(config):
        def edited(plan):
            roles = tuple(
                dataclasses.replace(r, data_parallel=48) if r.name == "decode" else r for r in plan.roles
            )
            return dataclasses.replace(plan, roles=roles)

        return tuple(edited(plan) for plan in real_plan_models(config))

    # Both entry points plan: synthesize() (used by tests) and the command line.
    monkeypatch.setattr(llmd_fleet.cli.synth, "plan_models", plan_models)
    monkeypatch.setattr(llmd_fleet.cli.main, "plan_models", plan_models)
