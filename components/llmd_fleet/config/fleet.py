"""The `fleet` section: the GPU node groups, and the rules every node group follows. Pure."""

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    DnsSubdomain,
    Labels,
    label_key_problem,
)
from llmd_fleet.conventions import DRANET_RDMA_CLASS

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


def _resource_name(value: str) -> str:
    """An extended resource name (`domain/name`) has the grammar of a label key."""
    if problem := label_key_problem(value):
        raise ValueError(problem.replace("label key", "resource name"))
    return value


class Accelerator(StrEnum):
    """GPU models the fleet sizes for, or `none` for the GPU-less nodes of kind local."""

    H100_80GB = "H100-80GB"
    H200_141GB = "H200-141GB"
    H800_80GB = "H800-80GB"
    NONE = "none"


# Usable HBM per GPU as the driver reports it: nvidia-smi shows 81559 MiB on H100 SXM5 80GB and
# 143771 MiB on H200 SXM 141GB (llm-d's 64 x H200 GLM-5.2 study). H800 SXM5 carries the H100's
# 80 GB HBM3 stack (NVIDIA's H800 product brief: 80 GB, 3.35 TB/s, the same as H100 SXM5); its
# reported size is taken to be the H100's, unmeasured here.
HBM_MIB: dict[Accelerator, int] = {
    Accelerator.H100_80GB: 81559,
    Accelerator.H200_141GB: 143771,
    Accelerator.H800_80GB: 81559,
}


class NodeGroupConfig(_Model):
    """A homogeneous group of GPU nodes."""

    count: Annotated[int, Field(ge=1, le=4096)]
    """Number of nodes in the group."""
    accelerator: Annotated[Accelerator, Field(strict=False)] = Accelerator.H100_80GB
    """GPU model of every node; `none` for the CPU nodes of kind local (and only there)."""
    gpus_per_node: Literal[0, 8] = 8
    """GPUs per node (HGX H100 boards carry 8); 0 exactly when `accelerator` is `none`."""
    host_memory_gib: Annotated[int, Field(ge=2, le=32768)]
    """Host DRAM per node in GiB, as the kubelet reports it before reservations (at least 64 on
    GPU nodes; a kind node reports the laptop's memory)."""
    cpus_per_node: Annotated[int, Field(ge=1, le=4096)]
    """Logical CPUs per node (at least 16 on GPU nodes; a kind node reports the laptop's CPUs)."""
    nics_per_node: Annotated[int, Field(ge=1, le=64)] = 8
    """GPU-fabric NICs per node (RDMA/EFA/TCPXO), not counting the primary NIC."""
    nic_gbps: Annotated[int, Field(ge=1, le=3200)] | None = None
    """Line rate of one GPU-fabric NIC in Gb/s. The plan divides the node's fabric bandwidth
    (nicsPerNode x nicGbps) among its GPUs to bound the KV-transfer time alert
    (docs/observability.md). Unset: the target's NIC, `SPECS[kind].nic_gbps` in
    llmd_fleet/targets/specs.py (onprem 400, a
    ConnectX-7; gke 200, one of A3 Mega's eight GPU NICs; eks 100, one of p5.48xlarge's 32 EFA)."""
    system_reserved_memory_gib: Annotated[int, Field(ge=0, le=32768)] = 64
    """Host memory kept for the OS, kubelet and node daemons; pods never plan on it."""
    system_reserved_cpus: Annotated[int, Field(ge=0, le=4096)] = 16
    """Logical CPUs kept for the OS, kubelet and node daemons."""
    node_labels: Labels = Field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    """Labels every node of the group carries; serving pods select nodes by them."""
    accelerator_allocation: Literal["dra", "device-plugin", "none"] = "dra"
    """How pods get GPUs and NICs, exactly one mechanism per group: `dra` (ResourceClaims,
    resource.k8s.io/v1) or `device-plugin` (`nvidia.com/gpu` and `rdmaResource` limits); `none`
    on GPU-less nodes (accelerator `none`, kind local): no claim, no device limit."""
    nic_device_class: DnsSubdomain | None = DRANET_RDMA_CLASS
    """DRA: DeviceClass of the fabric NICs claimed next to the GPUs. The default is the class this
    package creates over DRANET's RDMA NICs; null claims GPUs only (NICs reach pods another way)."""
    nic_topology: Literal["pcie-root-per-gpu", "whole-node"] = "pcie-root-per-gpu"
    """DRA: `pcie-root-per-gpu` pairs each GPU with nicsPerNode/gpusPerNode NICs on the same PCIe
    root (resource.kubernetes.io/pcieRoot); `whole-node` claims all GPUs and all NICs with no
    pairing, for fabrics whose topology is unknown."""
    rdma_resource: Annotated[str, AfterValidator(_resource_name)] | None = None
    """device-plugin: resource that exposes the RDMA NICs to pods (e.g. `rdma/ib` from the RDMA
    shared device plugin); unset when the NICs need no device-plugin resource."""
    rdma_resource_per_pod: Annotated[int, Field(ge=1, le=64)] = 1
    """device-plugin: how many units of `rdmaResource` a serving pod requests."""


class FleetConfig(_Model):
    """The GPU node groups, keyed by name."""

    node_groups: Annotated[dict[str, NodeGroupConfig], Field(min_length=1)]
    """Node groups by name; names are DNS labels."""
