"""The GPU fabric of a target: how KV moves between pods (NIXL backends), how DeepEP/NCCL reach
the NICs, and what serving pods need for it. Derived from the target, never set per pod.

Each target module registers its fabric here; llmd_fleet/serving/vllm.py and
llmd_fleet/serving/pod.py only read the Fabric the plan carries.
"""

from dataclasses import dataclass, field
from typing import Any

from llmd_fleet.plan import tcpxo


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
    modelexpress_env: tuple[tuple[str, str], ...] = ()
    """Environment of the ModelExpress client with `serving.weightLoading: modelexpress`: the NIXL
    backend that moves the weights (MX_NIXL_BACKEND, default UCX) and NIC pinning."""
    weight_gbps_per_gpu: int = 0
    """Fabric line rate one GPU's weights can move at, in Gb/s (its NICs'), for the plan's
    peer-transfer estimate."""
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
    # ModelExpress over UCX; `auto` pins each rank's UCX_NET_DEVICES to its NUMA-local HCA
    # (modelexpress docs/DEPLOYMENT.md at the pinned tag, a workaround for openucx/ucx#11259).
    modelexpress_env=(("MX_NIXL_BACKEND", "UCX"), ("MX_RDMA_NIC_PIN", "auto")),
    weight_gbps_per_gpu=400,
)

# AWS p5.48xlarge: 32 EFA interfaces (4 per GPU, on the GPU's PCIe root), reached through
# libfabric's `efa` provider, never verbs/UCX. NIXL's `LIBFABRIC` backend moves the KV blocks;
# NVSHMEM (DeepEP) uses its libfabric transport. The engine image is the `efa` build of the wide-EP
# image (llmd_fleet/images/build.py, variant_for): the upstream vLLM image has no EFA user space, so
# `image` is only the matrix fallback that serving_image() refuses for this fabric.
EFA = Fabric(
    name="efa",
    nixl_backends=("LIBFABRIC",),
    # Deliberately absent: FI_EFA_USE_DEVICE_RDMA (libfabric >= 1.18 uses device RDMA whenever
    # the NIC has it) and FI_EFA_FORK_SAFE (no effect on kernels that copy registered pages on
    # fork, 5.13+; aws-ofi-nccl sets it itself), per aws-ofi-nccl doc/efa-env-var.md and
    # libfabric prov/efa/src/efa_env.c. NCCL needs no env on p5: aws-ofi-nccl configures its
    # tuner and protocol.
    engine_env=(
        # Keeps libfabric (NIXL's LIBFABRIC backend) from falling back to a TCP or shm provider.
        ("FI_PROVIDER", "efa"),
        ("NVSHMEM_REMOTE_TRANSPORT", "libfabric"),
        # NVSHMEM's libfabric transport defaults to the `cxi` provider (Slingshot), so EFA must
        # be named (nvshmem src/modules/transport/common/env_defs.h, LIBFABRIC_PROVIDER).
        ("NVSHMEM_LIBFABRIC_PROVIDER", "efa"),
        # IBGDA needs mlx5 verbs; EFA has none.
        ("NVSHMEM_IB_ENABLE_IBGDA", "false"),
        ("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "eth0"),
        # NCCL reaches EFA through the aws-ofi-nccl plugin the EFA installer puts in the image;
        # bootstrap and Gloo stay on the pod's VPC interface.
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("GLOO_SOCKET_IFNAME", "eth0"),
    ),
    # LIBFABRIC on EFA: UCX can silently fall back to TCP there (modelexpress
    # examples/p2p_transfer_k8s/client/vllm/aws_efa at the pinned tag). FI_PROVIDER=efa is set above.
    modelexpress_env=(("MX_NIXL_BACKEND", "LIBFABRIC"),),
    weight_gbps_per_gpu=4 * 100,
    extra={"efa_per_gpu": 4},
)

# GKE A3 Mega (a3-megagpu-8g): 8 GPU NICs without RDMA, GPUDirect-TCPXO. NCCL runs over the TCPXO
# (FasTrak) plugin with the RxDM sidecar; NIXL moves KV over UCX's TCP transport. What env and
# annotations cannot express is in `extra`, read by pod.py: `sidecars` (native sidecars placed
# before the role's own), `volumes` (pod volumes) and `engine_volume_mounts`.
TCPXO = Fabric(
    name="tcpxo",
    nixl_backends=("UCX",),
    engine_env=tcpxo.engine_env(nics=8),
    pod_annotations=tcpxo.pod_annotations(gpus=8, nics=8),
    # No RDMA on A3 Mega: UCX moves weights over TCP on the GPU NICs, no NIC pinning (it probes IB
    # HCAs only).
    modelexpress_env=(("MX_NIXL_BACKEND", "UCX"),),
    weight_gbps_per_gpu=200,
    extra={
        "sidecars": (tcpxo.rxdm_sidecar(),),
        "volumes": tuple(tcpxo.pod_volumes()),
        "engine_volume_mounts": tuple(tcpxo.engine_volume_mounts()),
    },
)

# kind local: no GPU fabric. The simulator's P/D "transfer" is a timed wait on the decode pod
# (serving.simulator.kvCacheTransferTimePerTokenUs); nothing moves over NIXL, so no backend, no
# fabric env and no pod additions.
LOCAL = Fabric(name="none", nixl_backends=())

FABRICS: dict[str, Fabric] = {"onprem": INFINIBAND, "eks": EFA, "gke": TCPXO, "local": LOCAL}


def fabric_for(target_kind: str) -> Fabric:
    """The fabric of a target kind (one per kind: a target's GPU network is fixed by its machines)."""
    return FABRICS[target_kind]
