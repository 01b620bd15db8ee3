"""Fake nodes for the twin, copied from a stack's node groups, and the ResourceSlices their DRA
drivers would publish.

Pure: dicts in, dicts out. Each node of group `g` is `g-000`, `g-001`, ... with the group's
labels, the GPU taint, capacity from the group (CPUs, host memory, local disk) and the kwok
annotation that hands it to kwok. Its GPUs appear as the NVIDIA DRA driver publishes them
(driver `gpu.nvidia.com`, one pool per node) and its fabric NICs as DRANET does (driver
`dra.net`). HGX H100 boards put each GPU and one NIC behind the same PCIe switch, so GPU i and
NIC i report the same `resource.kubernetes.io/pcieRoot`; the eight roots differ. Bus numbers are
synthetic (plausible, not copied from a real board); only their pairing matters.
"""

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from llmd_fleet.config.fleet import HBM_MIB, NodeGroupConfig
from llmd_fleet.platform.dra import GPU_DEVICE_CLASS, PCIE_ROOT

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "dra.net"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# kwok manages nodes carrying this annotation (its default selector) and the pods bound to them.
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
NODE_GROUP_LABEL = "llmd-fleet.io/node-group"
# Local NVMe of an HGX H100 system (8 x 3.84 TB on DGX H100): the pods' ephemeral storage.
NODE_EPHEMERAL_STORAGE = "28Ti"
MAX_PODS = "110"
# PCIe root buses of the eight GPU/NIC pairs (synthetic; domain 0000). GPU i sits at bus root+4
# and NIC i at root+2, both behind root i.
ROOT_BUSES = (0x15, 0x37, 0x48, 0x59, 0x97, 0xB8, 0xC9, 0xDA)
# What the NVIDIA DRA driver reports for an H100 SXM5 (attribute names per its docs).
H100_PRODUCT = "NVIDIA H100 80GB HBM3"
H100_ARCHITECTURE = "Hopper"
H100_COMPUTE_CAPABILITY = "9.0.0"
# The DeviceClass the NVIDIA DRA driver's chart installs for whole GPUs (the twin installs it
# itself when the chart is not deployed).
GPU_CLASS_SELECTOR = f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"


@dataclass(frozen=True)
class FakeNode:
    """One node of a group and what the twin creates for it."""

    name: str
    group: str
    index: int
    config: NodeGroupConfig


def node_names(group: str, count: int) -> list[str]:
    """`h100-000` ... : zero-padded so names sort in index order."""
    width = max(3, len(str(count - 1)))
    return [f"{group}-{i:0{width}d}" for i in range(count)]


def fake_nodes(node_groups: dict[str, NodeGroupConfig]) -> list[FakeNode]:
    """Every node of every group, groups in name order."""
    return [
        FakeNode(name, group, i, config)
        for group, config in sorted(node_groups.items())
        for i, name in enumerate(node_names(group, config.count))
    ]


# The cluster's CPU nodes, which a stack does not describe (it sizes only GPU groups) but every
# real cluster has: the router's endpoint pickers (required anti-affinity, so one per node) and
# tokenizers run there. Untainted, so nothing that tolerates the GPU taint is pushed onto them.
# Their shape is the CPU pool the cloud stacks default to (n2-standard-96, m7i.24xlarge: 96 vCPUs,
# 384 GiB), which holds one endpoint picker sized for the default 127 req/s (~69 cores, 93 GiB;
# plan/system_nodes.py refuses a cloud pool that cannot).
SYSTEM_GROUP = "system"
SYSTEM_NODES = 3
SYSTEM_NODE_CPUS = 96
SYSTEM_NODE_MEMORY_GIB = 384


def system_node_objects(count: int = SYSTEM_NODES) -> list[dict[str, Any]]:
    """Plain CPU nodes for the cluster's non-GPU workloads."""
    objects = []
    for name in node_names(SYSTEM_GROUP, count):
        resources = {
            "cpu": str(SYSTEM_NODE_CPUS),
            "memory": f"{SYSTEM_NODE_MEMORY_GIB}Gi",
            "ephemeral-storage": "1Ti",
            "pods": MAX_PODS,
        }
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        NODE_GROUP_LABEL: SYSTEM_GROUP,
                        "type": "kwok",
                    },
                    "annotations": dict(KWOK_ANNOTATION),
                },
                "status": {"capacity": resources, "allocatable": dict(resources)},
            }
        )
    return objects


def pcie_root(pair: int) -> str:
    """`resource.kubernetes.io/pcieRoot` of GPU/NIC pair `pair` (`pci<domain>:<bus>`)."""
    return f"pci0000:{ROOT_BUSES[pair % len(ROOT_BUSES)]:02x}"


def _bus_id(pair: int, offset: int) -> str:
    return f"0000:{ROOT_BUSES[pair % len(ROOT_BUSES)] + offset:02x}:00.0"


