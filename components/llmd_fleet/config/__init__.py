"""The stack configuration: typed, validated settings (pure; no Pulumi)."""
