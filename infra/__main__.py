"""Pulumi entrypoint (Pulumi.yaml `main: infra/`): everything happens in llmd_fleet.program."""

from llmd_fleet.program import main

main()