def gpu_uuid(node: str, index: int) -> str:
    """A stable, node-unique GPU UUID in NVIDIA's `GPU-xxxxxxxx-xxxx-...` shape."""
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def node_object(node: FakeNode) -> dict[str, Any]:
    """The Node (status included: the API server keeps a node's status on create)."""
    cfg = node.config
    cpu_allocatable = cfg.cpus_per_node - cfg.system_reserved_cpus
    memory_allocatable = cfg.host_memory_gib - cfg.system_reserved_memory_gib
    labels = {
        **cfg.node_labels,
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        NODE_GROUP_LABEL: node.group,
        "type": "kwok",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        # GPU nodes carry the GPU taint; a group without accelerators (kind local's workers,
        # docs/local-sim.md) has none, as its kind nodes have none.
        "spec": {"taints": [dict(GPU_TAINT)]} if cfg.gpus_per_node else {},
        "status": {
            "capacity": {
                "cpu": str(cfg.cpus_per_node),
                "memory": f"{cfg.host_memory_gib}Gi",
                "ephemeral-storage": NODE_EPHEMERAL_STORAGE,
                "pods": MAX_PODS,
            },
            "allocatable": {
                "cpu": str(cpu_allocatable),
                "memory": f"{memory_allocatable}Gi",
                "ephemeral-storage": NODE_EPHEMERAL_STORAGE,
                "pods": MAX_PODS,
            },
        },
    }


def _slice(node: str, driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu_slice(node: FakeNode) -> dict[str, Any]:
    """The node's GPUs as the NVIDIA DRA driver publishes them (whole GPUs, no MIG)."""
    hbm = HBM_MIB[node.config.accelerator]
    devices = []
    for i in range(node.config.gpus_per_node):
        devices.append(
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": gpu_uuid(node.name, i)},
                    "index": {"int": i},
                    "productName": {"string": H100_PRODUCT},
                    "brand": {"string": "Nvidia"},
                    "architecture": {"string": H100_ARCHITECTURE},
                    "cudaComputeCapability": {"version": H100_COMPUTE_CAPABILITY},
                    PCI_BUS_ID: {"string": _bus_id(i, 4)},
                    PCIE_ROOT: {"string": pcie_root(i)},
                },
                "capacity": {"memory": {"value": f"{hbm}Mi"}},
            }
        )
    return _slice(node.name, GPU_DRIVER, devices)


def nic_slice(node: FakeNode) -> dict[str, Any]:
    """The node's fabric NICs as DRANET publishes them: RDMA-capable ConnectX-7 ports, NIC i on
    the PCIe root of GPU i * gpus / nics (one per GPU on HGX H100)."""
    cfg = node.config
    per_gpu = max(1, cfg.nics_per_node // cfg.gpus_per_node)
    devices = []
    for i in range(cfg.nics_per_node):
        pair = i // per_gpu
        devices.append(
            {
                "name": f"nic-{i}",
                "attributes": {
                    "ifName": {"string": f"eth{i + 1}"},
                    "rdma": {"bool": True},
                    "rdmaDevice": {"string": f"mlx5_{i}"},
                    "pciAddress": {"string": _bus_id(pair, 2 + i % per_gpu)},
                    "pciVendor": {"string": "Mellanox Technologies"},
                    "numaNode": {"int": 0 if pair < cfg.gpus_per_node // 2 else 1},
                    "virtual": {"bool": False},
                    PCI_BUS_ID: {"string": _bus_id(pair, 2 + i % per_gpu)},
                    PCIE_ROOT: {"string": pcie_root(pair)},
                },
            }
        )
    return _slice(node.name, NIC_DRIVER, devices)


def gpu_device_class() -> dict[str, Any]:
    """DeviceClass `gpu.nvidia.com`, as the NVIDIA DRA driver's chart installs it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": GPU_CLASS_SELECTOR}}]},
    }


def twin_objects(node_groups: dict[str, NodeGroupConfig]) -> Iterator[dict[str, Any]]:
    """Everything `twin up` creates for a stack: the GPU DeviceClass, the CPU system nodes, then
    per GPU node the Node and its two ResourceSlices."""
    yield gpu_device_class()
    yield from system_node_objects()
    for node in fake_nodes(node_groups):
        if node.config.accelerator_allocation != "dra":
            yield node_object(node)
            continue
        yield node_object(node)
        yield gpu_slice(node)
        yield nic_slice(node)


def pairing_violations(allocated: Iterable[dict[str, Any]], slices: Iterable[dict[str, Any]]) -> list[str]:
    """Which claims break the per-GPU pairing. `allocated` are ResourceClaim objects (read from the
    API server), `slices` the ResourceSlices; for each request pair gpu-i / nic-i of a claim, the
    allocated GPU and NIC must report the same pcieRoot, and no two pairs the same root."""
    roots: dict[tuple[str, str, str], str] = {}
    for item in slices:
        spec = item["spec"]
        for device in spec.get("devices", []):
            root = device.get("attributes", {}).get(PCIE_ROOT, {}).get("string")
            if root is not None:
                roots[(spec["driver"], spec["pool"]["name"], device["name"])] = root
    problems = []
    for claim in allocated:
        name = f"{claim['metadata'].get('namespace', '')}/{claim['metadata']['name']}"
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        by_request: dict[str, list[str | None]] = {}
        for result in results:
            key = (result["driver"], result["pool"], result["device"])
            by_request.setdefault(result["request"], []).append(roots.get(key))
        if not any(request.startswith("gpu-") for request in by_request):
            problems.append(f"{name}: no per-GPU request allocated")
        seen: set[str] = set()
        for request, gpu_roots in sorted(by_request.items()):
            if not request.startswith("gpu-"):
                continue
            nic_roots = by_request.get("nic-" + request.removeprefix("gpu-"), [])
            together = set(gpu_roots) | set(nic_roots)
            if None in together or len(together) != 1 or not nic_roots:
                problems.append(
                    f"{name}: {request} and its NICs are not on one PCIe root ({sorted(map(str, together))})"
                )
                continue
            root = together.pop()
            if root in seen:
                problems.append(f"{name}: two GPU/NIC pairs on PCIe root {root}")
            seen.add(str(root))
    return problems
