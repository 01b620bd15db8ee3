"""The fleet plan: a pure function from the stack config to roles, ranks, ports and memory.

Everything a component needs to know about sizes is decided here, once, and tested directly:
GPUs and data-parallel ranks per instance, the LeaderWorkerSet group size, the ports of every
local rank, the start rank of every worker, and whether the model fits each GPU with room left
for KV cache. A role that cannot hold the model fails the plan with a message that says why.

With `serving.engine: simulator` (kind local) nothing is sized from HBM: the roles, ranks, start
ranks and client ports are the same as vLLM's, each pod runs its ranks in one simulator process,
and a rank's KV room is the simulator's emulated prefix cache (`simulator.kvCacheBlocks`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypedDict

from llmd_fleet.config.fleet import HBM_MIB, NodeGroupConfig
from llmd_fleet.core.fabric import Fabric
from llmd_fleet.core.problems import PROJECT, Problem
from llmd_fleet.models import description_for
from llmd_fleet.plan.epp import epp_cpus_for
from llmd_fleet.plan.kernels import MoeKernels, moe_kernels
from llmd_fleet.plan.lora import lora_gib_per_rank
from llmd_fleet.plan.memory import (
    ModelSizing,
    Reserves,
    WeightsPerRank,
    kv_bytes_per_token,
    model_sizing,
    reserves,
    weights_per_rank,
)
from llmd_fleet.plan.router import RouterPlan, plan_router
from llmd_fleet.plan.system_nodes import system_node_problems
from llmd_fleet.plan.weight_load import WeightLoadPlan, weight_load_plan
from llmd_fleet.targets.specs import fabric_for

if TYPE_CHECKING:
    from llmd_fleet.layers.serving.config import RoleConfig
    from llmd_fleet.plan.canary import CanaryPlan
    from llmd_fleet.stack.model import StackConfig

Engine = Literal["vllm", "simulator"]

GIB = 1024**3
GB = 10**9

NicTopology = Literal["pcie-root-per-gpu", "whole-node"]
"""How a pod's NICs are claimed next to its GPUs (llmd_fleet/platform/dra.py builds the claim)."""


@dataclass(frozen=True)
class ClaimShape:
    """What one pod claims: all GPUs of its node and, where the fabric has a DRA driver, its NICs."""

    gpus: int
    nics: int
    nic_device_class: str | None
    topology: NicTopology

    @property
    def nics_per_gpu(self) -> int:
        """Fabric NICs claimed with each GPU: the count of the claim's per-GPU NIC request
        (platform/dra.py)."""
        return self.nics // self.gpus


RoleName = Literal["prefill", "decode"]
ROLE_NAMES: tuple[RoleName, RoleName] = ("prefill", "decode")


# The plan counts KV in the stack's own declared turn (the workload's p50 input + its output),
# never in a fixed reference context.
def context_tokens(config: StackConfig) -> int:
    """The declared typical turn a context holds: the workload's median input plus one answer, at
    most the served window (the roles' smaller maxModelLen): a longer turn is refused, not held."""
    roles = config.serving.roles
    turn = config.workload.input_tokens_p50 + config.workload.output_tokens
    return min(turn, roles.prefill.max_model_len, roles.decode.max_model_len)


# Ports. vLLM's multi-port external load balancing gives every local DP rank its own API server
# on `--port + local rank`; prefill serves clients directly on 8000+, decode serves behind the
# routing sidecar, which takes 8000+ and forwards to vLLM on 8200+ (llm-d's wide-EP layout).
PREFILL_ENGINE_PORT = 8000
DECODE_ENGINE_PORT = 8200
SIDECAR_PORT = 8000
# vLLM's data-parallel coordinator on the LWS leader (--data-parallel-rpc-port).
DP_RPC_PORT = 5555
# KV-event publishers: vLLM adds the global DP rank to the endpoint port, so each pod sets its
# base to KV_EVENTS_PORT - start rank and its ranks publish on KV_EVENTS_PORT + local rank.
KV_EVENTS_PORT = 5557
# NIXL side channel: vLLM also adds the global DP rank to VLLM_NIXL_SIDE_CHANNEL_PORT, so each
# pod exports NIXL_SIDE_CHANNEL_PORT - start rank and its ranks listen on NIXL_SIDE_CHANNEL_PORT + i.
NIXL_SIDE_CHANNEL_PORT = 5600
# p2p KV tier (vLLM VLLM_P2P_SIDE_CHANNEL_PORT, also + global DP rank); 7777 is the routing
# sidecar's default --p2p-connector-port, which must name the same base.
P2P_PORT = 7777


