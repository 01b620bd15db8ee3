"""Whether one endpoint-picker replica fits a node of the CPU pool the stack creates (gke, eks).

The EPP runs one replica per node (required anti-affinity), so a replica whose requests exceed a
node's allocatable CPU or memory stays Pending and the fleet has no router. On-prem the CPU nodes
are the cluster's own and unknown offline: nothing is checked there. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Key, Problem
from llmd_fleet.targets.specs import SPECS

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

GIB_PER_GB = 1e9 / 1024**3


@dataclass(frozen=True)
class NodeShape:
    """A machine type's vCPUs and memory, read off its name (GCE and EC2 naming rules)."""

    vcpus: int
    memory_gib: float


# GCE predefined machine types: <series>-<standard|highmem|highcpu>-<vCPUs>, with 4, 8 and 1 GB
# per vCPU for the N2, N2D and C3 series (Compute Engine "General-purpose machine family" and
# "Compute-optimized" pages; C3 standard is also 4 GB per vCPU).
_GCE = re.compile(r"(n2|n2d|c3)-(standard|highmem|highcpu)-(\d+)", re.ASCII)
_GCE_GB_PER_VCPU = {"standard": 4, "highmem": 8, "highcpu": 1}
# EC2 sizes: xlarge is 4 vCPUs, <n>xlarge is 4n (2xlarge 8, 12xlarge 48, 24xlarge 96); memory per
# vCPU 4 GiB for the m families, 2 for c, 8 for r (EC2 instance types, "General purpose",
# "Compute optimized", "Memory optimized").
_EC2 = re.compile(r"([mcr])(5|6i|7i)\.(\d*)xlarge", re.ASCII)
_EC2_GIB_PER_VCPU = {"m": 4, "c": 2, "r": 8}


def node_shape(machine_type: str) -> NodeShape | None:
    """A known GCE machine type's or EC2 instance type's vCPUs and memory; None when unknown."""
    if m := _GCE.fullmatch(machine_type):
        vcpus = int(m.group(3))
        return NodeShape(vcpus, vcpus * _GCE_GB_PER_VCPU[m.group(2)] * GIB_PER_GB)
    if m := _EC2.fullmatch(machine_type):
        vcpus = 4 * int(m.group(3) or 1)
        return NodeShape(vcpus, vcpus * _EC2_GIB_PER_VCPU[m.group(1)])
    return None


def allocatable(shape: NodeShape) -> tuple[float, float]:
    """CPU cores and GiB a pod can request on a node of `shape`: GKE's reservation for the kubelet
    and the system (GKE "Node allocatable resources": CPU 6% of the first core, 1% of the next, 0.5%
    of the next two, 0.25% above four; memory 25% of the first 4 GiB, 20% of the next 4, 10% of the
    next 8, 6% of the next 112, 2% above 128, plus 100 MiB eviction threshold). EKS's AL2023 AMI
    reserves about the same CPU and less memory, so the GKE figure is the conservative one for both."""
    cores = shape.vcpus
    cpu_reserved = 0.06 * min(cores, 1) + 0.01 * min(max(cores - 1, 0), 1)
    cpu_reserved += 0.005 * min(max(cores - 2, 0), 2) + 0.0025 * max(cores - 4, 0)
    memory = shape.memory_gib
    bands = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06))
    reserved, left = 0.0, memory
    for size, share in bands:
        take = min(left, size)
        reserved, left = reserved + take * share, left - take
    reserved += left * 0.02 + 100 / 1024
    return cores - cpu_reserved, memory - reserved


def system_node_problems(config: StackConfig, epp_cpus: int, epp_memory_gib: int) -> list[Problem]:
    """One EPP replica (its CPU and memory requests) fits a node of the stack's CPU pool."""
    pool = SPECS[config.target.kind].system_pool(config)
    if pool is None:
        return []
    where, machine = pool.machine_key, pool.machine_type
    shape = node_shape(machine)
    if shape is None:
        return []  # a type this table does not know: the cloud's own scheduler is the check
    cpus, memory = allocatable(shape)
    if epp_cpus <= cpus and epp_memory_gib <= memory:
        return []
    return [
        Problem(
            where,
            f"{machine} offers {cpus:.1f} CPUs and {memory:.0f} GiB to pods, but one endpoint-picker "
            f"replica requests {epp_cpus} CPUs and {epp_memory_gib} GiB (router.expectedRequestsPerSecond "
            f"{config.router.expected_requests_per_second:g}); choose a larger machine type or size the "
            "router for a lower rate",
        )
    ]


def pool_of(config: StackConfig) -> tuple[Key, str, int] | None:
    """The stack's CPU pool: its count's key, machine type and node count where the target creates
    one (`TargetSpec.system_pool`), else None."""
    pool = SPECS[config.target.kind].system_pool(config)
    return None if pool is None else (pool.count_key, pool.machine_type, pool.count)


def picker_pairs_problems(config: StackConfig, pickers: list[tuple[str, int, int, int]]) -> list[Problem]:
    """Several models' endpoint pickers in the stack's CPU pool (`llmd-fleet:models`): each
    model's replicas need distinct nodes (required anti-affinity, per model), and together their
    requests must fit the pool's allocatable CPU and memory. `pickers`: (model, replicas, CPUs and
    GiB one replica requests)."""
    pool = pool_of(config)
    if pool is None or len(pickers) < 2:
        return []
    where, machine, nodes = pool
    problems = [
        Problem(
            where,
            f"model {name}'s {replicas} endpoint-picker replicas need {replicas} nodes; the pool has {nodes}",
        )
        for name, replicas, _, _ in pickers
        if replicas > nodes
    ]
    shape = node_shape(machine)
    if shape is None:
        return problems
    cpus, memory = allocatable(shape)
    need_cpus = sum(r * c for _, r, c, _ in pickers)
    need_memory = sum(r * m for _, r, _, m in pickers)
    if need_cpus > cpus * nodes or need_memory > memory * nodes:
        share = ", ".join(f"{name} {r} x ({c} CPUs, {m} GiB)" for name, r, c, m in pickers)
        problems.append(
            Problem(
                where,
                f"the models' endpoint pickers request {need_cpus} CPUs and {need_memory} GiB ({share}) but "
                f"{nodes} x {machine} offer {cpus * nodes:.1f} CPUs and {memory * nodes:.0f} GiB to pods",
            )
        )
    return problems
