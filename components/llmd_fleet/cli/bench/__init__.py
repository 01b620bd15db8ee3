"""`llmd-fleet bench`: a Kubernetes Job that replays agentic traffic against a stack's gateway
with inference-perf, and the summary of what it measured (docs/benchmark.md).

- `workload.py`: the pure builders (traffic shape, inference-perf workload, Job, ConfigMap,
  NetworkPolicy, gateway Service) from the stack config alone;
- `report.py`: the summary of inference-perf's report files (or of the Job's log).

`make bench-workload` validates the rendered workload with inference-perf's own config models, from
the repository's devtools/bench (not shipped in the wheel).

The Job is rendered only by this command, never by the stack program: `pulumi up` deploys no
benchmark.
"""