class PlanError(Exception):
    """The configuration is valid but the fleet cannot be built as asked."""

    def __init__(self, problems: Sequence[tuple[str, str]]):
        self.problems = [Problem(key, message) for key, message in problems]
        lines = [f"{path}: {message}" for path, message in problems]
        super().__init__("the stack cannot be planned:\n  " + "\n  ".join(lines))


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU HBM budget of one rank, in GiB."""

    hbm_gib: float
    usable_gib: float
    replicated_weights_gib: float
    expert_weights_gib: float
    reserve_gib: float
    kv_cache_gib: float
    kv_tokens: int
    agent_contexts: float
    """KV tokens per rank / `context_tokens`."""
    cpu_tier_gib: int = 0
    """CPU DRAM KV tier per DP rank (0 without offload)."""
    cpu_tier_tokens: int = 0
    cpu_tier_contexts: float = 0.0
    weights: WeightsPerRank | None = None
    """Weights by part (plan/memory.py), when the model has a committed description."""
    reserves: Reserves | None = None
    """Reserves by part (plan/memory.py), when the model has a committed description."""
    kv_bytes_per_token: int = 0
    lora_gib: float = 0.0
    """HBM the model's LoRA slots take per rank (plan/lora.py); 0 without adapters."""
    context_tokens: int = 0
    """The declared turn `agent_contexts` counts in (the workload's p50 input + output)."""
    """What KV tokens (HBM and CPU tier) were sized with."""


@dataclass(frozen=True)
class RolePlan:
    """Everything derived for one role."""

    name: RoleName
    node_group: str
    instances: int
    nodes_per_instance: int
    gpus_per_node: int
    tensor_parallel: int
    data_parallel: int
    expert_parallel: int
    dp_size_local: int
    engine_ports: tuple[int, ...]
    supervisor_port: int | None
    """vLLM's DP supervisor (probes and health); None for the simulator, which has none."""
    sidecar_ports: tuple[int, ...]
    kv_events_ports: tuple[int, ...]
    nixl_side_channel_ports: tuple[int, ...]
    p2p_ports: tuple[int, ...]
    dp_rpc_port: int
    start_ranks: tuple[int, ...]
    memory: MemoryPlan
    shm_gib: int
    """Memory-backed /dev/shm: NCCL/DeepEP staging plus the CPU KV tier, which vLLM keeps in a
    shared region under /dev/shm (vllm_offload_<engine>.mmap)."""
    pod_memory_gib: int
    """Memory request = limit of the engine container: ranks x (process + pinned buffers) + shm."""
    pod_cpus: int
    claim: ClaimShape | None
    """DRA claim of each pod; None when the node group uses device plugins."""
    fabric: Fabric
    """The target's GPU fabric (KV transfer backends, NCCL/NVSHMEM settings, pod annotations)."""
    all2all_backend: str = "allgather_reducescatter"
    """vLLM's --all2all-backend: the role's own, else the fabric's per-role choice."""
    drain_seconds: int = 0
    """vLLM `--shutdown-timeout`: in-flight requests finish within this after SIGTERM."""
    max_surge: int = 0
    """Rolling update: instances created above `instances` while replacing (1 only when the node
    group has a whole spare instance's nodes, see `rollouts_for`)."""
    max_unavailable: int = 1
    """Rolling update: instances taken down at once (0 when surging)."""
    local_prefill_tokens: int = 0
    """Prompt tokens a decode step may prefill itself: just under the prefix P/D decider's
    threshold (0 with the always decider, where every prompt is prefilled remotely)."""
    autoscaled: bool = False
    """Whether KEDA scales the role (`serving.autoscaling.<role>.enabled`); `instances` is then
    where it starts, and the role's instances range over min_instances..max_instances."""
    min_instances: int = 0
    """Fewest instances (the fixed count when not autoscaled)."""
    max_instances: int = 0
    """Most instances (the fixed count when not autoscaled): what node groups, surges, the
    router's index and the GPU budget are sized for."""
    weights: WeightLoadPlan | None = None
    """Weight loading and the startup budget; None only in hand-built plans (hub defaults)."""
    engine: Engine = "vllm"
    """What the engine container runs (`serving.engine`)."""
    pod_cpu_millis: int = 0
    """simulator: CPU request = limit of the engine container, in millicores (0 for vLLM, whose
    `pod_cpus` are whole CPUs)."""
    pod_memory_mib: int = 0
    """simulator: memory request = limit of the engine container, in MiB (0 for vLLM)."""
    moe: MoeKernels = field(default_factory=MoeKernels)
    """MoE kernels from the model card's weight quantization (plan/kernels.py); vLLM's `auto`
    for a model without a card and in hand-built plans."""

    @property
    def startup_seconds(self) -> int:
        """How long the startup probe (and VLLM_ENGINE_READY_TIMEOUT_S) allows."""
        return self.weights.startup_seconds if self.weights is not None else 0

    @property
    def lws_size(self) -> int:
        """Pods in one LeaderWorkerSet group: one per node of the instance."""
        return self.nodes_per_instance

    @property
    def gpus_per_instance(self) -> int:
        """GPUs one instance spans: its nodes times each node's GPUs."""
        return self.nodes_per_instance * self.gpus_per_node

    @property
    def nodes(self) -> int:
        """Nodes the role takes at its planned `instances`."""
        return self.instances * self.nodes_per_instance

    @property
    def gpus(self) -> int:
        """GPUs the role takes at its planned `instances`."""
        return self.nodes * self.gpus_per_node

    @property
    def client_ports(self) -> tuple[int, ...]:
        """Ports clients (the router) send requests to: one per local DP rank."""
        return self.sidecar_ports or self.engine_ports

    def pod_ports(self) -> dict[str, tuple[int, ...]]:
        """Every port a pod of this role listens on, by purpose (for collision checks)."""
        ports = {
            "engine": self.engine_ports,
            "supervisor": (self.supervisor_port,) if self.supervisor_port is not None else (),
            "kv-events": self.kv_events_ports,
            "nixl": self.nixl_side_channel_ports,
            "p2p": self.p2p_ports,
            "dp-rpc": (self.dp_rpc_port,),
        }
        if self.sidecar_ports:
            ports["sidecar"] = self.sidecar_ports
        if self.weights is not None and self.weights.mode == "modelexpress":
            ports["modelexpress-metadata"] = self.weights.metadata_ports
            ports["modelexpress-worker"] = self.weights.worker_grpc_ports
        return ports


