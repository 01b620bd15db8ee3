"""Metrics, alerts and dashboards (type token `llmd-fleet:observability:Observability`)."""
