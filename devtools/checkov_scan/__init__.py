"""checkov over every rendered stack, the serving pods inside DisaggregatedSet and LeaderWorkerSet
objects included (`make checkov`). docs/security.md says what it covers.

- `env`: checkov's own virtualenv, built once into the user cache, keyed by a hash of the pinned
  version (images/versions.toml [tools]); never part of the project's lock;
- `extract`: the scan directory of one stack: its manifests plus every pod template of a
  DisaggregatedSet or LeaderWorkerSet written out as a Pod;
- `report`: checkov's JSON as per-stack figures and the verdict;
- `cli`: `python -m devtools.checkov_scan STACK...`.
"""
