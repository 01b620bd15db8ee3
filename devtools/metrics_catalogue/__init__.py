"""The committed catalogue of every metric name the fleet's alerts and dashboards may read
(catalogue.json), where each name comes from, and the check that holds rules and dashboards to
it (docs/observability.md)."""
