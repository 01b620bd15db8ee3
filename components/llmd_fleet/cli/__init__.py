"""The user's offline tools, apart from the runtime library: the `llmd-fleet` CLI (plan, render,
check, policy-pack-path, bench), the offline synthesis and the policy runner. The repository's own
tooling (the twin, the checks against pinned upstream tools, the generators) lives in devtools/ at
the repository root and is not part of the package. The library (the other subpackages) never
imports these."""
