"""The endpoint picker's memory and CPU model (used by plan/fleet.py, plan/workload.py and the
router layer). Pure."""

import math

GIB = 1024**3

# EPP working set per request/s per prompt token, from llm-d's operations guidance: 12.5 GiB peak
# at 50 req/s with 100k-token prompts (tokenized prompts, block keys, in-flight bodies), so about
# 2.7 KB per token of prompt per request/s. Linear in both, as that guidance sizes it.
EPP_BYTES_PER_TOKEN_PER_RPS = 12.5 * GIB / (50 * 100_000)
# What the EPP process holds independent of traffic (binary, informers, plugin state).
EPP_BASELINE_GIB = 2


def epp_cpus_for(model_server_pods: int, requests_per_second: float) -> int:
    """CPU per EPP replica from llm-d's operations guidance: ~7.5 idle cores per 100 model-server
    pods plus 0.5-1 core per request/s (the low end: agent turns are few and long)."""
    return max(2, math.ceil(7.5 * model_server_pods / 100 + 0.5 * requests_per_second))
