"""The rules of the sections the config core owns: the node groups, the model and the workload. Pure.
They read the whole stack (`StackConfig`, llmd_fleet/stack/model.py) as a type only: config/ imports
no layer and no target."""

import itertools
from typing import TYPE_CHECKING

from llmd_fleet.config.fleet import Accelerator, NodeGroupConfig
from llmd_fleet.config.grammar import dns_label_problem
from llmd_fleet.core.problems import Problem, key

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# The old single-field bounds of a GPU node, now a rule for GPU nodes only (kind nodes are small).
GPU_NODE_MIN_CPUS = 16
GPU_NODE_MIN_MEMORY_GIB = 64


def gpu_node_group_problems(
    config: "StackConfig", name: str, group: NodeGroupConfig, kind: str
) -> list[Problem]:
    """A node group of a GPU target: a GPU model, its GPUs and the host of an HGX node."""
    path = key(config, "fleet", "node_groups", name)
    problems: list[Problem] = []
    if group.accelerator == Accelerator.NONE:
        problems.append(
            Problem(path.at("accelerator"), f"none is only for kind local (the target is {kind})")
        )
    elif group.gpus_per_node == 0:
        problems.append(Problem(path.at("gpus_per_node"), f"must be 8 for {group.accelerator} nodes (got 0)"))
    if group.accelerator_allocation == "none":
        problems.append(
            Problem(path.at("accelerator_allocation"), f"none is only for kind local (the target is {kind})")
        )
    if group.cpus_per_node < GPU_NODE_MIN_CPUS:
        problems.append(
            Problem(
                path.at("cpus_per_node"),
                f"must be >= {GPU_NODE_MIN_CPUS} CPUs on GPU nodes (got {group.cpus_per_node})",
            )
        )
    if group.host_memory_gib < GPU_NODE_MIN_MEMORY_GIB:
        problems.append(
            Problem(
                path.at("host_memory_gib"),
                f"must be >= {GPU_NODE_MIN_MEMORY_GIB} GiB on GPU nodes (got {group.host_memory_gib})",
            )
        )
    return problems


def node_group_problems(config: "StackConfig") -> list[Problem]:
    """Each node group: its name and one accelerator allocation mechanism."""
    problems: list[Problem] = []
    for name, group in config.fleet.node_groups.items():
        group_path = key(config, "fleet", "node_groups", name)
        if problem := dns_label_problem(name):
            problems.append(Problem(group_path, f"the name {problem}"))
        if group.accelerator_allocation == "dra" and group.rdma_resource:
            problems.append(
                Problem(
                    group_path.at("rdma_resource"),
                    "is a device-plugin resource: with acceleratorAllocation dra the NICs come from "
                    "nicDeviceClass claims (one allocation mechanism per node group)",
                )
            )
        if (
            group.accelerator_allocation == "dra"
            and group.nic_device_class
            and group.nic_topology == "pcie-root-per-gpu"
            and group.gpus_per_node
            and group.nics_per_node % group.gpus_per_node
        ):
            problems.append(
                Problem(
                    group_path.at("nics_per_node"),
                    f"{group.nics_per_node} NICs cannot be paired evenly with {group.gpus_per_node} "
                    "GPUs by PCIe root; use nicTopology whole-node for this fabric",
                )
            )
    return problems


def model_problems(config: "StackConfig") -> list[Problem]:
    """The model architecture facts agree with each other."""
    problems: list[Problem] = []
    model = config.model
    if model.routed_expert_params_b >= model.total_params_b:
        problems.append(
            Problem(key(config, "model", "routed_expert_params_b"), "must be smaller than totalParamsB")
        )
    if model.active_params_b > model.total_params_b:
        problems.append(Problem(key(config, "model", "active_params_b"), "must not exceed totalParamsB"))
    return problems


def workload_problems(config: "StackConfig") -> list[Problem]:
    """The workload's input percentiles are ordered: p50 <= p90 <= p99 (a percentile of a
    distribution never exceeds a higher one)."""
    workload = config.workload
    ordered = [
        ("input_tokens_p50", "inputTokensP50", workload.input_tokens_p50),
        ("input_tokens_p90", "inputTokensP90", workload.input_tokens_p90),
        ("input_tokens_p99", "inputTokensP99", workload.input_tokens_p99),
    ]
    return [
        Problem(
            key(config, "workload", lower),
            f"{low} is above {higher_alias} ({high}): a lower percentile never exceeds a higher one",
        )
        for (lower, _, low), (_, higher_alias, high) in itertools.pairwise(ordered)
        if low > high
    ]
