"""Kind eks's fabric. Pure."""

from llmd_fleet.core.fabric import DEEPEP_NEEDS_MLX5, Fabric

EFA_PER_GPU = 4
"""EFA interfaces per H100 on p5.48xlarge (32 per instance, 8 GPUs; shared/reference/cluster.md)."""

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
    weight_gbps_per_gpu=EFA_PER_GPU * 100,
    # MoE all-to-all over NCCL (aws-ofi-nccl on EFA): vLLM 0.33's allgather_reducescatter, the
    # fabric's default all2all. DeepEP is refused: see DEEPEP_NEEDS_MLX5.
    all2all_refused=(("deepep", "efa has no mlx5 verbs; " + DEEPEP_NEEDS_MLX5),),
    preflight_basis=(
        "libfabric's efa provider with device RDMA: the NIC moves the bytes (kernel bypass), so "
        "1 GiB transfers over one EFA device are expected above 40% of its line rate; an "
        "estimate, not a measurement: tune minEfficiency after the first run"
    ),
    nics_per_gpu=EFA_PER_GPU,
)


# AWS p5.48xlarge running the pinned upstream vLLM image (`images.build: false`): it has no EFA
# user space (no libfabric efa provider), so the EFA interfaces are unusable and KV blocks move
# through NIXL's UCX backend over TCP on the pod's VPC interface (UCX has no EFA transport). The
# config allows this only where no instance spans nodes (targets/images.py): the MoE all-to-all
# then stays inside a node on NVLink, and only the prefill-to-decode KV transfer crosses nodes.
VPC_TCP = Fabric(
    name="tcp",
    nixl_backends=("UCX",),
    kv_over_rdma=False,
    engine_env=(
        # NCCL and Gloo bootstrap on the pod's VPC interface, as with EFA.
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("GLOO_SOCKET_IFNAME", "eth0"),
    ),
    all2all_refused=(("deepep", "the upstream image has no EFA user space; " + DEEPEP_NEEDS_MLX5),),
    # No rate is known for UCX over TCP on a p5's VPC interface: the probe moves and verifies every
    # byte and reports its rates, but does not gate on one.
    preflight_rate_gate=False,
    preflight_basis=(
        "UCX over TCP on the pod's VPC interface (the upstream image has no EFA user space): no "
        "rate is gated; the probe reports what it measured"
    ),
)
