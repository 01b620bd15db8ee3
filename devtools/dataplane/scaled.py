"""A scaled-down copy of a reference stack for the data plane (docs/twin.md): the same roles, ranks
per pod, plugins and thresholds, one instance per role. Only the stack file is copied and changed;
the copy is rendered like any stack (`llmd-fleet --stacks-dir DIR render`).

What changes, and why:
- every role's `instances` becomes 1;
- `workload.agents` is scaled by the decode role's share kept (1 / its instances): the plan
  holds the agents' decode contexts to the decode ranks and refuses the reference's 3,000
  agents on one decode instance;
- each GPU node group's `count` becomes the nodes the kept instances use (roles' `nodesPerInstance`).

With `llmd-fleet:models` the same holds per entry: each entry's roles keep one instance, an entry's
own `workload.agents` is scaled by its decode share, the stack's `llmd-fleet:workload` (the one
entries without their own use) by the smallest share among those entries, and the node groups'
counts add the nodes of every entry's kept instances.
"""

import math
from pathlib import Path
from typing import Any

import yaml

SUFFIX = "-scaled"
# The default of workload.agents (components/llmd_fleet/config/workload.py, `agents`) when a stack
# does not set it.
DEFAULT_AGENTS = 3000


def _one_instance(serving: dict[str, Any], nodes: dict[str, int], where: str) -> tuple[dict[str, Any], int]:
    """`serving` with one instance per role, the kept nodes added to `nodes`; and the decode
    role's rendered instances."""
    roles = serving.get("roles") or {}
    if not roles:
        raise ValueError(f"the stack has no {where}.roles to scale down")
    new_roles = {}
    for name, role in roles.items():
        new_roles[name] = {**role, "instances": 1}
        group = role.get("nodeGroup")
        if group:
            nodes[group] = nodes.get(group, 0) + int(role.get("nodesPerInstance", 1))
    return {**serving, "roles": new_roles}, int((roles.get("decode") or {}).get("instances", 1))


def _scaled_workload(workload: dict[str, Any] | None, decode_instances: int) -> dict[str, Any]:
    workload = dict(workload or {})
    agents = int(workload.get("agents", DEFAULT_AGENTS))
    workload["agents"] = max(1, math.floor(agents / decode_instances))
    return workload


def scaled_config(document: dict[str, Any]) -> dict[str, Any]:
    """The stack file's document with one instance per role (pure; raises ValueError on a stack
    without serving roles)."""
    config = dict(document.get("config") or {})
    nodes: dict[str, int] = {}
    entries = config.get("llmd-fleet:models")
    if entries:
        shared_share = 1
        new_entries = []
        for index, entry in enumerate(entries):
            serving, decode = _one_instance(
                dict(entry.get("serving") or {}), nodes, f"llmd-fleet:models[{index}].serving"
            )
            entry = {**entry, "serving": serving}
            if entry.get("workload") is not None:
                entry["workload"] = _scaled_workload(entry["workload"], decode)
            else:
                shared_share = max(shared_share, decode)
            new_entries.append(entry)
        config["llmd-fleet:models"] = new_entries
        config["llmd-fleet:workload"] = _scaled_workload(config.get("llmd-fleet:workload"), shared_share)
    else:
        serving, decode = _one_instance(
            dict(config.get("llmd-fleet:serving") or {}), nodes, "llmd-fleet:serving"
        )
        config["llmd-fleet:serving"] = serving
        config["llmd-fleet:workload"] = _scaled_workload(config.get("llmd-fleet:workload"), decode)
    fleet = dict(config.get("llmd-fleet:fleet") or {})
    groups = dict(fleet.get("nodeGroups") or {})
    for group, count in nodes.items():
        if group in groups:
            groups[group] = {**groups[group], "count": count}
    fleet["nodeGroups"] = groups
    config["llmd-fleet:fleet"] = fleet
    return {**document, "config": config}


def write_scaled(stack: str, stacks_dir: Path, out_dir: Path) -> str:
    """Write the scaled copy of `stack` into `out_dir` as `Pulumi.<stack>-scaled.yaml`; its name."""
    source = stacks_dir / f"Pulumi.{stack}.yaml"
    if not source.is_file():
        raise ValueError(f"no stack file {source}")
    name = stack + SUFFIX
    out_dir.mkdir(parents=True, exist_ok=True)
    from llmd_fleet.cli.stack_file import load_stack_document

    # The one stack reader (YAML 1.2 core scalars, as render reads the file).
    document = {"config": load_stack_document(source)}
    (out_dir / f"Pulumi.{name}.yaml").write_text(
        f"# Scaled-down copy of {stack} for the data plane (devtools/dataplane/scaled.py).\n"
        + yaml.safe_dump(scaled_config(document), sort_keys=False)
    )
    return name
