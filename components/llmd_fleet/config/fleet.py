"""The typed stack configuration: one strict pydantic model per Pulumi config key.

A stack file (stacks/Pulumi.<stack>.yaml) sets these keys under the `llmd-fleet:` namespace:

    llmd-fleet:target    where the fleet runs (TargetConfig)
    llmd-fleet:fleet     the GPU node groups (FleetConfig)
    llmd-fleet:model     the served model and the architecture facts sizing needs (ModelConfig)
    llmd-fleet:serving   namespace, load budget and the prefill/decode roles (ServingConfig)
    llmd-fleet:router    endpoint picker mode, prefix routing, flow control (RouterConfig, optional)
    llmd-fleet:gateway   gateway implementation and listener (GatewayConfig, optional)
    llmd-fleet:images    build the wide-EP serving image or run the upstream one (ImagesConfig,
                         optional; llmd_fleet/images/spec.py)
    llmd-fleet:observability  where metrics are scraped from (ObservabilityConfig, optional)
    llmd-fleet:responses  the Responses API's agentic API and its PostgreSQL (ResponsesConfig,
                         optional; llmd_fleet/config/responses.py)
    llmd-fleet:hfToken   Hugging Face token, only as a Pulumi secret
    llmd-fleet:registryPassword  on-prem image registry password, only as a Pulumi secret
    llmd-fleet:kubeconfig  optional kubeconfig for the on-prem target, only as a Pulumi secret
    llmd-fleet:responsesDbPassword  the response store owner's password, only as a Pulumi secret

Every field is documented where it is declared; defaults live here and nowhere else. Field
names are camelCase in YAML (Pulumi's convention) and snake_case in Python.
"""

import ipaddress
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.eks import EksTargetConfig, eks_problems
from llmd_fleet.config.gke import GkeTargetConfig, gke_problems
from llmd_fleet.config.grammar import (
    CookieName,
    DnsLabel,
    DnsSubdomain,
    GitRevision,
    HfRepoId,
    HostPath,
    HttpHeaderName,
    Ipv4Cidr,
    Labels,
    ServedModelName,
    label_key_problem,
    one_of,
)
from llmd_fleet.config.images import ImagesConfig, TargetKind, images_config_problems
from llmd_fleet.config.responses import ResponsesConfig, password_problems, responses_problems
from llmd_fleet.config.vllm_registry import REASONING_PARSERS, TOOL_CALL_PARSERS
from llmd_fleet.conventions import DRANET_RDMA_CLASS
from llmd_fleet.versions import version_tuple, versions

PROJECT = "llmd-fleet"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ConfigError(Exception):
    """Invalid stack configuration: one message, one line per problem, each naming its key path."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = [f"{path}: {message}" for path, message in problems]
        super().__init__("invalid stack configuration:\n  " + "\n  ".join(lines))


def _resource_name(value: str) -> str:
    """An extended resource name (`domain/name`) has the grammar of a label key."""
    if problem := label_key_problem(value):
        raise ValueError(problem.replace("label key", "resource name"))
    return value


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class Accelerator(StrEnum):
    """GPU models the fleet sizes for, or `none` for the GPU-less nodes of kind local."""

    H100_80GB = "H100-80GB"
    NONE = "none"


# Usable HBM per GPU as the driver reports it (nvidia-smi: 81559 MiB on H100 SXM5 80GB).
HBM_MIB: dict[Accelerator, int] = {Accelerator.H100_80GB: 81559}


class OnPremTargetConfig(_Model):
    """An existing cluster's address ranges (kind onprem or local), which the stack cannot look
    up offline. Only the
    NetworkPolicies read them: the serving namespace may reach port 443 outside these ranges
    (the model hub), never a pod or a Service through that rule."""

    pod_cidr: Ipv4Cidr = "10.244.0.0/16"
    """The cluster's pod network (kube-controller-manager `--cluster-cidr`, the CNI's IP pool).
    The default is kubeadm's usual `--pod-network-cidr` (Flannel's default); set the cluster's
    own: Calico defaults to 192.168.0.0/16, Cilium's cluster pool to 10.0.0.0/8."""
    service_cidr: Ipv4Cidr = "10.96.0.0/12"
    """The cluster's Service range (kube-apiserver `--service-cluster-ip-range`); the default is
    kubeadm's."""


PlatformMode = Literal["install", "preinstalled"]


class TargetConfig(_Model):
    """Where the fleet runs."""

    kind: TargetKind
    """Target platform. `onprem`: an existing Kubernetes cluster reached through a kubeconfig.
    `gke`: a GKE Standard cluster with A3 Mega GPU pools, created by the stack (`gke` section).
    `eks`: an EKS cluster with p5.48xlarge GPU node groups on EFA, created by the stack (`eks`
    section). `local`: an existing kind cluster on a laptop, reached through the kubeconfig like
    onprem, with plain CPU nodes (no GPU drivers, no DRA claims) and `serving.engine: simulator`
    (docs/local-sim.md)."""
    kubernetes_version: Annotated[str, Field(pattern=r"^1\.\d+(\.\d+)?$")]
    """Kubernetes version of the cluster (e.g. "1.34.2"); manifests are validated against it."""
    kubeconfig_context: Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]{1,253}$")] | None = None
    """kubeconfig context to use; the kubeconfig's current context when unset."""
    platform: PlatformMode = "install"
    """Who installs the cluster-wide software the fleet runs on. `install`: the stack releases it
    (GPU Operator, NVIDIA DRA driver, DRANET, the LWS controller, the gateway's CRDs and
    controller, KEDA, the CloudNativePG operator, the router's and ModelExpress' CRD bundles),
    each at the version matrix's pin. `preinstalled`: the cluster already runs them (most on-prem
    clusters, a shared platform team's cluster, the twin) and the stack declares only its own
    objects; the NIC DeviceClass the stack names is still created. Kinds onprem and local only:
    a gke or eks cluster is created by the stack and has nothing installed (docs/deploy.md)."""
    gpu_driver: Literal["host", "gpu-operator"] = "host"
    """Where the NVIDIA driver comes from: preinstalled on the hosts (DGX OS, driver root /) or
    the GPU Operator's driver container (/run/nvidia/driver). Must stay `host` (unused) on kind
    local, whose nodes have no GPUs."""
    gke: GkeTargetConfig | None = None
    """kind gke: project, location, networks and node-pool capacity (llmd_fleet/config/gke.py)."""
    eks: EksTargetConfig | None = None
    """kind eks: region and zones, VPC, API access, system nodes and GPU capacity (Capacity
    Blocks or an ODCR) per fleet node group (llmd_fleet/config/eks.py)."""
    onprem: OnPremTargetConfig | None = None
    """kind onprem or local: the cluster's pod and Service ranges (OnPremTargetConfig's defaults
    when unset; a kind cluster's own defaults are 10.244.0.0/16 and 10.96.0.0/16)."""

    @property
    def installs_platform(self) -> bool:
        """Whether the stack releases the third-party cluster software (`platform: install`)."""
        return self.platform == "install"


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
    (docs/observability.md). Unset: the target's NIC, `NIC_GBPS_BY_TARGET` (onprem 400, a
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


class WeightDtype(StrEnum):
    """Checkpoint weight formats and their bytes per parameter."""

    FP8 = "fp8"
    BF16 = "bf16"

    @property
    def bytes_per_param(self) -> int:
        return {"fp8": 1, "bf16": 2}[self.value]


