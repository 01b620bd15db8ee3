"""The offline tools, apart from the runtime library: the `llmd-fleet` CLI (plan, render, check,
policy-pack-path), the offline policy runner, the vLLM, checkov and promtool checks, the metric
catalogue, the control-plane twin. The library (the other subpackages) never imports them."""
