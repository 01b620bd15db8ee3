"""The fabric preflight probe's cached test environment (`make preflight-probe`): NIXL from the
version matrix in a virtualenv outside the repository (`env`). docs/preflight.md says what runs
where."""
