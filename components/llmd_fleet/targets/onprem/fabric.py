"""Kind onprem's fabric. Pure."""

from llmd_fleet.core.fabric import Fabric

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
    # ConnectX-7 (mlx5): DeepEP's high-throughput kernels for prefill's large batches, its
    # low-latency kernels for decode (llm-d's wide-EP guide), both over NVSHMEM IBGDA.
    all2all=(("prefill", "deepep_high_throughput"), ("decode", "deepep_low_latency")),
    preflight_basis=(
        "UCX over RDMA verbs: the NIC moves the bytes (kernel bypass), so one queue pair on one "
        "ConnectX-7 with 1 GiB transfers is expected well above 40% of its line rate; an "
        "estimate, not a measurement: tune minEfficiency after the first run"
    ),
)
