"""The benchmark workload's check against the pinned inference-perf (`make bench-workload`); the
benchmark Job itself is rendered by the library's CLI (llmd_fleet/cli/bench)."""
