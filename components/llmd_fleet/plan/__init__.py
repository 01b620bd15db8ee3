"""The fleet plan: sizing, memory, ports and fabric facts derived from the config (pure; no Pulumi)."""