@dataclass(frozen=True)
class NodeGroupUse:
    """How the serving roles use one node group: `plan_fleet` refuses a plan that uses more nodes
    than the group has, and `llmd-fleet plan` and `render` report the use."""

    name: str
    """The group's key in `fleet.nodeGroups`."""
    nodes: int
    """The group's nodes (`count`)."""
    used: int
    """Nodes the roles placed on it take at their planned instances."""


@dataclass(frozen=True)
class FleetPlan:
    """What a stack asks of the fleet, derived from its config alone (`plan_fleet`): each serving
    role's ranks, pods, nodes and ports, the node groups' use, the router's sizing, the model's
    memory figures and, with `serving.canary`, the canary's. The layers render from it and
    `llmd-fleet plan` prints it; it reads no cluster."""

    roles: tuple[RolePlan, ...]
    """The serving roles (prefill, decode) in render order."""
    node_groups: tuple[NodeGroupUse, ...]
    """Each node group's nodes and GPUs as the roles use them."""
    router: RouterPlan
    """The endpoint pickers' and tokenizers' replicas, ports and resources."""
    model: ModelSizing | None = None
    """The model's sizing figures and their source (plan/memory.py model_sizing)."""
    canary: CanaryPlan | None = None
    """The canary revision's roles and weight, with `serving.canary` (plan/canary.py)."""

    def role(self, name: RoleName) -> RolePlan:
        """The plan of the role called `name`."""
        return next(r for r in self.roles if r.name == name)

    @property
    def gpus(self) -> int:
        """GPUs the serving roles take (the canary's surge not counted)."""
        return sum(r.gpus for r in self.roles)

    @property
    def nodes(self) -> int:
        """Nodes the serving roles take (the canary's surge not counted)."""
        return sum(r.nodes for r in self.roles)


