"""Kind local's rules: a kind cluster on a laptop, CPU nodes and the simulator. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.config.fleet import Accelerator, NodeGroupConfig
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.rules import preinstalled_platform_problems, range_problems

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def _local_node_group_problems(config: StackConfig, name: str, group: NodeGroupConfig) -> list[Problem]:
    """A node group of kind local: plain CPU nodes, no GPU, no accelerator mechanism."""
    path = key(config, "fleet", "node_groups", name)
    why = "kind local nodes have no GPUs"
    problems: list[Problem] = []
    if group.accelerator != Accelerator.NONE:
        problems.append(Problem(path.at("accelerator"), f"must be none on kind local: {why}"))
    if group.gpus_per_node != 0:
        problems.append(Problem(path.at("gpus_per_node"), f"must be 0 on kind local: {why}"))
    if group.accelerator_allocation != "none":
        problems.append(
            Problem(
                path.at("accelerator_allocation"),
                f"must be none on kind local: {why}, so a DRA GPU claim or an nvidia.com/gpu limit "
                "would keep every serving pod Pending",
            )
        )
    if group.nic_device_class is not None:
        problems.append(
            Problem(path.at("nic_device_class"), "must be null on kind local: no DRA claim carries NICs")
        )
    if group.rdma_resource is not None:
        problems.append(Problem(path.at("rdma_resource"), "not used on kind local: there is no RDMA fabric"))
    if "nvidia.com/gpu.present" in group.node_labels:
        problems.append(
            Problem(
                path.at("node_labels"),
                "must not select nvidia.com/gpu.present on kind local: no kind node carries it "
                '(label the kind workers, e.g. llm-d.ai/local-sim: "true", and select that)',
            )
        )
    return problems


def local_problems(config: StackConfig) -> list[Problem]:
    """kind local (its `TargetSpec.fleet_problems`): the simulator on CPU nodes; what only a GPU
    or cloud target has is refused. The GPU kinds refuse the local-only values
    (llmd_fleet/targets/rules.py `gpu_fleet_problems`)."""
    target = config.target
    problems: list[Problem] = []
    engine_path = key(config, "serving", "engine")
    for name, group in config.fleet.node_groups.items():
        problems += _local_node_group_problems(config, name, group)
    if config.serving.engine != "simulator":
        problems.append(
            Problem(
                engine_path, "must be simulator on kind local: its nodes have no GPUs for vLLM (got 'vllm')"
            )
        )
    if target.gpu_driver != "host":
        problems.append(
            Problem(key(config, "target", "gpu_driver"), "not used on kind local: its nodes have no GPUs")
        )
    if config.images.build:
        problems.append(
            Problem(
                key(config, "images", "build"),
                "must be false on kind local: the simulator image is pinned in images/versions.toml, "
                "nothing is built",
            )
        )
    if config.responses is not None:
        problems.append(
            Problem(
                key(config, "responses"),
                "not part of the kind local try-out (it needs a PostgreSQL operator and its backups); "
                "remove the key",
            )
        )
    return problems


def local_target_problems(config: StackConfig) -> list[Problem]:
    return range_problems(config) + preinstalled_platform_problems(config)


def local_defaults(config: StackConfig) -> StackConfig:
    """kind local has no GPUs: the simulator is its engine unless one is named (and refused)."""
    if "engine" in config.serving.model_fields_set:
        return config
    return config.model_copy(update={"serving": config.serving.model_copy(update={"engine": "simulator"})})
