"""The repository's own tooling, run from a checkout and never shipped in the wheel: the
control-plane twin, the checks against pinned upstream tools (vLLM's parser, the router's loader,
promtool, checkov, inference-perf, NIXL), tool builds and their cache, and the generators of the
golden output and the configuration reference. Each runs as `python -m devtools.<tool>` from the
repository root (the Makefile's targets).

It imports the library; the library never imports it (tests/test_dependencies.py). The Go wrapper
modules (twin/gomod, promtool/gomod, router_check/gomod) keep comments naming their former paths
under llmd_fleet/cli: their bytes key the build caches, and rewording them would rebuild every
binary from source."""
