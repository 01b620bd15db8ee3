"""promtool, pinned in images/versions.toml and built from the Prometheus Go module, checks and
unit-tests every stack's alert rules (`make promtool`; see build.py and rules.py)."""
