"""The GPU fabric of a target: how KV moves between pods (NIXL backends), how DeepEP/NCCL reach
the NICs, and what serving pods need for it. Derived from the target, never set per pod.

Each target module registers its fabric here; components/vllm.py and components/pod.py only read
the Fabric the plan carries.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fabric:
    """Transport settings every serving pod of a target shares."""

    name: str
    """e.g. `infiniband` (on-prem HGX with CX-7), `tcpxo` (GKE A3 Mega), `efa` (AWS p5)."""
    nixl_backends: tuple[str, ...]
    """NIXL backends for the KV transfer (kv_connector_extra_config.backends)."""
    engine_env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the vLLM container (NCCL/UCX/NVSHMEM/libfabric settings)."""
    pod_annotations: tuple[tuple[str, str], ...] = ()
    """Annotations of serving pods (e.g. multi-network interfaces)."""
    image: str = "vllm"
    """Version-matrix image name of the serving image that supports this fabric."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Target-specific data other builders may read (documented where it is set)."""


# On-prem HGX H100: 8 x ConnectX-7 InfiniBand/RoCE. NIXL over UCX; DeepEP's inter-node kernels
# over NVSHMEM IBGDA (GPU-initiated RDMA).
INFINIBAND = Fabric(
    name="infiniband",
    nixl_backends=("UCX",),
    engine_env=(
        ("NVSHMEM_REMOTE_TRANSPORT", "ibgda"),
        ("NVSHMEM_IB_ENABLE_IBGDA", "true"),
        ("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "eth0"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("GLOO_SOCKET_IFNAME", "eth0"),
    ),
)

FABRICS: dict[str, Fabric] = {"onprem": INFINIBAND}


def fabric_for(target_kind: str) -> Fabric:
    """The fabric of a target kind (one per kind: a target's GPU network is fixed by its machines)."""
    return FABRICS[target_kind]
