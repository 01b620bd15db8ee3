"""Pulumi entrypoint (Pulumi.yaml `main: infra/`): everything happens in infra.program."""

from infra.program import main

main()
