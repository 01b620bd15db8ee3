"""The `serving` section: namespace, load budget, the prefill/decode roles, the KV tiers and the
simulator. Pure."""

from typing import Annotated, Literal

from pydantic import Field, field_validator

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    DEFAULT_HOST_DATA_ROOT,
    DNS_LABEL,
    DnsSubdomain,
    GitRevision,
    HostDataRoot,
    HostPath,
    ManagedNamespace,
    Pattern,
)
from llmd_fleet.layers.autoscaling.config import AutoscalingConfig
from llmd_fleet.layers.preflight.config import PreflightConfig

All2AllBackend = Literal[
    "deepep_high_throughput", "deepep_low_latency", "deepep_v2", "allgather_reducescatter", "naive"
]

# Seconds after the drain a terminating serving pod is given for teardown (its grace period is
# drainSeconds + this; pod.py and the autoscaling rules read it here).
TEARDOWN_SECONDS = 60


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class RoleConfig(_Model):
    """One serving role (prefill or decode): a set of identical multi-node vLLM instances."""

    node_group: str
    """Node group (a key of `fleet.nodeGroups`) the role runs on."""
    nodes_per_instance: Annotated[int, Field(ge=1, le=256)]
    """Nodes one instance spans: the LeaderWorkerSet group size."""
    instances: Annotated[int, Field(ge=1, le=4096)]
    """Number of instances (LeaderWorkerSet replicas)."""
    tensor_parallel: Annotated[int, Field(ge=1, le=64)] = 1
    """Tensor-parallel size inside each data-parallel rank."""
    data_parallel: Annotated[int, Field(ge=1, le=16384)]
    """Data-parallel size of an instance (attention runs data-parallel)."""
    expert_parallel: Annotated[int, Field(ge=1, le=16384)]
    """Expert-parallel size; vLLM uses TP x DP when expert parallelism is on, so it must equal that."""
    block_size: Literal[16, 32, 64, 128, 256] = 64
    """KV-cache block size in tokens (vLLM --block-size); prefill and decode must agree."""
    max_model_len: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """Longest sequence (prompt + output) an instance accepts (vLLM --max-model-len)."""
    mtp_tokens: Annotated[int, Field(ge=0, le=8)] = 0
    """Multi-token-prediction speculative tokens; 0 turns speculative decoding off."""
    gpu_memory_utilization: Annotated[float, Field(gt=0.5, le=0.98)] = 0.90
    """Fraction of each GPU's HBM vLLM may use (vLLM --gpu-memory-utilization)."""
    runtime_reserve_gib: Annotated[float, Field(ge=0, le=80)] = 8.0
    """HBM per GPU kept for activations, CUDA graphs and communication buffers before KV."""
    nvshmem_heap_gib: Annotated[int, Field(ge=1, le=32)] = 4
    """NVSHMEM symmetric heap per GPU for DeepEP (NVSHMEM_SYMMETRIC_SIZE); counted in the budget."""
    host_memory_per_rank_gib: Annotated[int, Field(ge=8, le=4096)] = 48
    """Host memory one engine process (one DP rank) needs outside the KV tier."""
    cpus_per_rank: Annotated[int, Field(ge=1, le=512)] = 8
    """Logical CPUs requested per DP rank."""
    all2all_backend: All2AllBackend | None = None
    """MoE all-to-all backend; the role's default when unset (prefill: DeepEP high-throughput,
    decode: DeepEP low-latency)."""
    max_num_batched_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] | None = None
    """vLLM --max-num-batched-tokens; vLLM's default when unset."""
    max_num_seqs: Annotated[int, Field(ge=1, le=65536)] | None = None
    """vLLM --max-num-seqs; vLLM's default when unset."""
    enforce_eager: bool = False
    """Disable CUDA graphs (vLLM --enforce-eager)."""
    redundant_experts: Annotated[int, Field(ge=0, le=4096)] | None = None
    """Expert-parallel load balancing (vLLM --enable-eplb) with this many redundant experts
    (--eplb-config num_redundant_experts): the experts plus these must divide by
    expertParallel, so an EP size that does not divide the experts becomes possible (the SGLang
    DeepSeek-V3 run: 256 + 32 over EP72). Unset: no load balancing; 0: balancing without spares.
    Each rank holds (experts + N) / expertParallel experts per MoE layer (the plan counts them)."""
    dual_batch_overlap: bool = False
    """Split each step into two micro-batches whose all-to-all overlaps the other's compute
    (vLLM --enable-dbo). vLLM keeps one workspace per micro-batch, which the plan counts."""


