"""Entry point the Pulumi CLI runs for the installed pack (`python -m pulumi.policy <engine> <dir>`).

Building a PolicyPack starts its gRPC server, prints the port and blocks until the host stops
the process, so this file does nothing else; import `llmd_fleet.policies.pack` to reach the rules.
"""

from llmd_fleet.policies.pack import serve

serve()