class ModelConfig(_Model):
    """The served model: where to get it and the architecture facts that size the roles."""

    id: HfRepoId
    """Hugging Face repository id, e.g. `zai-org/GLM-5.2-FP8`."""
    revision: GitRevision
    """Branch, tag or 40-hex commit id to load; pin a commit for production."""
    served_name: ServedModelName | None = None
    """Model name clients send; the repository id when unset."""
    total_params_b: Annotated[float, Field(gt=0, le=100000)]
    """Total parameters, in billions."""
    active_params_b: Annotated[float, Field(gt=0, le=100000)]
    """Parameters active per token, in billions (informational; shown in the plan)."""
    routed_expert_params_b: Annotated[float, Field(ge=0, le=100000)]
    """Parameters in routed experts, in billions: sharded across EP ranks. The rest (attention,
    shared experts, dense MLPs, embeddings) is replicated on every data-parallel rank."""
    layers: Annotated[int, Field(ge=1, le=1024)]
    """Transformer layers."""
    experts: Annotated[int, Field(ge=1, le=4096)]
    """Routed experts per MoE layer; the expert-parallel size must divide it."""
    experts_per_token: Annotated[int, Field(ge=1, le=256)]
    """Routed experts each token activates."""
    weight_dtype: Annotated[WeightDtype, Field(strict=False)]
    """Weight format of the checkpoint."""
    kv_cache_dtype: Literal["fp8", "auto"] = "fp8"
    """vLLM --kv-cache-dtype; `kvBytesPerToken` must be given for this dtype."""
    kv_bytes_per_token: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """KV-cache bytes one token occupies on a rank, all layers included, in `kvCacheDtype`."""
    max_context_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    """Longest context the model supports (config.json max_position_embeddings)."""
    tool_call_parser: Annotated[str, one_of(TOOL_CALL_PARSERS, "tool-call parser")] | None = None
    """vLLM --tool-call-parser (a name the pinned vLLM registers, llmd_fleet/config/vllm_registry.py);
    enables auto tool choice when set."""
    reasoning_parser: Annotated[str, one_of(REASONING_PARSERS, "reasoning parser")] | None = None
    """vLLM --reasoning-parser (a name the pinned vLLM registers)."""
    trust_remote_code: bool = False
    """Pass --trust-remote-code to vLLM."""


All2AllBackend = Literal[
    "deepep_high_throughput", "deepep_low_latency", "deepep_v2", "allgather_reducescatter", "naive"
]


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
    path: HostPath = "/mnt/local/kv-cache"
    """local-nvme: host directory (created if missing); absolute, normalised, at least two levels
    deep and outside system and kubelet paths (llmd_fleet/config/grammar.py); pvc: unused."""
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


KedaMode = Literal["install", "preinstalled"]


class _RoleAutoscalingConfig(_Model):
    """What both roles' autoscaling shares: bounds, polling and the scale-down cooldown."""

    enabled: bool = False
    """Scale this role with KEDA: its DisaggregatedSet role switches to `scaling.mode: External`
    and a ScaledObject drives its DisaggregatedSetRoleScaler `<serving.name>-<role>`. Off by
    default: the role keeps `instances` (the reference stacks are a fixed fleet)."""
    min_instances: Annotated[int, Field(ge=1, le=4096)] = 1
    """Fewest instances the autoscaler keeps (KEDA minReplicaCount). At least 1: a role at zero
    needs a whole model load (`serving.modelLoadMinutes`) before it serves again."""
    max_instances: Annotated[int, Field(ge=1, le=4096)] | None = None
    """Most instances the autoscaler may run (KEDA maxReplicaCount); the role's `instances` when
    unset. Every role's maximum, plus a rolling update's surge, must fit its node group, and the
    policy pack holds it to the GPU budget (`autoscaling-within-gpu-budget`)."""
    polling_interval_seconds: Annotated[int, Field(ge=5, le=600)] = 30
    """How often KEDA evaluates the trigger (ScaledObject pollingInterval; KEDA's default 30)."""
    cooldown_seconds: Annotated[int, Field(ge=60, le=3600)] | None = None
    """How long the demand must stay low before an instance is removed: the HPA scale-down
    stabilization window (and KEDA's cooldownPeriod). Must be longer than the model load time,
    or a burst that returns soon after pays a full load again; at most 3600, the Kubernetes
    bound of a stabilization window. Unset: modelLoadMinutes x 60 + 300, capped at 3600."""


class PrefillAutoscalingConfig(_RoleAutoscalingConfig):
    """Prefill scales on its backlog: the prompt tokens the endpoint picker has in flight on
    prefill endpoints, in seconds of prefill work (docs/autoscaling.md)."""

    target_backlog_seconds: Annotated[float, Field(gt=0, le=3600)] = 30
    """Seconds of queued prefill work per instance the autoscaler aims at (the trigger's
    threshold): in-flight prompt tokens / (instances x prefillTokensPerSecond)."""
    prefill_tokens_per_second: Annotated[int, Field(ge=1, le=100_000_000)] | None = None
    """Uncached prompt tokens one prefill instance computes per second at full load, which turns
    in-flight tokens into seconds of backlog. No default, required when `enabled`: it depends on
    the model, the parallelism and the prompt mix, so measure it on the fleet
    (`sum(rate(vllm:prompt_tokens_total{role="prefill"}[5m]))` divided by the instances, at
    saturation)."""


class DecodeAutoscalingConfig(_RoleAutoscalingConfig):
    """Decode scales on KV-cache usage: long agent contexts fill HBM before compute saturates."""

    target_kv_cache_utilization: Annotated[float, Field(gt=0, le=1)] = 0.8
    """Average KV-cache usage (vLLM `vllm:kv_cache_usage_perc`, 0..1) per instance the autoscaler
    aims at (the trigger's threshold). Below 1 so that instances are added before the cache
    preempts (the fleet's SLO is zero preemptions)."""


class AutoscalingConfig(_Model):
    """Per-role autoscaling with KEDA over the DisaggregatedSet's role scalers
    (llmd_fleet/serving/autoscaling.py, docs/autoscaling.md)."""

    keda: KedaMode = "install"
    """`install`: the stack installs KEDA (chart pinned in images/versions.toml) into
    `kedaNamespace`, with NetworkPolicies that admit only its flows; `preinstalled`: the cluster
    already runs KEDA 2.x with the ScaledObject CRD (nothing is installed). Unset under
    `target.platform: preinstalled`, it is preinstalled."""
    keda_namespace: DnsLabel = "keda"
    """Namespace of the KEDA operator and its metrics adapter."""
    prometheus_address: Annotated[str, Field(pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")] | None = (
        None
    )
    """Prometheus query API the triggers read. Unset: the `prometheus-operated` Service of
    `observability.namespace` (the Service prometheus-operator creates for its Prometheus
    servers, port 9090), which needs `observability.prometheus` operator or install."""
    prefill: PrefillAutoscalingConfig = Field(default_factory=PrefillAutoscalingConfig)
    """Prefill's autoscaling (off by default)."""
    decode: DecodeAutoscalingConfig = Field(default_factory=DecodeAutoscalingConfig)
    """Decode's autoscaling (off by default)."""

    def role(self, name: str) -> _RoleAutoscalingConfig:
        """The autoscaling settings of role `name` (prefill or decode)."""
        role: _RoleAutoscalingConfig = getattr(self, name)
        return role


class SimulatorConfig(_Model):
    """llm-d's inference simulator in place of vLLM (`serving.engine: simulator`): the timing it
    emulates and what a pod of it requests. Flag names are the simulator's (llm-d-inference-sim
    pkg/common/parser.go at the pinned tag, images/versions.toml; llmd_fleet/serving/simulator.py
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


class PreflightConfig(_Model):
    """The fabric preflight: a Job of two pods, on two GPU nodes of the serving node group with
    the serving pods' DRA claim, that moves data between them over the fleet's NIXL backend,
    checks every byte and fails below `minEfficiency` x the group's `nicGbps`. The
    DisaggregatedSet waits for it on the first deploy (docs/preflight.md)."""

    enabled: bool = True
    """Render the preflight Job (and its ConfigMap, headless Service and NetworkPolicy). Unset:
    true, except with `serving.engine: simulator`, which has no fabric to probe (false there; true
    is refused)."""
    min_efficiency: Annotated[float, Field(ge=0.05, le=1.0)] = 0.4
    """Fraction of one fabric NIC's line rate (the node group's `nicGbps`) each direction must
    reach; below it the Job fails and serving is not created."""
    transfer_mib: Annotated[int, Field(ge=16, le=8192)] = 1024
    """Bytes moved per transfer, in MiB (host memory registered on each side; the pods' memory
    limit is sized from it)."""
    iterations: Annotated[int, Field(ge=1, le=100)] = 8
    """Timed transfers per direction (READ, then WRITE), after one untimed warm-up each."""
    deadline_minutes: Annotated[int, Field(ge=5, le=240)] = 60
    """The Job's activeDeadlineSeconds, in minutes: image pull, scheduling and the probe itself.
    Pulumi waits as long (`pulumi.com/timeoutSeconds`)."""
    gate_serving: bool = True
    """The DisaggregatedSet depends on the Job, so `pulumi up` creates serving only after the
    probe passed. false: nothing waits for the Job (`pulumi.com/skipAwait`), e.g. to re-run it
    on a fleet that is already serving."""


class ServingConfig(_Model):
    """How the model is served."""

    name: Annotated[str, Field(pattern=_DNS_LABEL, max_length=24)] = "llmd"
    """Name of the DisaggregatedSet; pod names are derived from it."""
    namespace: Annotated[str, Field(pattern=_DNS_LABEL, max_length=63)] = "llm-d"
    """Namespace of the serving objects."""
    model_load_minutes: Annotated[int, Field(ge=5, le=240)] = 45
    """Longest time a pod may take from start to serving (image pull excluded); the startup
    probe allows exactly this long."""
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


class PriorityClassConfig(_Model):
    """A traffic class: an InferenceObjective clients select with `x-llm-d-inference-objective`."""

    name: Annotated[str, Field(pattern=_DNS_LABEL, max_length=63)]
    """InferenceObjective name (the header value clients send)."""
    priority: Annotated[int, Field(ge=-1000, le=1000)]
    """Flow-control priority band: higher is served first; negative is sheddable under saturation."""
    max_requests: Annotated[int, Field(ge=1, le=1_000_000)]
    """Most requests this band may queue in the router before new ones are rejected."""


def _default_priority_classes() -> list["PriorityClassConfig"]:
    # Interactive main-agent turns first, their sub-agent bursts next, batch last and sheddable.
    return [
        PriorityClassConfig(name="agent-interactive", priority=100, max_requests=4000),
        PriorityClassConfig(name="agent-subagent", priority=50, max_requests=8000),
        PriorityClassConfig(name="batch", priority=-10, max_requests=2000),
    ]


class SessionAffinityConfig(_Model):
    """Keep a multi-turn agent on the decode endpoint that holds its KV: the
    session-affinity-scorer (`session_id` strategy) keyed by the first of `header`, `cookie` and
    the coding agent's own session header that a request carries (docs/llm-d-1.0.md)."""

    enabled: bool = True
    """Score endpoints by the request's session key (session-affinity-scorer, `session_id` strategy)."""
    header: HttpHeaderName = "x-session-id"
    """Request header carrying a client-chosen session id; the first source of the key."""
    cookie: CookieName | None = None
    """Cookie carrying the session id (read by the router's session-id-producer), tried after
    `header`. Unset by default: no cookie source."""
    agent_identity: bool = True
    """Also key sessions by the coding agent's own session header (the router's agent-identity
    plugin: `x-claude-code-session-id`, `x-session-affinity`, `session-id`, `session_id`), tried
    after `header` and `cookie`. The same identity names the agent's flow for program-aware
    fairness."""
    agent_headers: Annotated[list[HttpHeaderName], Field(max_length=8)] = Field(default_factory=list)
    """Extra agent session headers the agent-identity plugin checks before its built-in ones
    (`additionalSessionHeaders`); none by default, at most 8."""
    token_header: HttpHeaderName | None = "x-session-token"
    """Response header that returns the session token (the serving endpoint, encoded) to the
    client, which echoes it on its next turn: a second session-affinity-scorer with the
    `encoded_endpoint_header` strategy. It needs no router state, so it also survives an EPP
    failover. Default `x-session-token`; unset: nothing is returned."""
    ttl_seconds: Annotated[int, Field(ge=10, le=86400)] = 1800
    """How long a session is remembered after its last request (agents pause in tool calls)."""