class RolesConfig(_Model):
    """The two disaggregated roles."""

    prefill: RoleConfig
    """Prefill role: computes prompts and hands KV to decode over NIXL."""
    decode: RoleConfig
    """Decode role: generates tokens behind the P/D routing sidecar."""


class SecondaryKvTierConfig(_Model):
    """A file-system KV tier below the CPU tier (vLLM's tiering `fs` tier)."""

    type: Literal["local-nvme", "pvc"]
    """`local-nvme`: a hostPath directory on the node's NVMe; `pvc`: a PersistentVolumeClaim per pod
    from `storageClass`."""
    host_root: HostDataRoot = DEFAULT_HOST_DATA_ROOT
    """local-nvme: the node's data root (where the NVMe is mounted), a directory below /mnt, /srv,
    /data or /scratch; `path` must be a dedicated directory below it (llmd_fleet/config/grammar.py);
    pvc: unused."""
    path: HostPath = "/mnt/local/kv-cache"
    """local-nvme: host directory (created if missing), strictly below `hostRoot`; absolute and
    normalised; pvc: unused."""
    size_gib: Annotated[int, Field(ge=16, le=1024 * 1024)] = 4096
    """Capacity per pod (PVC request, or the planning size of the NVMe directory)."""
    storage_class: DnsSubdomain | None = None
    """pvc: StorageClass of the claim."""
    read_threads: Annotated[int, Field(ge=1, le=128)] = 16
    """I/O threads reading blocks back (n_read_threads)."""
    write_threads: Annotated[int, Field(ge=1, le=128)] = 16
    """I/O threads writing blocks out (n_write_threads)."""


class KvTierConfig(_Model):
    """KV cache below HBM: a CPU DRAM tier per DP rank, an optional file-system tier, and
    peer-to-peer reuse of blocks that live on another worker."""

    cpu_offload: bool = True
    """Offload evicted KV blocks to host DRAM (vLLM OffloadingConnector) and reuse them."""
    host_memory_fraction: Annotated[float, Field(gt=0, le=0.95)] = 0.9
    """Share of the host memory left after every explicit reserve that becomes the CPU tier."""
    pinned_buffers_per_rank_gib: Annotated[int, Field(ge=0, le=1024)] = 4
    """Host memory per DP rank for registered NIXL/UCX transfer buffers and staging."""
    eviction_policy: Literal["lru", "arc"] = "lru"
    """Eviction policy of the CPU tier."""
    secondary: SecondaryKvTierConfig | None = None
    """Optional file-system tier (local NVMe or a PVC)."""
    peer_to_peer: bool = True
    """Pull prefix blocks from the worker that holds them instead of recomputing (vLLM's p2p
    tier, the sidecar's P2P pull and the router's P2P source producer)."""


