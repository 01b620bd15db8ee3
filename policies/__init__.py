"""The llmd-fleet CrossGuard policy pack: rules for an LLM inference fleet.

`policies/__main__.py` only builds the pack (the Pulumi CLI runs it); the rules live in
`policies.rules.*` and are plain functions that tests call directly. `policies.pack` lists them.
"""
