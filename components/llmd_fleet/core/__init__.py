"""The base layer: facts and helpers every target and layer shares. Pure: no Pulumi, no cloud
SDK, and nothing of the package above it."""
