"""Reusable Pulumi components and the pure builders behind them for an llm-d H100 fleet."""
