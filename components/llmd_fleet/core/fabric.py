"""The GPU fabric of a target: how KV moves between pods (NIXL backends), how DeepEP/NCCL reach
the NICs, and what serving pods need for it. Derived from the target, never set per pod: each target
defines its own (llmd_fleet/targets/<kind>/fabric.py); llmd_fleet/layers/serving/vllm.py and
pod.py only read the Fabric the plan carries. Pure.
"""

from dataclasses import dataclass, field
from typing import Any

DEEPEP_NEEDS_MLX5 = (
    "DeepEP's inter-node kernels are written for NVSHMEM IBGDA, GPU-initiated RDMA over mlx5 "
    "(deepseek-ai/DeepEP csrc/kernels/ibgda_device.cuh); only a patched DeepEP on NVSHMEM 3.7 "
    "libfabric runs on EFA (AWS sample 'DeepSeek-R1 on SGLang with DeepEP over EFA'), not the "
    "pinned build; use allgather_reducescatter"
)
"""Why the deepep_* all2all backends are refused on a fabric without mlx5 RDMA."""


@dataclass(frozen=True)
class Fabric:
    """Transport settings every serving pod of a target shares."""

    name: str
    """e.g. `infiniband` (on-prem HGX with CX-7), `tcpxo` (GKE A3 Mega), `efa` (AWS p5)."""
    nixl_backends: tuple[str, ...]
    """NIXL backends for the KV transfer (kv_connector_extra_config.backends)."""
    kv_over_rdma: bool = True
    """Whether NIXL's UCX moves KV over the pod's RDMA NICs (verbs); False where it runs over the
    kernel's TCP (GKE TCPXO's GPU NICs, EKS without EFA user space), where no RDMA device is there
    to pin a rank to."""
    engine_env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the vLLM container (NCCL/UCX/NVSHMEM/libfabric settings)."""
    pod_annotations: tuple[tuple[str, str], ...] = ()
    """Annotations of serving pods (e.g. multi-network interfaces)."""
    modelexpress_env: tuple[tuple[str, str], ...] = ()
    """Environment of the ModelExpress client with `serving.weightLoading: modelexpress`: the NIXL
    backend that moves the weights (MX_NIXL_BACKEND, default UCX) and NIC pinning."""
    weight_gbps_per_gpu: int = 0
    """Fabric line rate one GPU's weights can move at, in Gb/s (its NICs'), for the plan's
    peer-transfer estimate."""
    all2all: tuple[tuple[str, str], ...] = (
        ("prefill", "allgather_reducescatter"),
        ("decode", "allgather_reducescatter"),
    )
    """vLLM's MoE all-to-all backend (--all2all-backend) per role when the role sets none:
    DeepEP only where its inter-node kernels can run (NVSHMEM IBGDA over Mellanox RDMA), else
    vLLM 0.33's own default, allgather_reducescatter over NCCL."""
    all2all_refused: tuple[tuple[str, str], ...] = ()
    """(backend prefix, why it cannot run on this fabric, with the source) for
    `serving.roles.<role>.all2allBackend` values the plan refuses."""
    preflight_rate_gate: bool = True
    """Whether the fabric preflight fails below `nicGbps x minEfficiency` (docs/preflight.md).
    False where no rate one probe pair can reach is known: the probe still moves and verifies
    every byte over the fabric's backend and reports its rates, but passes at any rate."""
    preflight_basis: str = ""
    """Why the preflight's rate gate is what it is on this fabric (the plan prints it)."""
    image: str = "vllm"
    """Version-matrix image name of the serving image that supports this fabric."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Target-specific data other builders may read (documented where it is set)."""