def claim_shape(group: NodeGroupConfig) -> ClaimShape | None:
    """The DRA claim a pod on this node group makes (all of the node's GPUs and fabric NICs)."""
    if group.accelerator_allocation != "dra":
        return None
    return ClaimShape(
        gpus=group.gpus_per_node,
        nics=group.nics_per_node,
        nic_device_class=group.nic_device_class,
        topology=group.nic_topology,
    )


def _memory(config: StackConfig, role: RoleConfig) -> MemoryPlan:
    """HBM per rank: usable = HBM x gpuMemoryUtilization, minus weights and reserves, is KV.

    With a committed model description the weights and reserves come from plan/memory.py (the
    model's shapes under the role's TP/EP and the pinned vLLM's allocations); without one, from
    the stack's parameter counts (replicated part / TP + routed experts / EP) and its reserves."""
    group = config.fleet.node_groups[role.node_group]
    model = config.model
    sizing, _ = model_sizing(model)
    hbm = HBM_MIB[group.accelerator] / 1024
    usable = hbm * role.gpu_memory_utilization
    weights: WeightsPerRank | None = None
    held: Reserves | None = None
    if sizing.description is not None:
        with_mtp = role.mtp_tokens > 0
        weights = weights_per_rank(
            sizing.description,
            role.tensor_parallel,
            role.expert_parallel,
            with_mtp,
            role.redundant_experts or 0,
        )
        kv_per_token = kv_bytes_per_token(sizing.description, model.kv_cache_dtype, mtp=with_mtp).total
        held = reserves(
            sizing.description,
            role.runtime_reserve_gib,
            role.nvshmem_heap_gib,
            role.max_model_len,
            role.max_num_batched_tokens,
            role.dual_batch_overlap,
        )
        replicated, experts, reserve = weights.replicated, weights.routed_experts, held.total
    else:
        bytes_per_param = model.weight_dtype.bytes_per_param
        replicated_params = (model.total_params_b - model.routed_expert_params_b) * GB
        # Tensor parallelism splits the replicated (attention/dense) weights inside a DP rank.
        replicated = replicated_params * bytes_per_param / role.tensor_parallel / GIB
        # EPLB's redundant experts: (experts + N) / EP physical experts on each rank.
        physical = (model.experts + (role.redundant_experts or 0)) / model.experts
        experts = model.routed_expert_params_b * GB * bytes_per_param * physical / role.expert_parallel / GIB
        reserve = role.runtime_reserve_gib + role.nvshmem_heap_gib
        kv_per_token = sizing.kv_bytes_per_token
    adapters = model.lora_adapters
    lora = (
        lora_gib_per_rank(
            sizing.description, len(adapters), max(a.rank for a in adapters), role.expert_parallel
        )
        if adapters and sizing.description is not None
        else 0.0
    )
    kv = usable - replicated - experts - reserve - lora
    kv_tokens = max(0, int(kv * GIB // kv_per_token))
    return MemoryPlan(
        hbm_gib=hbm,
        usable_gib=usable,
        replicated_weights_gib=replicated,
        expert_weights_gib=experts,
        reserve_gib=reserve,
        kv_cache_gib=kv,
        kv_tokens=kv_tokens,
        agent_contexts=kv_tokens / context_tokens(config),
        context_tokens=context_tokens(config),
        weights=weights,
        reserves=held,
        kv_bytes_per_token=kv_per_token,
        lora_gib=lora,
    )


# Host memory of the routing sidecar (decode pods).
SIDECAR_MEMORY_GIB = 1


def _host_memory(
    config: StackConfig, role: RoleConfig, dp_local: int, memory: MemoryPlan, name: RoleName
) -> tuple[MemoryPlan, int, int, tuple[str, str] | None]:
    """Split a node's host memory: explicit reserves first (system, per-rank process and pinned
    buffers, /dev/shm staging, sidecar), then `hostMemoryFraction` of the rest as the CPU KV
    tier, in whole GiB per rank. The tier lives in /dev/shm, which counts against the pod's
    memory limit, so limit = ranks x (process + pinned) + shm can never be exceeded by the cache."""
    group = config.fleet.node_groups[role.node_group]
    tier = config.serving.kv_tier
    # NCCL, torch IPC and DeepEP staging: llm-d's wide-EP guides use ~32 MiB per rank and 2 GiB
    # in all; 1 GiB per rank leaves headroom.
    staging_shm = max(2, dp_local)
    per_rank = role.host_memory_per_rank_gib + tier.pinned_buffers_per_rank_gib
    sidecar = SIDECAR_MEMORY_GIB if name == "decode" else 0
    available = group.host_memory_gib - group.system_reserved_memory_gib
    fixed = dp_local * per_rank + staging_shm + sidecar
    problem = None
    cpu_gib = 0
    if fixed > available:
        problem = (
            "hostMemoryPerRankGiB",
            f"a pod needs {fixed} GiB before any CPU KV tier ({dp_local} ranks x {per_rank} GiB + "
            f"{staging_shm} GiB /dev/shm staging + {sidecar} GiB sidecar) but a node of "
            f"{role.node_group!r} offers {available} GiB after system reservations",
        )
    elif tier.cpu_offload:
        cpu_gib = int((available - fixed) * tier.host_memory_fraction // dp_local)
        if cpu_gib < 1:
            problem = (
                "hostMemoryPerRankGiB",
                f"no host memory is left for the CPU KV tier on {role.node_group!r} "
                f"({available - fixed} GiB after reserves); lower the reserves or turn cpuOffload off",
            )
    shm_gib = staging_shm + dp_local * cpu_gib
    cpu_tokens = cpu_gib * GIB // (memory.kv_bytes_per_token or config.model.kv_bytes_per_token)
    memory = replace(
        memory,
        cpu_tier_gib=cpu_gib,
        cpu_tier_tokens=cpu_tokens,
        cpu_tier_contexts=cpu_tokens / context_tokens(config),
    )
    return memory, shm_gib, dp_local * per_rank + shm_gib, problem


def _simulator_role_plan(config: StackConfig, name: RoleName) -> tuple[RolePlan, list[tuple[str, str]]]:
    """A role of the simulator: vLLM's roles, ranks, start ranks and client ports, no HBM.

    The simulator starts its local ranks in one process on `--port + rank` (llm-d-inference-sim
    pkg/llm-d-inference-sim/simulator.go at the pinned tag), so the engine ports are vLLM's; it has no DP
    supervisor, DP handshake, NIXL side channel or bound KV-event socket, so those ports are not
    planned (`dp_rpc_port` stays the constant and is opened by nothing)."""
    role: RoleConfig = getattr(config.serving.roles, name)
    group = config.fleet.node_groups[role.node_group]
    sim = config.serving.simulator
    path = f"{PROJECT}:serving"
    problems: list[tuple[str, str]] = []
    dp_local = max(1, role.data_parallel // role.nodes_per_instance)
    engine_base = PREFILL_ENGINE_PORT if name == "prefill" else DECODE_ENGINE_PORT
    kv_tokens = sim.kv_cache_blocks * role.block_size
    if kv_tokens < role.max_model_len:
        problems.append(
            (
                f"{path}.simulator.kvCacheBlocks",
                f"{sim.kv_cache_blocks} blocks x {role.block_size} tokens = {kv_tokens} tokens per "
                f"rank, fewer than serving.roles.{name}.maxModelLen {role.max_model_len}; raise "
                "kvCacheBlocks or lower maxModelLen",
            )
        )
    cpu_millis = dp_local * sim.cpu_millis_per_rank
    memory_mib = dp_local * sim.memory_mib_per_rank
    # The routing sidecar (decode) takes one more CPU and 1 GiB.
    sidecar_millis = 1000 if name == "decode" else 0
    node_millis = (group.cpus_per_node - group.system_reserved_cpus) * 1000
    if cpu_millis + sidecar_millis > node_millis:
        problems.append(
            (
                f"{path}.simulator.cpuMillisPerRank",
                f"a pod needs {cpu_millis + sidecar_millis}m CPU ({dp_local} ranks x "
                f"{sim.cpu_millis_per_rank}m{' + 1000m sidecar' if sidecar_millis else ''}) but a node "
                f"of {role.node_group!r} offers {node_millis}m after system reservations",
            )
        )
    node_mib = (group.host_memory_gib - group.system_reserved_memory_gib) * 1024
    sidecar_mib = SIDECAR_MEMORY_GIB * 1024 if name == "decode" else 0
    if memory_mib + sidecar_mib > node_mib:
        problems.append(
            (
                f"{path}.simulator.memoryMiBPerRank",
                f"a pod needs {memory_mib + sidecar_mib} MiB ({dp_local} ranks x "
                f"{sim.memory_mib_per_rank} MiB{' + sidecar' if sidecar_mib else ''}) but a node of "
                f"{role.node_group!r} offers {node_mib} MiB after system reservations",
            )
        )
    memory = MemoryPlan(
        hbm_gib=0.0,
        usable_gib=0.0,
        replicated_weights_gib=0.0,
        expert_weights_gib=0.0,
        reserve_gib=0.0,
        kv_cache_gib=0.0,
        kv_tokens=kv_tokens,
        agent_contexts=kv_tokens / context_tokens(config),
        context_tokens=context_tokens(config),
    )
    plan = RolePlan(
        name=name,
        node_group=role.node_group,
        instances=role.instances,
        nodes_per_instance=role.nodes_per_instance,
        gpus_per_node=0,
        tensor_parallel=role.tensor_parallel,
        data_parallel=role.data_parallel,
        expert_parallel=role.expert_parallel,
        dp_size_local=dp_local,
        engine_ports=tuple(engine_base + i for i in range(dp_local)),
        supervisor_port=None,
        sidecar_ports=tuple(SIDECAR_PORT + i for i in range(dp_local)) if name == "decode" else (),
        kv_events_ports=(),
        nixl_side_channel_ports=(),
        p2p_ports=(),
        dp_rpc_port=DP_RPC_PORT,
        start_ranks=tuple(w * dp_local for w in range(role.nodes_per_instance)),
        memory=memory,
        shm_gib=0,
        pod_memory_gib=math.ceil(memory_mib / 1024),
        pod_cpus=math.ceil(cpu_millis / 1000),
        claim=None,
        fabric=fabric_for(config.target.kind, config.images.build),
        drain_seconds=config.serving.drain_seconds,
        engine="simulator",
        pod_cpu_millis=cpu_millis,
        pod_memory_mib=memory_mib,
        **_instance_range(config, name),
    )
    return plan, problems


class _InstanceRange(TypedDict):
    autoscaled: bool
    min_instances: int
    max_instances: int


def _instance_range(config: StackConfig, name: RoleName) -> _InstanceRange:
    """Whether the role autoscales, and the fewest and most instances it runs."""
    role: RoleConfig = getattr(config.serving.roles, name)
    scaling = config.serving.autoscaling.role(name) if config.serving.autoscaling is not None else None
    autoscaled = scaling is not None and scaling.enabled
    return {
        "autoscaled": autoscaled,
        "min_instances": scaling.min_instances if scaling is not None and autoscaled else role.instances,
        "max_instances": config.serving.max_instances(name),
    }


def _role_plan(config: StackConfig, name: RoleName) -> tuple[RolePlan, list[tuple[str, str]]]:
    if config.serving.engine == "simulator":
        return _simulator_role_plan(config, name)
    role: RoleConfig = getattr(config.serving.roles, name)
    group = config.fleet.node_groups[role.node_group]
    path = f"{PROJECT}:serving.roles.{name}"
    problems: list[tuple[str, str]] = []
    dp_local = group.gpus_per_node // role.tensor_parallel
    engine_base = PREFILL_ENGINE_PORT if name == "prefill" else DECODE_ENGINE_PORT
    engine_ports = tuple(engine_base + i for i in range(dp_local))
    sidecar_ports = tuple(SIDECAR_PORT + i for i in range(dp_local)) if name == "decode" else ()
    memory = _memory(config, role)
    if memory.kv_cache_gib <= 0:
        problems.append(
            (
                f"{path}.nodesPerInstance",
                f"the model does not fit: each GPU needs "
                f"{memory.replicated_weights_gib:.1f} GiB replicated weights + "
                f"{memory.expert_weights_gib:.1f} GiB experts (EP={role.expert_parallel}) + "
                f"{memory.reserve_gib:.1f} GiB reserve, but only {memory.usable_gib:.1f} GiB "
                f"({memory.hbm_gib:.1f} GiB x {role.gpu_memory_utilization}) is usable; "
                f"span more nodes per instance to raise the expert-parallel size",
            )
        )
    elif memory.kv_tokens < role.max_model_len:
        problems.append(
            (
                f"{path}.maxModelLen",
                f"each rank has KV room for {memory.kv_tokens} tokens "
                f"({memory.kv_cache_gib:.1f} GiB), fewer than maxModelLen "
                f"{role.max_model_len}; lower maxModelLen or span more nodes per instance",
            )
        )
    memory, shm_gib, pod_memory_gib, memory_problem = _host_memory(config, role, dp_local, memory, name)
    if memory_problem:
        problems.append((f"{path}.{memory_problem[0]}", memory_problem[1]))
    pod_cpus = dp_local * role.cpus_per_rank
    node_cpus = group.cpus_per_node - group.system_reserved_cpus
    # The routing sidecar (decode) takes one more CPU.
    if pod_cpus + (1 if name == "decode" else 0) > node_cpus:
        problems.append(
            (
                f"{path}.cpusPerRank",
                f"a pod needs {pod_cpus} CPUs ({dp_local} ranks x {role.cpus_per_rank}) but a "
                f"node of {role.node_group!r} offers {node_cpus} after system reservations",
            )
        )
    fabric = fabric_for(config.target.kind, config.images.build)
    all2all = role.all2all_backend or dict(fabric.all2all)[name]
    for prefix, why in fabric.all2all_refused:
        if all2all.startswith(prefix):
            why = f"{all2all} cannot run on fabric {fabric.name}: {why}"
            problems.append((f"{path}.all2allBackend", why))
    plan = RolePlan(
        name=name,
        node_group=role.node_group,
        instances=role.instances,
        nodes_per_instance=role.nodes_per_instance,
        gpus_per_node=group.gpus_per_node,
        tensor_parallel=role.tensor_parallel,
        data_parallel=role.data_parallel,
        expert_parallel=role.expert_parallel,
        dp_size_local=dp_local,
        engine_ports=engine_ports,
        supervisor_port=engine_base + dp_local,
        sidecar_ports=sidecar_ports,
        kv_events_ports=tuple(KV_EVENTS_PORT + i for i in range(dp_local)),
        nixl_side_channel_ports=tuple(NIXL_SIDE_CHANNEL_PORT + i for i in range(dp_local)),
        p2p_ports=(
            tuple(P2P_PORT + i for i in range(dp_local))
            if config.serving.kv_tier.cpu_offload and config.serving.kv_tier.peer_to_peer
            else ()
        ),
        dp_rpc_port=DP_RPC_PORT,
        start_ranks=tuple(w * dp_local for w in range(role.nodes_per_instance)),
        memory=memory,
        shm_gib=shm_gib,
        pod_memory_gib=pod_memory_gib,
        pod_cpus=pod_cpus,
        claim=claim_shape(group),
        fabric=fabric,
        all2all_backend=all2all,
        drain_seconds=config.serving.drain_seconds,
        **_instance_range(config, name),
        weights=weight_load_plan(
            config, memory.replicated_weights_gib + memory.expert_weights_gib, group.gpus_per_node, fabric
        ),
        moe=moe_kernels(description_for(config.model.id), role.mtp_tokens > 0),
    )
    return plan, problems


def plan_fleet(config: StackConfig) -> FleetPlan:
    """Derive the fleet plan, or raise PlanError naming every role that cannot be built."""
    sizing, problems = model_sizing(config.model)
    roles = []
    for name in ROLE_NAMES:
        role_plan, role_problems = _role_plan(config, name)
        roles.append(role_plan)
        problems += role_problems
    uses = []
    for group_name, group in sorted(config.fleet.node_groups.items()):
        used = sum(r.nodes for r in roles if r.node_group == group_name)
        uses.append(NodeGroupUse(group_name, group.count, used))
        if used > group.count:
            problems.append(
                (
                    f"{PROJECT}:fleet.nodeGroups.{group_name}.count",
                    f"the roles need {used} nodes "
                    + " + ".join(
                        f"{r.name} {r.instances}x{r.nodes_per_instance}"
                        for r in roles
                        if r.node_group == group_name
                    )
                    + f" but the group has {group.count}",
                )
            )
    if problems:
        raise PlanError(problems)
    # Surge room is what is left when every role runs its most instances.
    spare = {
        use.name: use.nodes
        - sum(r.max_instances * r.nodes_per_instance for r in roles if r.node_group == use.name)
        for use in uses
    }
    # A canary revision's instances take spare nodes first (plan/canary.py); the stable roles'
    # rollout surge counts what it leaves.
    from llmd_fleet.plan.canary import plan_canary

    canary, canary_problems = plan_canary(config, roles, spare)
    if canary_problems:
        raise PlanError(canary_problems)
    if canary is not None:
        spare = {group: left - canary.nodes_in(group) for group, left in spare.items()}
    # What the P/D decider leaves to decode: under the prefix decider, any remainder shorter
    # than its threshold (layers/router/config.py).
    threshold = config.router.remote_prefill_threshold()
    local_prefill = threshold - 1 if threshold is not None else 0
    rollouts = rollouts_for(roles, spare)
    for i, r in enumerate(roles):
        surge, unavailable = rollouts[r.name]
        roles[i] = replace(
            r,
            max_surge=surge,
            max_unavailable=unavailable,
            local_prefill_tokens=local_prefill if r.name == "decode" else 0,
        )
    router = plan_router(config, tuple(roles))
    prompt_tokens = config.router.prompt_tokens(config.workload.input_tokens_p50)
    if config.router.probabilistic_admission and router.admission is None:
        raise PlanError(
            [
                (
                    f"{PROJECT}:router.probabilisticAdmission",
                    "must be false for this fleet: at nominal load (one "
                    f"{prompt_tokens}-token prompt per rank, at most the "
                    "role's maxModelLen) the pool's saturation is already "
                    f"{router.nominal_saturation:.2f}, at or above flow control's gate (1.0), so no "
                    "shedding curve admits nominal traffic; add KV cache per rank or turn it off",
                )
            ]
        )
    explicit = config.router.memory_gib
    if explicit is not None and explicit < router.memory_gib:
        raise PlanError(
            [
                (
                    f"{PROJECT}:router.memoryGiB",
                    f"must be at least {router.memory_gib} GiB, what the plan derives for "
                    f"{config.router.expected_requests_per_second:g} req/s of "
                    f"{prompt_tokens}-token prompts and a flow-control queue "
                    f"bound of {router.queue_max_bytes / GIB:.1f} GiB (got {explicit}); leave it unset "
                    "to use the derived size",
                )
            ]
        )
    if explicit is not None:
        router = replace(router, memory_gib=explicit)
    plan = FleetPlan(roles=tuple(roles), node_groups=tuple(uses), router=router, model=sizing, canary=canary)
    pods = sum(r.max_instances * r.lws_size for r in roles)
    cpus = epp_cpus_for(pods, config.router.expected_requests_per_second)
    if node_problems := system_node_problems(config, cpus, router.memory_gib):
        raise PlanError(node_problems)
    from llmd_fleet.plan.workload import workload_problems

    refusals, _ = workload_problems(config, plan)
    if refusals:
        raise PlanError(refusals)
    return plan


def rollout_for(role: RolePlan, spare_nodes: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of one role with `spare_nodes` of its group left to it: surge
    one instance when its nodes fit, else replace one at a time (a surge instance that could
    never schedule would stall a maxUnavailable-0 rollout for good)."""
    if spare_nodes >= role.nodes_per_instance:
        return 1, 0
    return 0, 1


def rollouts_for(roles: Sequence[RolePlan], spare: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """(maxSurge, maxUnavailable) of each role's rolling update, from its node group's spare nodes.

    Decode surges first (a new instance becomes ready before an old one goes, so decode capacity
    never drops; llm-d's P/D rollout) when its node group has the nodes of one more instance to
    spare. Prefill surges too only when decode does and what decode's surge leaves of prefill's
    group holds a prefill instance: the pinned LWS release's DisaggregatedSet planner scales every role up
    in the same step (`pkg/controllers/disaggregatedset/planner.go` `tryScaleUp`), so both surge
    instances exist at once. Unless every role surges, the planner's last step scales the new
    revision to its target and drains the old one to zero in one reconcile (`tryForceDrain` and
    `applyOrphanPrevention` count the replicas still being created), so for one model load a
    surging role serves one instance short: decode when prefill replaces in place
    (docs/day-two.md), prefill if it surged alone, which would cost the spare nodes and keep
    nothing. With both roles surging every drain waits for new instances that are Ready."""
    left = dict(spare)
    out: dict[str, tuple[int, int]] = {}
    for r in sorted(roles, key=lambda r: r.name != "decode"):
        surges = r.name == "decode" or out.get("decode") == (1, 0)
        out[r.name] = rollout_for(r, left[r.node_group]) if surges else (0, 1)
        left[r.node_group] -= out[r.name][0] * r.nodes_per_instance
    return out