class SimulatorConfig(_Model):
    """llm-d's inference simulator in place of vLLM (`serving.engine: simulator`): the timing it
    emulates and what a pod of it requests. Flag names are the simulator's (llm-d-inference-sim
    pkg/common/parser.go at the pinned tag, images/versions.toml; llmd_fleet/layers/serving/simulator.py
    builds the command line)."""

    mode: Literal["random", "echo"] = "random"
    """What the answers contain (`--mode`): `random` sentences, or `echo` the prompt back."""
    prefill_overhead_ms: Annotated[int, Field(ge=0, le=60_000)] = 20
    """Fixed part of a local prefill (`--prefill-overhead`)."""
    prefill_time_per_token_us: Annotated[int, Field(ge=0, le=1_000_000)] = 20
    """Prefill time per prompt token not found in the emulated prefix cache
    (`--prefill-time-per-token`); 20 us makes a 195k-token turn take about 4 s."""
    inter_token_latency_ms: Annotated[int, Field(ge=0, le=10_000)] = 20
    """Time between two generated tokens (`--inter-token-latency`)."""
    kv_cache_transfer_time_per_token_us: Annotated[int, Field(ge=0, le=1_000_000)] = 2
    """Decode's time to load one prefilled token's KV from the prefill pod, the emulated NIXL
    transfer of P/D (`--kv-cache-transfer-time-per-token`)."""
    time_factor_under_load: Annotated[float, Field(ge=1, le=100)] = 1.0
    """How much slower prefill and decode get when every sequence slot is busy
    (`--time-factor-under-load`; 1 keeps the timing flat)."""
    kv_cache_blocks: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 8192
    """Blocks of `blockSize` tokens each rank's emulated prefix cache holds (`--kv-cache-size`);
    the plan's KV room per rank, which sizes the router's prefix index as HBM does for vLLM."""
    cpu_millis_per_rank: Annotated[int, Field(ge=10, le=64_000)] = 250
    """CPU request and limit per data-parallel rank, in millicores (the simulator runs every rank
    of a pod in one process)."""
    memory_mib_per_rank: Annotated[int, Field(ge=32, le=65_536)] = 256
    """Memory request and limit per data-parallel rank, in MiB."""


CANARY_SUFFIX = "-canary"
"""A canary revision's serving name is the stable one's plus this (layers/serving/canary.py)."""


# How far minutes x 60 may sit from a whole second: float error only (0.1 x 60 = 6.000000000000001).
WHOLE_SECOND_TOLERANCE = 1e-6


def canary_name(serving: "ServingConfig") -> str:
    """The canary's serving name: its DisaggregatedSet, InferencePool and object name prefix."""
    return f"{serving.name}{CANARY_SUFFIX}"


class CanaryInstancesConfig(_Model):
    """Instances of each role the canary revision runs beside the stable ones."""

    prefill: Annotated[int, Field(ge=1, le=4096)] = 1
    """Prefill instances of the canary (each `roles.prefill.nodesPerInstance` nodes)."""
    decode: Annotated[int, Field(ge=1, le=4096)] = 1
    """Decode instances of the canary (each `roles.decode.nodesPerInstance` nodes)."""