class TracingConfig(_Model):
    """OpenTelemetry export of the endpoint picker's traces (the OTEL_* variables of its SDK)."""

    otlp_endpoint: Annotated[str, Field(pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")]
    """OTLP gRPC collector, e.g. `http://otel-collector.monitoring.svc:4317`."""
    sampling_ratio: Annotated[float, Field(ge=0, le=1)] = 0.01
    """Fraction of traces kept (parent-based trace-id ratio sampler)."""


class RouterConfig(_Model):
    """The llm-d endpoint picker (EPP) in front of the serving pods."""

    replicas: Annotated[int, Field(ge=1, le=10)] = 2
    """EPP replicas; 2 or more for high availability."""
    mode: Literal["active-passive", "active-active"] = "active-passive"
    """`active-passive`: leader election, one replica routes and the other is a hot standby.
    `active-active`: every replica routes; only valid with precise prefix routing, where each
    replica builds the same index from the engines' KV events."""
    prefix_routing: Literal["precise", "approximate"] = "precise"
    """`precise`: route by the KV blocks engines report over ZMQ; `approximate`: by the router's
    own guess of what each engine cached."""
    non_cached_tokens_for_remote_prefill: Annotated[int, Field(ge=0, le=16 * 1024 * 1024)] = 2048
    """Run prefill on a prefill instance only when at least this many prompt tokens are not
    already cached on the chosen decode endpoint; smaller remainders are prefilled locally."""
    session_affinity: SessionAffinityConfig = Field(default_factory=SessionAffinityConfig)
    """Session affinity for multi-turn agents."""
    flow_control: bool = True
    """Queue and prioritise requests in the router (the `flowControl` feature gate)."""
    fairness: Literal["program-aware", "round-robin", "strict"] = "program-aware"
    """Fairness between flows inside a priority band. A flow is the `x-llm-d-inference-fairness-id`
    header, else the agent identity (with `sessionAffinity.agentIdentity`), so each agent program
    is a flow. `program-aware`: the router's program-aware-fairness policy (least attained
    service in weighted tokens, idle programs decay); `round-robin`; `strict`: global strict."""
    probabilistic_admission: bool = True
    """Shed sheddable (negative-priority) requests before scheduling with a probability that rises
    steeply with the pool's saturation (the router's probabilistic-admitter), with the same
    queue-depth and KV-utilisation thresholds as flow control's saturation detector; non-negative
    priorities are always admitted. Needs a negative-priority class."""
    priority_classes: Annotated[list[PriorityClassConfig], Field(min_length=1)] = Field(
        default_factory=_default_priority_classes
    )
    """Priority bands and the InferenceObjectives that select them."""
    expected_requests_per_second: Annotated[float, Field(gt=0, le=400)] = 50
    """Peak request rate the router must sustain; sizes its CPU (about 0.5 core per req/s, so the
    bound keeps one replica within the largest CPU nodes) and its memory."""
    expected_prompt_tokens: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 195_000
    """Typical (median) prompt length in tokens; sizes the router's memory and the flow-control
    byte bounds (the reference agentic traffic: ~195k input tokens per turn)."""
    memory_gib: Annotated[int, Field(ge=2, le=1024)] | None = None
    """Memory per EPP replica. Unset: derived by the plan from the request rate, the prompt size
    and the flow-control queue bound (`llmd-fleet plan` shows it); an explicit value below the
    derived one is refused."""
    tracing: TracingConfig | None = None
    """Export the EPP's traces over OTLP; unset turns tracing off (`--tracing=false`), since the
    EPP traces by default and with no collector every span is wasted work."""


class GatewayConfig(_Model):
    """The Gateway API layer in front of the router."""

    implementation: Literal["agentgateway", "istio", "gke-l7-rilb"] = "agentgateway"
    """Gateway implementation: agentgateway or istio, installed by the stack, or `gke-l7-rilb`,
    GKE's managed regional internal Application Load Balancer (gke only; its default there)."""
    listener_port: Annotated[int, Field(ge=1, le=65535)] = 80
    """HTTP listener port of the Gateway."""
    request_timeout_seconds: Annotated[int, Field(ge=30, le=7200)] = 1800
    """Request timeout, long enough for a 200k-token prefill plus a long stream: the HTTPRoute's
    `timeouts.request`, or on GKE's managed gateway (which does not implement route timeouts) the
    GCPBackendPolicy `timeoutSec` of the InferencePool's backend service."""


# Line rate of one GPU-fabric NIC per target, in Gb/s: ConnectX-7 (400 GbE / NDR) on-prem; A3 Mega
# has 8 GPU NICs for 1,600 Gb/s; p5.48xlarge has 32 EFA for 3,200 Gb/s (shared/reference/cluster.md).
# kind local has no GPU fabric: its nominal 10 Gb/s only fills the field (no KV moves over NIXL).
NIC_GBPS_BY_TARGET: dict[str, int] = {"onprem": 400, "gke": 200, "eks": 100, "local": 10}

PrometheusMode = Literal["operator", "gmp", "install", "none"]
# Who scrapes the fleet when `observability.prometheus` is unset: GKE's managed collection
# (Managed Service for Prometheus) is on by default there; a laptop's kind cluster has no
# prometheus-operator, so nothing is scraped there unless asked; elsewhere a prometheus-operator.
PROMETHEUS_BY_TARGET: dict[str, PrometheusMode] = {
    "onprem": "operator",
    "gke": "gmp",
    "eks": "operator",
    "local": "none",
}
# GKE Standard runs the managed collectors in this namespace (Managed Service for Prometheus).
GMP_NAMESPACE = "gmp-system"


class ObservabilityConfig(_Model):
    """Where the fleet's metrics are scraped from, and the monitoring objects the stack renders
    (llmd_fleet/observability/monitoring.py, docs/observability.md)."""

    namespace: DnsLabel = "monitoring"
    """Namespace of the metrics scrapers (Prometheus, an OpenTelemetry collector, GKE's
    `gmp-system`). The NetworkPolicies admit it, and only it, to the engines' API ports, the
    endpoint picker's metrics port, the tokenizer and the gateway proxies' metrics port. Default
    `monitoring`; `gmp-system` when `prometheus` is `gmp`. With `install`, kube-prometheus-stack
    goes here."""
    prometheus: PrometheusMode | None = None
    """Who scrapes the fleet and evaluates its alerts. `operator`: an existing prometheus-operator
    (PodMonitors, a ServiceMonitor, a PrometheusRule); `gmp`: Google Cloud Managed Service for
    Prometheus (PodMonitorings, Rules; gke only); `install`: the stack installs
    kube-prometheus-stack (chart pinned in images/versions.toml) into `namespace`, plus the
    operator objects; `none`: no scrape or rule objects. Unset: `gmp` on gke, `operator`
    elsewhere (`PROMETHEUS_BY_TARGET`)."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300)] = 15
    """Scrape interval of every monitor; rate windows in alerts and dashboards are at least four
    of these."""
    monitor_labels: Labels = Field(default_factory=dict)
    """Labels added to every monitor and rule object, so that an existing Prometheus's selectors
    pick them up (kube-prometheus-stack selects `release: <its release name>` by default). None
    by default; with `install` the installed Prometheus selects every monitor and rule."""
    dashboards: bool = True
    """Render the fleet's Grafana dashboards as ConfigMaps for Grafana's dashboard sidecar
    (label `grafana_dashboard: "1"`, in the serving namespace)."""


class StackConfig(_Model):
    """The whole stack configuration."""

    target: TargetConfig
    """`llmd-fleet:target`."""
    fleet: FleetConfig
    """`llmd-fleet:fleet`."""
    model: ModelConfig
    """`llmd-fleet:model`."""
    serving: ServingConfig
    """`llmd-fleet:serving`."""
    router: RouterConfig = Field(default_factory=RouterConfig)
    """`llmd-fleet:router` (optional)."""
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    """`llmd-fleet:gateway` (optional)."""
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    """`llmd-fleet:images` (optional): the serving image (llmd_fleet/images/spec.py)."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """`llmd-fleet:observability` (optional): where metrics are scraped from."""
    responses: ResponsesConfig | None = None
    """`llmd-fleet:responses` (optional; absent: off): the agentic API and its PostgreSQL
    (llmd_fleet/config/responses.py)."""
    has_hf_token: bool = False
    """Whether `llmd-fleet:hfToken` is set (as a secret); the value itself is never held here."""
    has_registry_password: bool = False
    """Whether `llmd-fleet:registryPassword` is set (as a secret)."""
    has_responses_db_password: bool = False
    """Whether `llmd-fleet:responsesDbPassword` is set (as a secret)."""


# The config keys, in the order errors are reported.
_OBJECT_KEYS: dict[str, type[_Model]] = {
    "target": TargetConfig,
    "fleet": FleetConfig,
    "model": ModelConfig,
    "serving": ServingConfig,
}
# Optional keys: their models default every field.
_OPTIONAL_OBJECT_KEYS: dict[str, type[ConfigModel]] = {
    "router": RouterConfig,
    "gateway": GatewayConfig,
    "images": ImagesConfig,
    "observability": ObservabilityConfig,
    "responses": ResponsesConfig,
}
SECRET_KEYS = ("hfToken", "kubeconfig", "registryPassword", "responsesDbPassword")
KNOWN_KEYS = frozenset(_OBJECT_KEYS) | frozenset(_OPTIONAL_OBJECT_KEYS) | frozenset(SECRET_KEYS)


# The unit of each number, by how its key ends (checked for every numeric field by a test).
_UNIT_SUFFIXES = (
    ("GiB", "GiB"),
    ("MiB", "MiB"),
    ("Efficiency", "fraction of the NIC line rate"),
    ("Gb", "GB"),
    ("Seconds", "seconds"),
    ("Days", "days"),
    ("Minutes", "minutes"),
    ("ParamsB", "billion parameters"),
    ("PerSecond", "requests per second"),
    ("PerToken", "bytes per token"),
    ("Tokens", "tokens"),
    ("Len", "tokens"),
    ("Cpus", "CPUs"),
    ("Parallel", "ranks"),
    ("Threads", "threads"),
    ("Utilization", "fraction of HBM"),
    ("Fraction", "fraction"),
    ("Mtu", "bytes"),
    ("Port", "port number"),
    ("Ms", "milliseconds"),
    ("Us", "microseconds"),
    ("Blocks", "blocks"),
)
_UNIT_NAMES = {
    "count": "nodes",
    "instances": "instances",
    "nodesPerInstance": "nodes",
    "layers": "layers",
    "experts": "experts",
    "expertsPerToken": "experts",
    "maxNumSeqs": "sequences",
    "replicas": "replicas",
    "maxRequests": "requests",
    "priority": "(priority band)",
    "cpusPerNode": "CPUs",
    "cpus": "CPUs",
    "nicsPerNode": "NICs",
    "cpusPerRank": "CPUs per data-parallel rank",
    "rdmaResourcePerPod": "resource units per pod",
    "nonCachedTokensForRemotePrefill": "tokens",
    "expectedPromptTokens": "tokens",
    "samplingRatio": "fraction of traces",
    "nodeCount": "nodes",
    "iterations": "transfers",
    "maxPodsPerNode": "pods",
    "localSsdCount": "disks",
    "nvshmemHeapGiB": "GiB",
    "nicGbps": "Gb/s",
    "minInstances": "instances",
    "maxInstances": "instances",
    "prefillTokensPerSecond": "tokens per second",
    "targetKvCacheUtilization": "fraction of the KV cache",
    "cpuMillisPerRank": "millicores per data-parallel rank",
    "memoryMiBPerRank": "MiB per data-parallel rank",
    "timeFactorUnderLoad": "(slowdown factor)",
}


def unit_of(key: str) -> str:
    """The unit a numeric config key is in, for error messages ('' when none is known)."""
    if key in _UNIT_NAMES:
        return _UNIT_NAMES[key]
    for suffix, unit in _UNIT_SUFFIXES:
        if key.endswith(suffix):
            return unit
    return ""


_BOUNDS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}


def _describe(error: Mapping[str, Any], loc: tuple[Any, ...] = ()) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    got = error.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')} (got {got!r})"
    if kind == "value_error":
        return f"{ctx.get('error')} (got {got!r})"
    if kind == "finite_number":
        return f"must be a finite number, not infinity or NaN (got {got!r})"
    if kind in _BOUNDS:
        (bound,) = (v for k, v in ctx.items() if k in ("gt", "ge", "lt", "le"))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        names = [item for item in loc if isinstance(item, str)]
        unit = unit_of(names[-1]) if names else ""
        return f"must be {_BOUNDS[kind]} {bound}{f' {unit}' if unit else ''} (got {got!r})"
    return f"{error['msg']} (got {got!r})"


def _path(key: str, loc: tuple[Any, ...]) -> str:
    parts = [f"{PROJECT}:{key}"]
    for item in loc:
        if isinstance(item, int):
            parts[-1] += f"[{item}]"
        elif item not in {"str", "int", "float", "bool"}:
            parts.append(str(item))
    return ".".join(parts)


def parse_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset()) -> StackConfig:
    """Validate raw config values (key without namespace -> parsed YAML/JSON value).

    `secret_keys` names the keys that were set as Pulumi secrets. Raises ConfigError naming every
    offending key path; never returns a half-valid config.
    """
    problems: list[tuple[str, str]] = []
    for key in sorted(set(raw) - KNOWN_KEYS):
        allowed = ", ".join(sorted(KNOWN_KEYS))
        problems.append((f"{PROJECT}:{key}", f"unknown key (allowed: {allowed})"))
    for key in SECRET_KEYS:
        if key in raw and key not in secret_keys:
            problems.append(
                (f"{PROJECT}:{key}", f"must be a secret: pulumi config set --secret {key} <value>")
            )
    parts: dict[str, Any] = {}
    for key, model in _OBJECT_KEYS.items():
        if key not in raw:
            problems.append((f"{PROJECT}:{key}", "required"))
            continue
        try:
            parts[key] = model.model_validate(raw[key])
        except ValidationError as exc:
            for err in exc.errors():
                problems.append((_path(key, tuple(err["loc"])), _describe(err, tuple(err["loc"]))))
    for key, optional_model in _OPTIONAL_OBJECT_KEYS.items():
        if key not in raw:
            continue
        try:
            parts[key] = optional_model.model_validate(raw[key])
        except ValidationError as exc:
            for err in exc.errors():
                problems.append((_path(key, tuple(err["loc"])), _describe(err, tuple(err["loc"]))))
    if problems:
        raise ConfigError(problems)
    config = StackConfig(
        **parts,
        has_hf_token="hfToken" in raw,
        has_registry_password="registryPassword" in raw,
        has_responses_db_password="responsesDbPassword" in raw,
    )
    if config.target.kind == "gke" and "implementation" not in config.gateway.model_fields_set:
        # GKE's managed gateway is the default there; an explicit choice is kept.
        gateway = config.gateway.model_copy(update={"implementation": "gke-l7-rilb"})
        config = config.model_copy(update={"gateway": gateway})
    if config.target.kind == "local" and "engine" not in config.serving.model_fields_set:
        # kind local has no GPUs: the simulator is its engine unless one is named (and refused).
        serving = config.serving.model_copy(update={"engine": "simulator"})
        config = config.model_copy(update={"serving": serving})
    if config.serving.engine == "simulator" and "enabled" not in config.serving.preflight.model_fields_set:
        # The simulator moves no KV over a fabric: nothing for the preflight to prove.
        preflight = config.serving.preflight.model_copy(update={"enabled": False})
        serving = config.serving.model_copy(update={"preflight": preflight})
        config = config.model_copy(update={"serving": serving})
    config = _target_observability_defaults(config)
    problems = _semantic_problems(config)
    if problems:
        raise ConfigError(problems)
    return config


def _target_observability_defaults(config: StackConfig) -> StackConfig:
    """Fill the per-target defaults of the observability keys (an explicit value is kept): each
    node group's NIC line rate, who scrapes, and the scrapers' namespace under GKE's managed
    collection."""
    kind = config.target.kind
    groups = {
        name: group.model_copy(update={"nic_gbps": NIC_GBPS_BY_TARGET[kind]})
        if group.nic_gbps is None
        else group
        for name, group in config.fleet.node_groups.items()
    }
    observability = config.observability
    if observability.prometheus is None:
        observability = observability.model_copy(update={"prometheus": PROMETHEUS_BY_TARGET[kind]})
    if observability.prometheus == "gmp" and "namespace" not in config.observability.model_fields_set:
        observability = observability.model_copy(update={"namespace": GMP_NAMESPACE})
    fleet = config.fleet.model_copy(update={"node_groups": groups})
    return config.model_copy(update={"fleet": fleet, "observability": observability})


def _managed_cluster_problems(
    target: TargetConfig, kind: str, pinned_version: str, driver_source: str
) -> list[tuple[str, str]]:
    """What a target whose cluster the stack creates (gke, eks) fixes itself: the control-plane
    minor pinned in the version matrix, the host GPU driver and the kubeconfig."""
    path = f"{PROJECT}:target"
    problems = []
    if version_tuple(target.kubernetes_version)[:2] != version_tuple(pinned_version)[:2]:
        problems.append(
            (
                f"{path}.kubernetesVersion",
                f"must be the minor the {kind.upper()} cluster is created at ({pinned_version}) "
                f"(got {target.kubernetes_version!r})",
            )
        )
    if target.gpu_driver != "host":
        problems.append((f"{path}.gpuDriver", f"must be host on {kind}: {driver_source}"))
    if target.kubeconfig_context is not None:
        problems.append((f"{path}.kubeconfigContext", f"not used on {kind}: the stack builds the kubeconfig"))
    if target.platform != "install":
        problems.append(
            (
                f"{path}.platform",
                f"must be install on {kind}: the stack creates the cluster, so nothing is preinstalled "
                "(preinstalled is for kind onprem or local)",
            )
        )
    return problems


def _gke_target_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The gke section is there exactly when kind is gke, and fits the fleet it carries."""
    target, path = config.target, f"{PROJECT}:target"
    if target.kind != "gke":
        problems = [(f"{path}.gke", "only for kind gke")] if target.gke is not None else []
        if config.gateway.implementation == "gke-l7-rilb":
            problems.append((f"{PROJECT}:gateway.implementation", "gke-l7-rilb exists only on kind gke"))
        return problems
    if target.gke is None:
        return [(f"{path}.gke", "required for kind gke")]
    problems = _managed_cluster_problems(
        target, "gke", versions().kubernetes.gke, "the stack installs the COS driver DaemonSet"
    )
    for name, group in config.fleet.node_groups.items():
        if group.accelerator_allocation == "dra" and group.nic_device_class is not None:
            problems.append(
                (
                    f"{PROJECT}:fleet.nodeGroups.{name}.nicDeviceClass",
                    "must be null on gke: A3 Mega TCPXO NICs reach pods through GKE multi-networking, "
                    "not DRA (the claim holds GPUs only)",
                )
            )
    groups: dict[str, tuple[int, int]] = {
        name: (g.gpus_per_node, g.nics_per_node) for name, g in config.fleet.node_groups.items()
    }
    problems += gke_problems(target.gke, groups, f"{path}.gke")
    return problems


def _eks_target_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The eks section is there exactly when kind is eks, and fits the fleet it carries."""
    target, path = config.target, f"{PROJECT}:target"
    if target.kind != "eks":
        return [(f"{path}.eks", "only for kind eks")] if target.eks is not None else []
    if target.eks is None:
        return [(f"{path}.eks", "required for kind eks")]
    problems = _managed_cluster_problems(
        target, "eks", versions().kubernetes.eks, "the AL2023 NVIDIA AMI carries the driver"
    )
    problems += eks_problems(
        target.eks, config.fleet.node_groups, f"{path}.eks", f"{PROJECT}:fleet.nodeGroups"
    )
    return problems


def _onprem_target_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The onprem section belongs to kind onprem, and its two ranges are distinct networks."""
    target, path = config.target, f"{PROJECT}:target.onprem"
    if target.onprem is None:
        return []
    if target.kind not in ("onprem", "local"):
        return [(path, "only for kind onprem or local")]
    pods, services = (ipaddress.IPv4Network(c) for c in (target.onprem.pod_cidr, target.onprem.service_cidr))
    if pods.overlaps(services):
        return [(f"{path}.serviceCidr", f"must not overlap podCidr {pods} (got {services})")]
    return []


# The simulator's data-parallel ranks per process (llm-d-inference-sim v0.10.2
# pkg/common/config.go validate: "data parallel size must be between 1 and 8") and the block
# sizes its prefix cache accepts ("token block size should be one of ... 8, 16, 32, 64, 128").
SIMULATOR_MAX_RANKS = 8
SIMULATOR_BLOCK_SIZES = (8, 16, 32, 64, 128)
# The old single-field bounds of a GPU node, now a rule for GPU nodes only (kind nodes are small).
GPU_NODE_MIN_CPUS = 16
GPU_NODE_MIN_MEMORY_GIB = 64


def _local_node_group_problems(name: str, group: NodeGroupConfig) -> list[tuple[str, str]]:
    """A node group of kind local: plain CPU nodes, no GPU, no accelerator mechanism."""
    path = f"{PROJECT}:fleet.nodeGroups.{name}"
    why = "kind local nodes have no GPUs"
    problems: list[tuple[str, str]] = []
    if group.accelerator != Accelerator.NONE:
        problems.append((f"{path}.accelerator", f"must be none on kind local: {why}"))
    if group.gpus_per_node != 0:
        problems.append((f"{path}.gpusPerNode", f"must be 0 on kind local: {why}"))
    if group.accelerator_allocation != "none":
        problems.append(
            (
                f"{path}.acceleratorAllocation",
                f"must be none on kind local: {why}, so a DRA GPU claim or an nvidia.com/gpu limit "
                "would keep every serving pod Pending",
            )
        )
    if group.nic_device_class is not None:
        problems.append((f"{path}.nicDeviceClass", "must be null on kind local: no DRA claim carries NICs"))
    if group.rdma_resource is not None:
        problems.append((f"{path}.rdmaResource", "not used on kind local: there is no RDMA fabric"))
    if "nvidia.com/gpu.present" in group.node_labels:
        problems.append(
            (
                f"{path}.nodeLabels",
                "must not select nvidia.com/gpu.present on kind local: no kind node carries it "
                '(label the kind workers, e.g. llm-d.ai/local-sim: "true", and select that)',
            )
        )
    return problems


def _gpu_node_group_problems(name: str, group: NodeGroupConfig, kind: str) -> list[tuple[str, str]]:
    """A node group of a GPU target: a GPU model, its GPUs and the host of an HGX node."""
    path = f"{PROJECT}:fleet.nodeGroups.{name}"
    problems: list[tuple[str, str]] = []
    if group.accelerator == Accelerator.NONE:
        problems.append((f"{path}.accelerator", f"none is only for kind local (the target is {kind})"))
    elif group.gpus_per_node == 0:
        problems.append((f"{path}.gpusPerNode", f"must be 8 for {group.accelerator} nodes (got 0)"))
    if group.accelerator_allocation == "none":
        problems.append(
            (f"{path}.acceleratorAllocation", f"none is only for kind local (the target is {kind})")
        )
    if group.cpus_per_node < GPU_NODE_MIN_CPUS:
        problems.append(
            (
                f"{path}.cpusPerNode",
                f"must be >= {GPU_NODE_MIN_CPUS} CPUs on GPU nodes (got {group.cpus_per_node})",
            )
        )
    if group.host_memory_gib < GPU_NODE_MIN_MEMORY_GIB:
        problems.append(
            (
                f"{path}.hostMemoryGiB",
                f"must be >= {GPU_NODE_MIN_MEMORY_GIB} GiB on GPU nodes (got {group.host_memory_gib})",
            )
        )
    return problems


def _local_problems(config: StackConfig) -> list[tuple[str, str]]:
    """kind local: the simulator on CPU nodes; what only a GPU or cloud target has is refused.
    Other targets: none of the local-only values."""
    target = config.target
    problems: list[tuple[str, str]] = []
    engine_path = f"{PROJECT}:serving.engine"
    if target.kind != "local":
        for name, group in config.fleet.node_groups.items():
            problems += _gpu_node_group_problems(name, group, target.kind)
        if config.serving.engine == "simulator":
            problems.append(
                (
                    engine_path,
                    f"simulator is only for kind local (the target is {target.kind}): on GPU nodes it "
                    "would hold every H100 without using one; try the layout on a kind cluster "
                    "(docs/local-sim.md)",
                )
            )
        return problems
    for name, group in config.fleet.node_groups.items():
        problems += _local_node_group_problems(name, group)
    if config.serving.engine != "simulator":
        problems.append(
            (engine_path, "must be simulator on kind local: its nodes have no GPUs for vLLM (got 'vllm')")
        )
    if target.gpu_driver != "host":
        problems.append((f"{PROJECT}:target.gpuDriver", "not used on kind local: its nodes have no GPUs"))
    if config.images.build:
        problems.append(
            (
                f"{PROJECT}:images.build",
                "must be false on kind local: the simulator image is pinned in images/versions.toml, "
                "nothing is built",
            )
        )
    if config.responses is not None:
        problems.append(
            (
                f"{PROJECT}:responses",
                "not part of the kind local try-out (it needs a PostgreSQL operator and its backups); "
                "remove the key",
            )
        )
    return problems


def _simulator_problems(config: StackConfig) -> list[tuple[str, str]]:
    """engine simulator: what the pinned simulator can emulate (llmd_fleet/serving/simulator.py)."""
    serving = config.serving
    problems: list[tuple[str, str]] = []
    if serving.engine != "simulator":
        # On kind local the engine itself is refused already (_local_problems).
        if "simulator" in serving.model_fields_set and config.target.kind != "local":
            problems.append((f"{PROJECT}:serving.simulator", "only for engine simulator"))
        return problems
    if config.router.prefix_routing == "precise":
        problems.append(
            (
                f"{PROJECT}:router.prefixRouting",
                "must be approximate with engine simulator: the simulator dials its ZMQ endpoint "
                "and names itself kv@<pod-ip>@<model> (llm-d-inference-sim "
                "pkg/common/publisher.go, pkg/kv-cache/block_cache.go), while the precise producer "
                "dials every rank and keys blocks by <pod-ip>:<rank port> (llm-d-router "
                "preciseprefixcache/extractor.go), so no event would reach the index",
            )
        )
    if serving.kv_tier.cpu_offload:
        problems.append(
            (
                f"{PROJECT}:serving.kvTier.cpuOffload",
                "must be false with engine simulator: the simulator has no CPU KV tier",
            )
        )
    for role_name in ("prefill", "decode"):
        role: RoleConfig = getattr(serving.roles, role_name)
        path = f"{PROJECT}:serving.roles.{role_name}"
        if role.tensor_parallel != 1:
            problems.append(
                (
                    f"{path}.tensorParallel",
                    f"must be 1 with engine simulator: each simulated rank is a whole engine "
                    f"(got {role.tensor_parallel})",
                )
            )
        if role.data_parallel % role.nodes_per_instance:
            problems.append(
                (
                    f"{path}.dataParallel",
                    f"must be a multiple of nodesPerInstance ({role.nodes_per_instance}) with engine "
                    f"simulator: every pod of an instance runs the same number of ranks "
                    f"(got {role.data_parallel})",
                )
            )
        elif role.data_parallel // role.nodes_per_instance > SIMULATOR_MAX_RANKS:
            problems.append(
                (
                    f"{path}.dataParallel",
                    f"at most {SIMULATOR_MAX_RANKS} ranks per pod with engine simulator "
                    f"(its --data-parallel-size is 1 to 8); got {role.data_parallel} ranks over "
                    f"{role.nodes_per_instance} pods",
                )
            )
        if role.mtp_tokens:
            problems.append(
                (f"{path}.mtpTokens", "must be 0 with engine simulator: it has no speculative decoding")
            )
        if role.block_size not in SIMULATOR_BLOCK_SIZES:
            problems.append(
                (
                    f"{path}.blockSize",
                    f"must be one of {list(SIMULATOR_BLOCK_SIZES)} with engine simulator "
                    f"(got {role.block_size})",
                )
            )
    return problems


def _preinstalled_platform_problems(config: StackConfig) -> list[tuple[str, str]]:
    """A preinstalled platform installs no third-party chart: a section asking for one is a
    contradiction, not a choice to guess at."""
    if config.target.installs_platform:
        return []
    why = "with target.platform: preinstalled the stack releases no third-party chart"
    problems = []
    if config.observability.prometheus == "install":
        problems.append(
            (
                f"{PROJECT}:observability.prometheus",
                f"must not be install (kube-prometheus-stack) {why}; use operator (the cluster's "
                "prometheus-operator) or none",
            )
        )
    scaling = config.serving.autoscaling
    if scaling is not None and "keda" in scaling.model_fields_set and scaling.keda == "install":
        problems.append(
            (
                f"{PROJECT}:serving.autoscaling.keda",
                f"must be preinstalled (or unset) {why}",
            )
        )
    return problems


def _target_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The target sections against the target kind; images, Responses, the Kubernetes version."""
    problems: list[tuple[str, str]] = _gke_target_problems(config) + _eks_target_problems(config)
    problems += _onprem_target_problems(config)
    problems += _preinstalled_platform_problems(config)
    if config.observability.prometheus == "gmp" and config.target.kind != "gke":
        problems.append(
            (
                f"{PROJECT}:observability.prometheus",
                "gmp (Managed Service for Prometheus) exists only on kind gke",
            )
        )
    if config.responses is not None:
        problems += responses_problems(
            config.responses,
            config.target.kind,
            config.target.gke,
            config.gateway.implementation,
            f"{PROJECT}:responses",
        )
    problems += images_config_problems(
        config.target.kind, config.images, config.has_registry_password, f"{PROJECT}:images"
    )
    minimum = versions().kubernetes.minimum
    if version_tuple(config.target.kubernetes_version)[:2] < version_tuple(minimum)[:2]:
        problems.append(
            (
                f"{PROJECT}:target.kubernetesVersion",
                f"must be {minimum} or newer (DRA resource.k8s.io/v1) "
                f"(got {config.target.kubernetes_version!r})",
            )
        )
    return problems


def _node_group_problems(config: StackConfig) -> list[tuple[str, str]]:
    """Each node group: its name and one accelerator allocation mechanism."""
    problems: list[tuple[str, str]] = []
    for name, group in config.fleet.node_groups.items():
        group_path = f"{PROJECT}:fleet.nodeGroups.{name}"
        if not re.match(_DNS_LABEL, name):
            problems.append((group_path, "name must be a DNS label ([a-z0-9-])"))
        if group.accelerator_allocation == "dra" and group.rdma_resource:
            problems.append(
                (
                    f"{group_path}.rdmaResource",
                    "is a device-plugin resource: with acceleratorAllocation dra the NICs come from "
                    "nicDeviceClass claims (one allocation mechanism per node group)",
                )
            )
        if (
            group.accelerator_allocation == "dra"
            and group.nic_device_class
            and group.nic_topology == "pcie-root-per-gpu"
            and group.gpus_per_node
            and group.nics_per_node % group.gpus_per_node
        ):
            problems.append(
                (
                    f"{group_path}.nicsPerNode",
                    f"{group.nics_per_node} NICs cannot be paired evenly with {group.gpus_per_node} "
                    "GPUs by PCIe root; use nicTopology whole-node for this fabric",
                )
            )
    return problems


def _model_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The model architecture facts agree with each other."""
    problems: list[tuple[str, str]] = []
    model = config.model
    if model.routed_expert_params_b >= model.total_params_b:
        problems.append((f"{PROJECT}:model.routedExpertParamsB", "must be smaller than totalParamsB"))
    if model.active_params_b > model.total_params_b:
        problems.append((f"{PROJECT}:model.activeParamsB", "must not exceed totalParamsB"))
    return problems


def _role_problems(config: StackConfig) -> list[tuple[str, str]]:
    """Each role fits its node group and the model; prefill and decode agree on what NIXL moves."""
    problems: list[tuple[str, str]] = []
    model = config.model
    roles = config.serving.roles
    for role_name in ("prefill", "decode"):
        role: RoleConfig = getattr(roles, role_name)
        path = f"{PROJECT}:serving.roles.{role_name}"
        role_group = config.fleet.node_groups.get(role.node_group)
        if role_group is None:
            allowed = ", ".join(sorted(config.fleet.node_groups))
            problems.append((f"{path}.nodeGroup", f"no node group {role.node_group!r} (allowed: {allowed})"))
            continue
        group = role_group
        gpus = role.nodes_per_instance * group.gpus_per_node
        # GPU-less nodes (the simulator): ranks are processes, _simulator_problems bounds them.
        if group.gpus_per_node and role.tensor_parallel * role.data_parallel != gpus:
            problems.append(
                (
                    f"{path}.dataParallel",
                    f"tensorParallel x dataParallel must equal the instance's GPUs "
                    f"({role.nodes_per_instance} nodes x {group.gpus_per_node} = {gpus}); "
                    f"got {role.tensor_parallel} x {role.data_parallel}",
                )
            )
        if group.gpus_per_node and (
            group.gpus_per_node % role.tensor_parallel or group.gpus_per_node // role.tensor_parallel < 2
        ):
            problems.append(
                (
                    f"{path}.tensorParallel",
                    f"must divide the GPUs per node ({group.gpus_per_node}) and leave at least two "
                    "data-parallel ranks per node (vLLM's multi-port load balancing needs "
                    f"--data-parallel-size-local >= 2); got {role.tensor_parallel}",
                )
            )
        if role.expert_parallel != role.tensor_parallel * role.data_parallel:
            problems.append(
                (
                    f"{path}.expertParallel",
                    f"must equal tensorParallel x dataParallel "
                    f"({role.tensor_parallel * role.data_parallel}) because vLLM shards experts "
                    f"over all ranks; got {role.expert_parallel}",
                )
            )
        if model.experts % role.expert_parallel:
            problems.append(
                (
                    f"{path}.expertParallel",
                    f"must divide the model's {model.experts} experts; got {role.expert_parallel}",
                )
            )
        if role.max_model_len > model.max_context_tokens:
            problems.append(
                (
                    f"{path}.maxModelLen",
                    f"must not exceed model.maxContextTokens ({model.max_context_tokens}); "
                    f"got {role.max_model_len}",
                )
            )
    if roles.prefill.block_size != roles.decode.block_size:
        problems.append(
            (
                f"{PROJECT}:serving.roles.decode.blockSize",
                f"must equal prefill's ({roles.prefill.block_size}): NIXL moves KV block by block",
            )
        )
    if roles.prefill.mtp_tokens != roles.decode.mtp_tokens:
        problems.append(
            (
                f"{PROJECT}:serving.roles.decode.mtpTokens",
                f"must equal prefill's ({roles.prefill.mtp_tokens}): the MTP draft layer's KV "
                "is part of what prefill hands to decode",
            )
        )
    if roles.prefill.max_model_len != roles.decode.max_model_len:
        problems.append(
            (
                f"{PROJECT}:serving.roles.decode.maxModelLen",
                f"must equal prefill's ({roles.prefill.max_model_len}): a request prefilled on "
                "one role must fit the other",
            )
        )
    return problems


def _kv_tier_problems(config: StackConfig) -> list[tuple[str, str]]:
    """KV tiers below HBM build on the CPU tier."""
    problems: list[tuple[str, str]] = []
    tier = config.serving.kv_tier
    if tier.peer_to_peer and not tier.cpu_offload:
        problems.append(
            (
                f"{PROJECT}:serving.kvTier.peerToPeer",
                "needs cpuOffload: peers pull blocks from the CPU tier of the worker that holds them",
            )
        )
    if tier.secondary is not None and not tier.cpu_offload:
        problems.append(
            (f"{PROJECT}:serving.kvTier.secondary", "needs cpuOffload: blocks reach it through the CPU tier")
        )
    if tier.secondary is not None and tier.secondary.type == "pvc" and not tier.secondary.storage_class:
        problems.append((f"{PROJECT}:serving.kvTier.secondary.storageClass", "required when type is pvc"))
    return problems


def _weight_loading_problems(config: StackConfig) -> list[tuple[str, str]]:
    """ModelExpress needs its client, which only the wide-EP image carries."""
    if config.serving.weight_loading == "modelexpress" and not config.images.build:
        return [
            (
                f"{PROJECT}:serving.weightLoading",
                "modelexpress needs images.build true: the ModelExpress client is installed in the "
                "wide-EP image (images/Dockerfile.wide-ep), not in the upstream vLLM image",
            )
        ]
    return []


def _router_problems(config: StackConfig) -> list[tuple[str, str]]:
    """Router modes that hold fleet-wide, distinct priority classes."""
    problems: list[tuple[str, str]] = []
    router = config.router
    if router.mode == "active-active" and router.prefix_routing != "precise":
        problems.append(
            (
                f"{PROJECT}:router.mode",
                "active-active needs prefixRouting precise: with approximate prefix routing each "
                "replica guesses cache contents from the traffic it saw, so replicas disagree "
                "(llm-d-router #1290); use active-passive",
            )
        )
    if router.mode == "active-active" and router.flow_control:
        problems.append(
            (
                f"{PROJECT}:router.mode",
                "active-active keeps a flow-control queue per replica, so priorities and limits "
                "no longer hold fleet-wide; use active-passive or set flowControl false",
            )
        )
    names = [c.name for c in router.priority_classes]
    if len(set(names)) != len(names):
        problems.append((f"{PROJECT}:router.priorityClasses", f"names must be unique (got {names})"))
    priorities = [c.priority for c in router.priority_classes]
    if router.probabilistic_admission and not any(p < 0 for p in priorities):
        problems.append(
            (
                f"{PROJECT}:router.probabilisticAdmission",
                "sheds only negative-priority requests, and no priority class is negative; add a "
                "sheddable class or set probabilisticAdmission false",
            )
        )
    if len(set(priorities)) != len(priorities):
        problems.append(
            (f"{PROJECT}:router.priorityClasses", f"each class needs its own priority (got {priorities})")
        )
    return problems


# Kubernetes bounds of an HPA's behavior (autoscaling/v2 HPAScalingRules): a stabilization window
# of at most one hour, a scaling policy's period of at most 30 minutes.
HPA_MAX_STABILIZATION_SECONDS = 3600
HPA_MAX_POLICY_PERIOD_SECONDS = 1800
# Seconds after the drain a terminating serving pod is given for teardown (its grace period is
# drainSeconds + this; llmd_fleet/serving/pod.py reads it from here).
TEARDOWN_SECONDS = 60
# The margin the default cooldown adds to the model load time.
COOLDOWN_MARGIN_SECONDS = 300
# Prometheus modes whose Prometheus servers prometheus-operator runs (and so fronts with its
# `prometheus-operated` Service).
_OPERATOR_PROMETHEUS = ("operator", "install")


def autoscaling_cooldown_seconds(serving: ServingConfig, role: _RoleAutoscalingConfig) -> int:
    """The role's scale-down cooldown: explicit, or the model load time plus a margin (capped at
    the longest stabilization window Kubernetes accepts)."""
    if role.cooldown_seconds is not None:
        return role.cooldown_seconds
    return min(serving.model_load_minutes * 60 + COOLDOWN_MARGIN_SECONDS, HPA_MAX_STABILIZATION_SECONDS)


def autoscaling_max_instances(serving: ServingConfig, role_name: str) -> int:
    """Most instances role `role_name` can run: its autoscaling maximum when it autoscales, else
    its fixed `instances`."""
    role: RoleConfig = getattr(serving.roles, role_name)
    scaling = serving.autoscaling.role(role_name) if serving.autoscaling is not None else None
    if scaling is None or not scaling.enabled:
        return role.instances
    return scaling.max_instances if scaling.max_instances is not None else role.instances


def _autoscaling_problems(config: StackConfig) -> list[tuple[str, str]]:
    """Bounds around the configured instances, room in the node groups for every maximum, a
    cooldown longer than a model load, a drain a scale-down can wait for, and a Prometheus to
    read."""
    serving, scaling = config.serving, config.serving.autoscaling
    if scaling is None:
        return []
    path = f"{PROJECT}:serving.autoscaling"
    problems: list[tuple[str, str]] = []
    enabled = [name for name in ("prefill", "decode") if scaling.role(name).enabled]
    load_seconds = serving.model_load_minutes * 60
    for name in enabled:
        role: RoleConfig = getattr(serving.roles, name)
        auto, role_path = scaling.role(name), f"{path}.{name}"
        if auto.min_instances > role.instances:
            problems.append(
                (
                    f"{role_path}.minInstances",
                    f"must not exceed serving.roles.{name}.instances ({role.instances}), the count "
                    f"the role starts at (got {auto.min_instances})",
                )
            )
        if auto.max_instances is not None and auto.max_instances < role.instances:
            problems.append(
                (
                    f"{role_path}.maxInstances",
                    f"must be at least serving.roles.{name}.instances ({role.instances}) "
                    f"(got {auto.max_instances})",
                )
            )
        cooldown = autoscaling_cooldown_seconds(serving, auto)
        if cooldown <= load_seconds:
            got = f"got {auto.cooldown_seconds}" if auto.cooldown_seconds is not None else "the default"
            problems.append(
                (
                    f"{role_path}.cooldownSeconds",
                    f"must be longer than serving.modelLoadMinutes ({serving.model_load_minutes} min = "
                    f"{load_seconds} s): an instance removed and needed again pays a whole model load; "
                    f"at most {HPA_MAX_STABILIZATION_SECONDS} s, the longest HPA stabilization window "
                    f"({got})",
                )
            )
        if name == "prefill" and scaling.prefill.prefill_tokens_per_second is None:
            problems.append(
                (
                    f"{role_path}.prefillTokensPerSecond",
                    "required when prefill autoscales: it turns in-flight prompt tokens into seconds "
                    "of backlog (measure it on the fleet, docs/autoscaling.md)",
                )
            )
    if "prefill" in enabled and config.router.mode != "active-passive":
        problems.append(
            (
                f"{path}.prefill.enabled",
                "needs router.mode active-passive: prefill scales on the leader endpoint picker's "
                "in-flight tokens, and active-active replicas each count only their own share",
            )
        )
    if enabled and serving.drain_seconds + TEARDOWN_SECONDS > HPA_MAX_POLICY_PERIOD_SECONDS:
        problems.append(
            (
                f"{PROJECT}:serving.drainSeconds",
                f"must be at most {HPA_MAX_POLICY_PERIOD_SECONDS - TEARDOWN_SECONDS} with autoscaling: "
                "a scale-down removes one instance per drain plus teardown, and an HPA policy "
                f"period is at most {HPA_MAX_POLICY_PERIOD_SECONDS} s (got {serving.drain_seconds})",
            )
        )
    if (
        enabled
        and scaling.prometheus_address is None
        and config.observability.prometheus not in _OPERATOR_PROMETHEUS
    ):
        problems.append(
            (
                f"{path}.prometheusAddress",
                "required unless observability.prometheus is operator or install (the default "
                "address is prometheus-operator's prometheus-operated Service; got "
                f"observability.prometheus {config.observability.prometheus})",
            )
        )
    for group_name, group in sorted(config.fleet.node_groups.items()):
        on_group = [n for n in ("prefill", "decode") if getattr(serving.roles, n).node_group == group_name]
        peak = {
            n: autoscaling_max_instances(serving, n) * getattr(serving.roles, n).nodes_per_instance
            for n in on_group
        }
        scaled = [n for n in on_group if n in enabled]
        if scaled and sum(peak.values()) > group.count:
            detail = " + ".join(f"{n} {peak[n]}" for n in on_group)
            problems.append(
                (
                    f"{path}.{scaled[-1]}.maxInstances",
                    f"the roles' maxima need {sum(peak.values())} nodes ({detail}) but node group "
                    f"{group_name!r} has {group.count}",
                )
            )
    return problems


# The cross-field rules, one per section, in the order their problems are reported.
def _preflight_problems(config: StackConfig) -> list[tuple[str, str]]:
    """The preflight pairs two nodes of the one node group both roles run on."""
    serving = config.serving
    if not serving.preflight.enabled:
        return []
    path = f"{PROJECT}:serving.preflight.enabled"
    if serving.engine == "simulator":
        return [
            (
                path,
                "must be false with engine simulator: the simulator moves no KV over a fabric, so "
                "there is nothing for the NIXL probe to measure (unset, it is off there)",
            )
        ]
    groups = sorted({serving.roles.prefill.node_group, serving.roles.decode.node_group})
    if len(groups) > 1:
        return [
            (
                path,
                f"prefill and decode run on different node groups ({', '.join(groups)}); the preflight "
                "pairs two nodes of one group with one claim shape: set it false",
            )
        ]
    group = config.fleet.node_groups.get(groups[0])
    if group is not None and group.count < 2:
        return [
            (path, f"node group {groups[0]} has {group.count} node; the preflight needs two: set it false")
        ]
    return []


_SEMANTIC_RULES = (
    _target_problems,
    _local_problems,
    _node_group_problems,
    _simulator_problems,
    _model_problems,
    _role_problems,
    _kv_tier_problems,
    _weight_loading_problems,
    _router_problems,
    _preflight_problems,
    _autoscaling_problems,
)


def _semantic_problems(config: StackConfig) -> list[tuple[str, str]]:
    """Cross-field rules that single-field validation cannot express."""
    return [problem for rule in _SEMANTIC_RULES for problem in rule(config)]


def read_pulumi_config(
    get: Callable[[str], Any], all_keys: list[str], is_secret: Callable[[str], bool]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Collect this project's raw config values.

    `get(key)` returns a value as Pulumi stores it (objects as JSON text), `all_keys` lists every
    set `project:key`, `is_secret(key)` tells whether a key was set with --secret.
    """
    import json

    raw: dict[str, Any] = {}
    secrets = set()
    for full_key in sorted(all_keys):
        namespace, _, key = full_key.partition(":")
        if namespace != PROJECT:
            continue
        value = get(full_key)
        if (key in _OBJECT_KEYS or key in _OPTIONAL_OBJECT_KEYS) and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ConfigError([(full_key, "must be an object (a YAML mapping)")]) from None
        raw[key] = value
        if is_secret(full_key):
            secrets.add(key)
    return raw, frozenset(secrets)


def check_stack_secrets(config: StackConfig) -> StackConfig:
    """A whole stack's config also carries the secrets its sections need (parse_config validates
    settings on their own, without secrets). Raises ConfigError."""
    if problems := password_problems(config.responses, config.has_responses_db_password, PROJECT):
        raise ConfigError(problems)
    return config
