"""The pack entry point for a checkout (`pulumi preview --policy-pack policies`).

The rules ship inside the package (llmd_fleet/policies); this directory only adds the
checkout's environment (PulumiPolicy.yaml: the locked `.venv`) and the per-stack policy config.
"""

from llmd_fleet.policies.pack import serve

serve()
