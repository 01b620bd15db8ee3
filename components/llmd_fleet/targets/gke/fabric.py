"""Kind gke's fabric. Pure."""

from llmd_fleet.core.fabric import DEEPEP_NEEDS_MLX5, Fabric
from llmd_fleet.targets.gke import tcpxo_plan as tcpxo

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
    # No RDMA: the MoE all-to-all runs on NCCL (over the TCPXO plugin) with vLLM 0.33's
    # allgather_reducescatter, the fabric's default all2all; DeepEP is refused.
    all2all_refused=(("deepep", "a3-megagpu-8g NICs have no RDMA; " + DEEPEP_NEEDS_MLX5),),
    extra={
        "sidecars": (tcpxo.rxdm_sidecar(),),
        "volumes": tuple(tcpxo.pod_volumes()),
        "engine_volume_mounts": tuple(tcpxo.engine_volume_mounts()),
    },
)
