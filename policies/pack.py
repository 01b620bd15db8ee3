"""The policies of the llmd-fleet pack, in the order the analyzer runs them.

Kept apart from `__main__.py`: constructing a PolicyPack starts a server and blocks, so tests and
`infra/policy_check.py` import this module, never `__main__`.
"""

from pulumi_policy import Policy

from policies.rules import (
    accelerators,
    cloud,
    fleet_scale,
    parallelism,
    router,
    security,
    serving,
    supply_chain,
)

PACK_NAME = "llmd-fleet"
PACK_DESCRIPTION = "Catches the mistakes that break a wide-EP llm-d fleet before it is deployed"


def all_policies() -> list[Policy]:
    """Every policy of the pack (names are unique)."""
    policies: list[Policy] = [
        *parallelism.POLICIES,
        *accelerators.POLICIES,
        *router.POLICIES,
        *fleet_scale.POLICIES,
        *serving.POLICIES,
        *supply_chain.POLICIES,
        *security.POLICIES,
        *cloud.POLICIES,
    ]
    names = [p.name for p in policies]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate policy names: {', '.join(duplicates)}")
    return policies
