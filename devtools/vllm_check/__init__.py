"""Offline conformance check of every rendered `vllm serve` command line against the pinned vLLM.

README "vLLM argument check" describes what it proves and what it cannot. Modules:

- `env`: the isolated parser environment (built once into the user cache, keyed by a hash);
- `extract`: the argv and environment every vLLM container execs, worker by worker;
- `checker`: runs inside the parser environment; vLLM's parser and registries, config objects;
- `ports`: the TCP ports one pod binds and their collisions;
- `selftest`: broken command lines the check must reject;
- `lines`: command lines and findings, shared by both sides;
- `deps`: vLLM's declared dependency ranges, checked inside the parser environment;
- `cli`: `python -m devtools.vllm_check STACK...`.

`lines`, `ports` and `checker` import only the standard library (and vLLM, lazily) because
they run inside the parser environment.
"""