class CanaryConfig(_Model):
    """A second revision of the whole model server beside the stable one: its own
    DisaggregatedSet `<name>-canary`, endpoint picker and InferencePool, with the same roles,
    parallelism and node groups, and `weight` percent of the HTTPRoute's requests
    (docs/day-two.md). A revision is the serving image tag and/or the model revision: the canary
    changes what is set here and keeps everything else of the stable revision. Removing the
    section rolls back; promotion sets the stable revision to the canary's (docs/day-two.md)."""

    weight: Annotated[int, Field(ge=0, le=100)]
    """Percent of the route's requests sent to the canary's InferencePool (0 to 100); the stable
    pool gets the rest. Both are `backendRefs` weights of the one HTTPRoute rule."""
    model_revision: GitRevision | None = None
    """`model.revision` of the canary (branch, tag or commit); the stable one's when unset."""
    image_tag: Annotated[str, Pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")] | None = None
    """Tag of the canary's engine image: a tag of the stable engine image's repository pinned in
    images/versions.toml (its entry's digest included), as every image a stack runs is; the
    stable image when unset. Not with `images.build` (a build has one tag)."""
    instances: CanaryInstancesConfig = Field(default_factory=CanaryInstancesConfig)
    """Instances of each role the canary runs; their nodes are the surge the plan shows and must
    be spare in the roles' node groups."""
    router_replicas: Annotated[int, Field(ge=1, le=10)] | None = None
    """Endpoint-picker replicas of the canary's own router; `router.replicas` when unset. 1 saves
    one replica's CPU and memory on the CPU nodes while the canary runs, at the price of no
    standby: while its one picker restarts, the canary's share is routed fail-open."""


class ServingConfig(_Model):
    """How the model is served."""

    name: Annotated[str, Pattern(DNS_LABEL), Field(max_length=24)] = "llmd"
    """Name of the DisaggregatedSet; pod names are derived from it."""
    namespace: ManagedNamespace = "llm-d"
    """Namespace of the serving objects."""
    model_load_minutes: Annotated[float, Field(gt=0, le=240)] = 45
    """Longest time a pod may take from start to serving (image pull excluded); the startup
    probe allows exactly this long. A whole number of seconds (0.25 = 15 s). At least 5 with
    engine vllm (a model load and compile take minutes); any with engine simulator, which loads
    nothing (the twin's process kubelet holds its pods unready this long)."""
    drain_seconds: Annotated[int, Field(ge=0, le=7200)] = 600
    """How long a pod being replaced or deleted keeps serving its in-flight requests after
    SIGTERM (vLLM `--shutdown-timeout`; 0 aborts them at once). The pod's grace period adds a
    margin for teardown. New requests stop at once: the endpoint picker drops terminating pods
    (llm-d-router pkg/epp/controller/pod_reconciler.go). Agent turns outlive the default 30 s
    grace, so a rollout without a drain aborts them mid-stream."""
    weight_loading: Literal["hub", "modelexpress"] = "hub"
    """Where pods load the weights from. `hub`: every pod downloads them from the model hub.
    `modelexpress`: pods that already serve the model send their weights GPU to GPU over the
    fabric (NIXL) to pods that start, coordinated by a ModelExpress server the stack deploys; a
    pod with no peer yet (a cold fleet) falls back to the hub. Needs `images.build` (the client is
    in the wide-EP image). The startup probe grows by the peer-transfer attempts the plan sizes
    (docs/llm-d-1.0.md)."""
    model_cache_gib: Annotated[int, Field(ge=16, le=65536)] = 1024
    """Node-local scratch per pod for the weights download and compile caches (an emptyDir
    with this size limit and the matching ephemeral-storage request)."""
    roles: RolesConfig
    """Prefill and decode roles."""
    kv_tier: KvTierConfig = Field(default_factory=KvTierConfig)
    """KV cache tiers below HBM."""
    autoscaling: AutoscalingConfig | None = None
    """Scale prefill and decode with KEDA (optional; absent: every role keeps `instances`)."""
    engine: Literal["vllm", "simulator"] = "vllm"
    """What runs in the serving pods: `vllm` (wide-EP vLLM on GPUs) or `simulator` (llm-d's
    inference simulator on CPU nodes, the same roles, ranks, ports and P/D layout; kind local
    only). Unset: `simulator` on kind local, `vllm` elsewhere."""
    simulator: SimulatorConfig = Field(default_factory=SimulatorConfig)
    """engine simulator: its emulated timing and pod size (SimulatorConfig's defaults when
    unset)."""
    preflight: PreflightConfig = Field(default_factory=PreflightConfig)
    """The fabric preflight Job that runs before the first serving rollout (docs/preflight.md)."""
    canary: CanaryConfig | None = None
    """A canary revision beside this one, taking `weight` percent of the requests (optional;
    absent: no canary, every request goes to this revision; docs/day-two.md)."""

    @field_validator("model_load_minutes")
    @classmethod
    def _whole_seconds(cls, value: float) -> float:
        # Probes, timeouts and cooldowns count whole seconds; a fraction that is none would be
        # rounded differently by each of them.
        if abs(value * 60 - round(value * 60)) > WHOLE_SECOND_TOLERANCE or round(value * 60) < 1:
            raise ValueError(
                f"must be a whole number of seconds, at least 1 s ({value:g} min = {value * 60:g} s; "
                "e.g. 0.25 = 15 s, 1.5 = 90 s)"
            )
        return value

    @property
    def model_load_seconds(self) -> int:
        """`model_load_minutes` in seconds: what the startup probe, VLLM_ENGINE_READY_TIMEOUT_S,
        the cooldown's default and the agentic API's upstream timeout count."""
        return round(self.model_load_minutes * 60)

    def max_instances(self, role_name: str) -> int:
        """Most instances role `role_name` can run: its autoscaling maximum when it autoscales,
        else its fixed `instances`."""
        role: RoleConfig = getattr(self.roles, role_name)
        scaling = self.autoscaling.role(role_name) if self.autoscaling is not None else None
        if scaling is None or not scaling.enabled:
            return role.instances
        return scaling.max_instances if scaling.max_instances is not None else role.instances
