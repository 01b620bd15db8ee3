"""Entry point the Pulumi CLI runs (`python -m pulumi.policy <engine> policies`).

Building a PolicyPack starts its gRPC server, prints the port and blocks until the host stops
the process, so this file does nothing else; import `policies.pack` to reach the rules.
"""

import sys
from pathlib import Path

# The repository root, so `policies` and `components` import however the host started us.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import PACK_DESCRIPTION, PACK_NAME, all_policies

# Every policy sets its own level; the pack level only applies to policies that would not.
PolicyPack(
    name=PACK_NAME,
    policies=all_policies(),
    enforcement_level=EnforcementLevel.ADVISORY,
    description=PACK_DESCRIPTION,
)
