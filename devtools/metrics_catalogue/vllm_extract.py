"""Runs inside the vLLM parser environment (devtools/vllm_check/env.py), never in the project's:
instantiate the pinned vLLM's own Prometheus stat logger for each engine configuration of the
fleet and report every metric family it registers.

    python -m devtools.metrics_catalogue.vllm_extract JOBS.json RESULT.json

JOBS.json: {"configs": [{"role": ..., "kv_transfer_config": {...}, "num_speculative_tokens": n}]}.
RESULT.json: {"families": {name: {"type": ..., "exposed": [...], "roles": [...]}}}.

The logger gets a real VllmConfig with the fleet's KVTransferConfig (NIXL, the offloading
connector's CPU, file-system and p2p tiers), so the connectors register exactly the metrics they
register in the pods; the model and speculative configs are stand-ins with the few attributes the
metric constructors read (no model download, no GPU). Exposed names come from prometheus_client's
own exposition: a counter `vllm:x` is served as `vllm:x_total`, a histogram as `_bucket`, `_sum`
and `_count`.
"""

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _families(registry: Any) -> dict[str, dict[str, Any]]:
    """Family name -> {type, exposed} of every family the registry collects. The exposed names are
    the samples it serves, without the `_created` timestamps; a family whose labelled children are
    not bound yet serves none, and gets the client's naming rule instead."""
    families: dict[str, dict[str, Any]] = {}
    for metric in registry.collect():
        samples = {s.name for s in metric.samples if not s.name.endswith("_created")}
        rule = {metric.name + suffix for suffix in _SUFFIXES.get(metric.type, ("",))}
        families[metric.name] = {"type": metric.type, "exposed": sorted(samples or rule)}
    return families


def extract(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    # Imported by name: vLLM and its prometheus_client exist only in the parser environment.
    prometheus_client = importlib.import_module("prometheus_client")
    vllm_config_module = importlib.import_module("vllm.config")
    loggers = importlib.import_module("vllm.v1.metrics.loggers")

    vllm_config = vllm_config_module.VllmConfig()
    vllm_config.kv_transfer_config = vllm_config_module.KVTransferConfig(**config["kv_transfer_config"])
    vllm_config.model_config = types.SimpleNamespace(
        served_model_name="catalogue", max_model_len=1024, is_diffusion=False
    )
    if config.get("num_speculative_tokens"):
        vllm_config.speculative_config = types.SimpleNamespace(
            method="mtp", num_speculative_tokens=config["num_speculative_tokens"]
        )
    loggers.PrometheusStatLogger(vllm_config, [0])
    return {n: f for n, f in _families(prometheus_client.REGISTRY).items() if n.startswith("vllm:")}


def main(argv: list[str]) -> int:
    jobs = json.loads(Path(argv[0]).read_text())
    merged: dict[str, dict[str, Any]] = {}
    for config in jobs["configs"]:
        for name, family in extract(config).items():
            entry = merged.setdefault(
                name, {"type": family["type"], "exposed": family["exposed"], "roles": []}
            )
            if config["role"] not in entry["roles"]:
                entry["roles"].append(config["role"])
            entry["exposed"] = sorted(set(entry["exposed"]) | set(family["exposed"]))
    for entry in merged.values():
        entry["roles"].sort()
    Path(argv[1]).write_text(json.dumps({"families": dict(sorted(merged.items()))}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
