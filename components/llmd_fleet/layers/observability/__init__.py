"""The observability layer: monitors, alert rules, dashboards and the live metric reads."""
