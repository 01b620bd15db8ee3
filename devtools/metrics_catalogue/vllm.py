"""Extract vLLM's metric families for the fleet's engine configurations and compare them with
catalogue.json (`make check-vllm` runs this).

    python -m devtools.metrics_catalogue vllm [--write] [STACK...]

For each stack and role (stacks with `serving.engine: simulator` run no vLLM and add none), the
engine configuration that decides which metrics vLLM registers (the
role's --kv-transfer-config and its MTP speculative tokens) comes from the same builders the
rendered command lines do (llmd_fleet/layers/serving/vllm.py); the parser environment's vLLM then
registers its
metrics for each (devtools/metrics_catalogue/vllm_extract.py). Exit 1 on any difference, unless
--write, which replaces the catalogue's vLLM families with the extraction.
"""

import json
from pathlib import Path
from typing import Any

from devtools.vllm_check import env
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.layers.serving.vllm import kv_transfer_config
from llmd_fleet.plan.fleet import plan_fleet

SOURCE = "vllm"


def simulator_stacks(stacks_dir: Path, stacks: list[str]) -> list[str]:
    """The stacks whose serving pods run the simulator: no vLLM registers metrics there (the
    simulator's families are llmd_fleet/layers/serving/simulator.py SIMULATOR_METRICS)."""
    return [s for s in stacks if stack_config(read_stack_file(stacks_dir, s)).serving.engine == "simulator"]


def engine_configs(stacks_dir: Path, stacks: list[str]) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = []
    for stack in stacks:
        config = stack_config(read_stack_file(stacks_dir, stack))
        if config.serving.engine == "simulator":
            # No vLLM runs there: its metrics are the simulator's (llmd_fleet/layers/serving/simulator.py).
            continue
        plan = plan_fleet(config)
        for role in plan.roles:
            role_config = getattr(config.serving.roles, role.name)
            configs.append(
                {
                    "role": role.name,
                    "kv_transfer_config": kv_transfer_config(role.name, role, config.serving.kv_tier),
                    "num_speculative_tokens": role_config.mtp_tokens,
                }
            )
    # The same configuration from several stacks is extracted once.
    unique = {json.dumps(c, sort_keys=True): c for c in configs}
    return [unique[key] for key in sorted(unique)]


def extract(configs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    try:
        python = env.ensure()
        data = env.run_in_env(
            python,
            "devtools.metrics_catalogue.vllm_extract",
            {"configs": configs},
            "the vLLM metric extraction",
        )
    except env.EnvError as exc:
        raise RuntimeError(str(exc)) from None
    families: dict[str, dict[str, Any]] = data["families"]
    return {name: {**entry, "source": SOURCE} for name, entry in families.items()}


def differences(committed: dict[str, dict[str, Any]], extracted: dict[str, dict[str, Any]]) -> list[str]:
    """What the committed vLLM families get wrong against a fresh extraction."""
    mine = {n: e for n, e in committed.items() if e.get("source") == SOURCE}
    lines = [
        f"missing from the catalogue: {n} ({extracted[n]['type']})"
        for n in sorted(set(extracted) - set(mine))
    ]
    lines += [f"no longer registered by vLLM: {n}" for n in sorted(set(mine) - set(extracted))]
    for name in sorted(set(mine) & set(extracted)):
        for key in ("type", "exposed", "roles"):
            if mine[name].get(key) != extracted[name].get(key):
                lines.append(
                    f"{name}: {key} {mine[name].get(key)} in the catalogue, "
                    f"{extracted[name].get(key)} in vLLM"
                )
    return lines
