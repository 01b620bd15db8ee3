"""The endpoint picker's memory model (used by plan/fleet.py and plan/workload.py). Pure."""

GIB = 1024**3

# EPP working set per request/s per prompt token, from llm-d's operations guidance: 12.5 GiB peak
# at 50 req/s with 100k-token prompts (tokenized prompts, block keys, in-flight bodies), so about
# 2.7 KB per token of prompt per request/s. Linear in both, as that guidance sizes it.
EPP_BYTES_PER_TOKEN_PER_RPS = 12.5 * GIB / (50 * 100_000)
# What the EPP process holds independent of traffic (binary, informers, plugin state).
EPP_BASELINE_GIB = 2
