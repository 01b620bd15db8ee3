"""The GPU fabric of a target: how KV moves between pods (NIXL backends), how DeepEP/NCCL reach
the NICs, and what serving pods need for it. Derived from the target, never set per pod: each target
defines its own (llmd_fleet/targets/<kind>/fabric.py); llmd_fleet/layers/serving/vllm.py and
pod.py only read the Fabric the plan carries. Pure.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmd_fleet.core.pod_context import Skip

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
    sidecars: tuple[Mapping[str, Any], ...] = ()
    """Native sidecars of every serving pod, placed before the role's own (GKE TCPXO: RxDM)."""
    volumes: tuple[Mapping[str, Any], ...] = ()
    """Pod volumes the sidecars and the engine mount (GKE TCPXO: host libraries, devices)."""
    engine_volume_mounts: tuple[Mapping[str, Any], ...] = ()
    """Mounts of `volumes` into the engine container (and the fabric preflight's probe)."""
    sidecar_capability_reason: str = ""
    """Why the sidecars add capabilities, appended to the engine's reason for checkov's
    CKV_K8S_25 (llmd_fleet/core/pod_context.py capability_skips); empty without sidecars."""
    sidecar_skips: tuple[Skip, ...] = ()
    """The checkov checks the sidecars fail on purpose, each with its reason."""
    nics_per_gpu: int = 0
    """GPU-fabric NICs per GPU where a GPU has several (EFA devices on p5.48xlarge); 0: not
    counted per GPU."""
