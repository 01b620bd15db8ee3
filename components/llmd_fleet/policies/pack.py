"""The policies of the llmd-fleet pack, in the order the analyzer runs them.

Constructing a PolicyPack starts a server and blocks, so only the pack entry points (this package's
`__main__.py` and the checkout's `policies/__main__.py`) call `serve`; tests and the offline runner
(`llmd_fleet.cli.policy_check`) import `all_policies`.
"""

from pulumi_policy import EnforcementLevel, Policy, PolicyPack

from llmd_fleet.policies.rules import (
    accelerators,
    autoscaling,
    cloud,
    disruption,
    engine_model,
    fleet_scale,
    parallelism,
    preflight,
    router,
    security,
    serving,
    supply_chain,
)

PACK_NAME = "llmd-fleet"
# The level of a policy that sets none (every policy sets its own).
PACK_LEVEL = EnforcementLevel.ADVISORY.value
PACK_DESCRIPTION = "Catches the mistakes that break a wide-EP llm-d fleet before it is deployed"


def all_policies() -> list[Policy]:
    """Every policy of the pack (names are unique)."""
    policies: list[Policy] = [
        *parallelism.POLICIES,
        *accelerators.POLICIES,
        *autoscaling.POLICIES,
        *router.POLICIES,
        *fleet_scale.POLICIES,
        *serving.POLICIES,
        *disruption.POLICIES,
        *engine_model.POLICIES,
        *preflight.POLICIES,
        *supply_chain.POLICIES,
        *security.POLICIES,
        *cloud.POLICIES,
    ]
    names = [p.name for p in policies]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate policy names: {', '.join(duplicates)}")
    return policies


def serve() -> None:
    """Serve the pack to the Pulumi CLI (blocks until the CLI stops the process)."""
    # Every policy sets its own level; the pack level only applies to policies that would not.
    PolicyPack(
        name=PACK_NAME,
        policies=all_policies(),
        enforcement_level=EnforcementLevel(PACK_LEVEL),
        description=PACK_DESCRIPTION,
    )
