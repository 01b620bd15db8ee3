"""The vLLM command line and environment of a serving pod, built from the plan (pure).

Flag names are vLLM's (`vllm serve --help` of the version in images/versions.toml); the launch
layout (one pod per node, eight local DP ranks, multi-port external load balancing with a
supervisor port, start rank from the LWS worker index) follows llm-d's wide-EP guides.
"""

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from llmd_fleet.config.model import LoraAdapterConfig, ModelConfig, served_model_names
from llmd_fleet.layers.serving.config import KvTierConfig, RoleConfig
from llmd_fleet.plan.fleet import GIB, KV_EVENTS_PORT, NIXL_SIDE_CHANNEL_PORT, P2P_PORT, RolePlan

# Mount points of the pod's volumes, shared with the pod builder.
SHM_PATH = "/dev/shm"
CACHE_PATH = "/var/cache"
HF_CACHE = f"{CACHE_PATH}/huggingface"
VLLM_CACHE = f"{CACHE_PATH}/vllm"
HOME_PATH = f"{CACHE_PATH}/home"
TMP_PATH = "/tmp"
KV_TIER_PATH = "/var/lib/kv-tier"
# The routing sidecar's pooled upstream connections idle out after 90 s (llm-d-router v0.10.0
# pkg/sidecar/proxy/proxy.go, IdleConnTimeout; not configurable there). Engines keep idle
# connections open longer, so the proxy side always closes first.
SIDECAR_IDLE_CONN_TIMEOUT_S = 90
ENGINE_KEEP_ALIVE_S = 120


def decode_max_tokens(role: RoleConfig, plan: RolePlan) -> int | None:
    """Tokens one decode step carries: every sequence plus its MTP draft tokens (vLLM verifies
    1 + num_speculative_tokens per sequence), plus the prompt remainder the P/D decider leaves
    to decode (`local_prefill_tokens`: none with the always decider; a remotely prefilled request
    recomputes only its last prompt token, one of its sequence's tokens). None when maxNumSeqs
    is left to vLLM."""
    if role.max_num_seqs is None:
        return None
    return role.max_num_seqs * (1 + role.mtp_tokens) + plan.local_prefill_tokens


def _json(value: dict[str, Any]) -> str:
    """Compact JSON with a fixed key order (the builder's insertion order)."""
    return json.dumps(value, separators=(",", ":"))


def nixl_transfer_config(role: str, nixl_backends: tuple[str, ...] = ("UCX",)) -> dict[str, Any]:
    """NIXL P/D transfer: prefill produces KV, decode consumes it and fails fast on a bad load.

    A decode rank that cannot load its KV must fail the request, not silently recompute a
    195k-token prompt on the decode GPUs (llm-d's wide-EP guides set the same policy).
    """
    return {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
        "kv_buffer_device": "cuda",
        "kv_load_failure_policy": "fail",
        "kv_connector_extra_config": {"backends": list(nixl_backends)},
    }


def offloading_transfer_config(
    tier: KvTierConfig, cpu_tier_gib: int, nixl_backends: tuple[str, ...]
) -> dict[str, Any]:
    """vLLM's OffloadingConnector: the CPU DRAM tier (cpu_bytes_to_use is per DP rank), plus
    secondary tiers through TieringOffloadingSpec: a file-system tier and the p2p tier that lets
    a peer pull blocks over NIXL (vllm/v1/kv_offload/tiering). The p2p tier's host and port come
    from VLLM_P2P_SIDE_CHANNEL_HOST/PORT, set per pod by the launch script."""
    extra: dict[str, Any] = {
        "cpu_bytes_to_use": cpu_tier_gib * GIB,
        "eviction_policy": tier.eviction_policy,
    }
    secondary: list[dict[str, Any]] = []
    if tier.secondary is not None:
        secondary.append(
            {
                "type": "fs",
                "root_dir": KV_TIER_PATH,
                "n_read_threads": tier.secondary.read_threads,
                "n_write_threads": tier.secondary.write_threads,
            }
        )
    if tier.peer_to_peer:
        secondary.append({"type": "p2p", "backends": list(nixl_backends)})
        # vLLM offloads prompt blocks only by default (v1/kv_offload/base.py, offload_prompt_only);
        # a peer pulling a conversation's prefix needs its generated turns too.
        extra["offload_prompt_only"] = False
    if secondary:
        extra = {"spec_name": "TieringOffloadingSpec", **extra, "secondary_tiers": secondary}
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def kv_transfer_config(role: str, plan: RolePlan, tier: KvTierConfig) -> dict[str, Any]:
    """The role's --kv-transfer-config: NIXL for P/D, combined with the offloading connector
    through MultiConnector when the CPU tier is on (each child carries its own kv_role)."""
    nixl = nixl_transfer_config(role, plan.fabric.nixl_backends)
    if not tier.cpu_offload or plan.memory.cpu_tier_gib <= 0:
        return nixl
    offload = offloading_transfer_config(tier, plan.memory.cpu_tier_gib, plan.fabric.nixl_backends)
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_load_failure_policy": "fail",
        "kv_connector_extra_config": {"connectors": [nixl, offload]},
    }


def kv_events_topic(model: ModelConfig, client_port: int) -> str:
    """Per-pod ZMQ topic the router's precise prefix-cache producer subscribes to."""
    return f"kv@${{POD_IP}}:{client_port}@{model.id}"


def kv_events_config(model: ModelConfig, plan: RolePlan) -> dict[str, Any]:
    """KV-cache events over ZMQ. vLLM adds the global DP rank to the endpoint port, so the
    endpoint uses ${KV_EVENTS_BASE} (= KV_EVENTS_PORT - start rank) and local rank i publishes on
    KV_EVENTS_PORT + i on every pod."""
    return {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "tcp://*:${KV_EVENTS_BASE}",
        "topic": kv_events_topic(model, plan.client_ports[0]),
    }


LORA_ROOT = f"{CACHE_PATH}/lora"
"""Where the launch script puts each LoRA adapter at its pinned revision (`<root>/<name>`)."""


def lora_adapter_path(adapter: LoraAdapterConfig) -> str:
    """Where the launch script puts the adapter (`LORA_ROOT`/<name>), the path vLLM loads it from."""
    return f"{LORA_ROOT}/{adapter.name}"


def lora_argv(model: ModelConfig) -> list[str]:
    """vLLM 0.33's LoRA settings for the model's adapters (none without adapters): LoRA on, one
    GPU slot per adapter (--max-loras), slots sized for the largest rank (--max-lora-rank, one of
    vllm/config/lora.py MaxLoRARanks), and each adapter as a --lora-modules JSON entry
    (vllm/entrypoints/openai/models/protocol.py LoRAModulePath: name, path, base_model_name).
    The path is the local directory the launch script downloads the adapter's pinned revision
    to: given a repository id, vLLM 0.33 downloads its default branch, with no revision
    (vllm/lora/utils.py get_adapter_absolute_path)."""
    adapters = model.lora_adapters
    if not adapters:
        return []
    base = served_model_names(model)[0]
    return [
        "--enable-lora",
        "--max-loras",
        str(len(adapters)),
        "--max-lora-rank",
        str(max(a.rank for a in adapters)),
        "--lora-modules",
        *(_json({"name": a.name, "path": lora_adapter_path(a), "base_model_name": base}) for a in adapters),
    ]


def lora_download_lines(model: ModelConfig) -> list[str]:
    """Launch-script lines fetching each adapter at its pinned revision before vLLM starts (the
    `hf` CLI of the image's huggingface_hub; HF_TOKEN from the pod's env when set)."""
    if not model.lora_adapters:
        return []
    lines = ["# LoRA adapters at their pinned revisions (vLLM itself would take the default branch)."]
    for adapter in model.lora_adapters:
        words = [
            "hf",
            "download",
            adapter.source,
            "--revision",
            adapter.revision,
            "--local-dir",
            lora_adapter_path(adapter),
            "--quiet",
        ]
        lines.append(" ".join(shell_word(w) for w in words) + " >/dev/null")
    return lines


def vllm_serve_argv(
    model: ModelConfig, role: RoleConfig, plan: RolePlan, tier: KvTierConfig | None = None
) -> list[str]:
    """`vllm serve` argv. Words may reference the shell variables set by `launch_script`
    (${START_RANK}, ${KV_EVENTS_BASE}) and the pod's env (${LWS_LEADER_ADDRESS}, ${POD_IP})."""
    tier = tier or KvTierConfig()
    argv = [
        "vllm",
        "serve",
        model.id,
        "--revision",
        model.revision,
        "--served-model-name",
        *served_model_names(model),
        "--port",
        str(plan.engine_ports[0]),
        "--enable-expert-parallel",
        "--tensor-parallel-size",
        str(plan.tensor_parallel),
        "--data-parallel-size",
        str(plan.data_parallel),
        "--data-parallel-size-local",
        str(plan.dp_size_local),
        "--data-parallel-address",
        "${LWS_LEADER_ADDRESS}",
        "--data-parallel-rpc-port",
        str(plan.dp_rpc_port),
        "--data-parallel-start-rank",
        "${START_RANK}",
        "--data-parallel-multi-port-external-lb",
        "--data-parallel-supervisor-port",
        str(plan.supervisor_port),
        "--all2all-backend",
        plan.all2all_backend,
        "--kv-transfer-config",
        _json(kv_transfer_config(plan.name, plan, tier)),
        "--kv-events-config",
        _json(kv_events_config(model, plan)),
        "--kv-cache-dtype",
        model.kv_cache_dtype,
        "--block-size",
        str(role.block_size),
        "--max-model-len",
        str(role.max_model_len),
        "--gpu-memory-utilization",
        str(role.gpu_memory_utilization),
        # SIGTERM drains: running requests finish (up to this long) instead of being aborted.
        "--shutdown-timeout",
        str(plan.drain_seconds),
    ]
    if role.mtp_tokens:
        speculative: dict[str, Any] = {"method": "mtp", "num_speculative_tokens": role.mtp_tokens}
        if plan.moe.drafter_backend is not None:
            # The drafter's experts may be unquantized where the model's are not (plan/kernels.py).
            speculative["moe_backend"] = plan.moe.drafter_backend
        argv += ["--speculative-config", _json(speculative)]
    # The MoE kernel follows the weights' quantization on the model card (plan/kernels.py).
    if plan.moe.backend is not None:
        argv += ["--moe-backend", plan.moe.backend]
    if role.redundant_experts is not None:
        # vLLM 0.33 engine/arg_utils.py: --enable-eplb and --eplb-config (config/parallel.py
        # EPLBConfig.num_redundant_experts); redundant experts without EPLB are refused there.
        argv += [
            "--enable-eplb",
            "--eplb-config",
            _json({"num_redundant_experts": role.redundant_experts}),
        ]
    if role.dual_batch_overlap:
        # vLLM 0.33 config/parallel.py ParallelConfig.enable_dbo: two micro-batches per step.
        argv.append("--enable-dbo")
    batched_tokens = role.max_num_batched_tokens
    if batched_tokens is None and plan.name == "decode":
        # Explicit on decode, so the step size the NVSHMEM queue is sized for is the real one.
        batched_tokens = decode_max_tokens(role, plan)
    if batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(batched_tokens)]
    if role.max_num_seqs is not None:
        argv += ["--max-num-seqs", str(role.max_num_seqs)]
    if role.enforce_eager:
        argv.append("--enforce-eager")
    if model.trust_remote_code:
        argv.append("--trust-remote-code")
    if model.tool_call_parser:
        argv += ["--tool-call-parser", model.tool_call_parser, "--enable-auto-tool-choice"]
    if model.reasoning_parser:
        argv += ["--reasoning-parser", model.reasoning_parser]
    if plan.weights is not None and plan.weights.mode == "modelexpress":
        # vLLM 0.33.0 registers this loader itself (model_executor/model_loader/__init__.py); it
        # delegates to the ModelExpress client the image installs.
        argv += ["--load-format", "modelexpress"]
    argv += lora_argv(model)
    return argv


# The variables an argv word may reference: set by the launch script (START_RANK,
# KV_EVENTS_BASE) or the pod's env (LWS_LEADER_ADDRESS, POD_IP). Only these expand.
SCRIPT_VARIABLES = ("START_RANK", "KV_EVENTS_BASE", "LWS_LEADER_ADDRESS", "POD_IP")
_REFERENCE = re.compile(r"\$\{(" + "|".join(SCRIPT_VARIABLES) + r")\}")


def shell_word(word: str) -> str:
    """Quote one argv word for bash so that it stays one word and nothing in it expands except
    references to SCRIPT_VARIABLES: the rest is single-quoted (no `$`, backquote or backslash
    means anything there), each reference double-quoted, and the pieces concatenated."""
    pieces: list[str] = []
    position = 0
    for reference in _REFERENCE.finditer(word):
        if reference.start() > position:
            pieces.append(shlex.quote(word[position : reference.start()]))
        pieces.append(f'"${{{reference.group(1)}}}"')
        position = reference.end()
    if position < len(word) or not pieces:
        pieces.append(shlex.quote(word[position:]))
    return "".join(pieces)


def _argv_lines(argv: list[str]) -> list[str]:
    """Group argv for reading: `vllm serve MODEL`, then one `--flag [value]` per line."""
    lines = [" ".join(shell_word(w) for w in argv[:3])]
    rest = argv[3:]
    i = 0
    while i < len(rest):
        has_value = i + 1 < len(rest) and not rest[i + 1].startswith("--")
        words = rest[i : i + 2] if has_value else rest[i : i + 1]
        lines.append(" ".join(shell_word(w) for w in words))
        i += len(words)
    return lines


@dataclass(frozen=True)
class Launch:
    """How the serving container starts: a bash script and the argv it execs."""

    argv: tuple[str, ...]
    script: str


# vLLM 0.33 sets each worker's NIC variables from these (v1/executor/vllm_net_devices.py): the GPU ->
# NIC PCI pairs, and which variables to set to the NIC's RDMA device (`:1` is the port UCX names).
NIC_MAPPING_VAR = "VLLM_GPU_NIC_PCIE_MAPPING"
NIC_SELECTION_VAR = "VLLM_NIC_SELECTION_VARS"
NIC_SELECTION = "UCX_NET_DEVICES:1"
# Where the script reads sysfs; check-vllm points it at a fake tree.
SYSFS_VAR = "SYSFS_ROOT"


def nic_pinning_reason(plan: RolePlan) -> str | None:
    """Why the launch script pins no NIC per rank, or None when it does: UCX picks the first NIC,
    not the GPU's own (openucx/ucx#11259), which matters where NIXL runs over UCX on RDMA NICs that
    the DRA claim puts on each GPU's PCIe root."""
    if "UCX" not in plan.fabric.nixl_backends:
        return (
            f"fabric {plan.fabric.name}: NIXL runs over {', '.join(plan.fabric.nixl_backends)}, not UCX, "
            "which chooses its own devices"
        )
    if not plan.fabric.kv_over_rdma:
        return f"fabric {plan.fabric.name}: UCX moves KV over the kernel's TCP, with no RDMA NIC to pin"
    claim = plan.claim
    if claim is None or claim.nic_device_class is None or claim.topology != "pcie-root-per-gpu":
        return "the pod's NICs are not claimed per GPU PCIe root (DRA, nicTopology pcie-root-per-gpu)"
    return None


def nic_pinning_lines() -> list[str]:
    """Bash that exports the GPU -> NIC pairs from sysfs: each NVIDIA GPU (vendor 0x10de, class 0x0302)
    with the RDMA NIC (/sys/class/infiniband) on its PCIe root, the root the DRA claim's pcieRoot
    constraint names. A GPU without one stops the pod with one line."""
    return [
        "# UCX takes the first NIC, not the GPU's own (openucx/ucx#11259): pair every GPU with the",
        "# RDMA NIC the claim put on its PCIe root; vLLM sets each rank's UCX_NET_DEVICES from it.",
        f'sysfs="${{{SYSFS_VAR}:-/sys}}"',
        "shopt -s nullglob",
        "declare -A nic_on_root=()",
        'for nic in "$sysfs"/class/infiniband/*; do',
        '  nic_pci=$(readlink -f "$nic/device"); root=${nic_pci#"$sysfs"/devices/}; root=${root%%/*}',
        "  [[ -n ${nic_on_root[$root]:-} ]] || nic_on_root[$root]=${nic_pci##*/}",
        "done",
        'mapping=""',
        'for gpu in "$sysfs"/bus/pci/devices/*; do',
        '  [[ $(<"$gpu/vendor") == 0x10de && $(<"$gpu/class") == 0x0302* ]] || continue',
        '  gpu_pci=$(readlink -f "$gpu"); root=${gpu_pci#"$sysfs"/devices/}; root=${root%%/*}',
        "  if [[ -z ${nic_on_root[$root]:-} ]]; then",
        '    echo "error: GPU ${gpu_pci##*/} has no RDMA NIC on its PCIe root $root;'
        ' the claim must hold one NIC per GPU" >&2',
        "    exit 1",
        "  fi",
        '  mapping+="${mapping:+,}${gpu_pci##*/}=${nic_on_root[$root]}"',
        "done",
        'if [[ -z $mapping ]]; then echo "error: no NVIDIA GPU under $sysfs/bus/pci/devices" >&2; exit 1; fi',
        f'export {NIC_MAPPING_VAR}="$mapping" {NIC_SELECTION_VAR}={NIC_SELECTION}',
    ]


def launch_script(
    model: ModelConfig, role: RoleConfig, plan: RolePlan, tier: KvTierConfig | None = None
) -> Launch:
    """The container's `bash -c` script: clean /dev/shm, derive this worker's ranks, exec vLLM."""
    tier = tier or KvTierConfig()
    argv = vllm_serve_argv(model, role, plan, tier)
    lines = [
        "set -euo pipefail",
        "# DeepEP/NVSHMEM segments left by a crashed engine fill /dev/shm (llm-d/llm-d#352).",
        f"find {SHM_PATH} -mindepth 1 -delete",
        "# Global DP rank of this pod's first local rank: one pod per node, "
        f"{plan.dp_size_local} ranks each.",
        f"START_RANK=$(( LWS_WORKER_INDEX * {plan.dp_size_local} ))",
        "# vLLM adds the global DP rank to the KV-events port; local rank i then publishes on "
        f"{KV_EVENTS_PORT} + i.",
        f"KV_EVENTS_BASE=$(( {KV_EVENTS_PORT} - START_RANK ))",
        f"# Same for the NIXL side channel: local rank i listens on {NIXL_SIDE_CHANNEL_PORT} + i.",
        f"export VLLM_NIXL_SIDE_CHANNEL_PORT=$(( {NIXL_SIDE_CHANNEL_PORT} - START_RANK ))",
        *(
            [
                "# And for the p2p KV tier: local rank i listens on "
                f"{P2P_PORT} + i (the sidecar's --p2p-connector-port).",
                f"export VLLM_P2P_SIDE_CHANNEL_PORT=$(( {P2P_PORT} - START_RANK ))",
            ]
            if tier.cpu_offload and tier.peer_to_peer
            else []
        ),
        *(nic_pinning_lines() if nic_pinning_reason(plan) is None else []),
        *lora_download_lines(model),
        "exec " + " \\\n  ".join(_argv_lines(argv)),
    ]
    return Launch(argv=tuple(argv), script="\n".join(lines) + "\n")


def startup_budget_seconds(plan: RolePlan, model_load_seconds: int) -> int:
    """How long a pod may take to serve: the plan's budget for its weight-loading mode
    (WeightLoadPlan.startup_seconds), or the configured load time for a hand-built plan."""
    return plan.startup_seconds if plan.weights is not None else model_load_seconds


def modelexpress_env(plan: RolePlan, server_address: str) -> list[dict[str, Any]]:
    """The ModelExpress client's environment (modelexpress envs.py at the pinned tag): its server, the
    ports the plan keeps clear of the fleet's, the per-source transfer timeout the startup budget
    counts on, and the fabric's NIXL backend."""
    weights = plan.weights
    if weights is None or weights.mode != "modelexpress":
        return []
    values = [
        ("MX_SERVER_ADDRESS", server_address),
        # Peers dial this host for tensor metadata; the pod IP, never a resolver's guess.
        ("MX_WORKER_HOST", "$(POD_IP)"),
        ("MX_METADATA_PORT", str(weights.metadata_ports[0])),
        ("MX_WORKER_GRPC_PORT", str(weights.worker_grpc_ports[0])),
        ("MX_TRANSFER_TIMEOUT", str(weights.transfer_timeout_seconds)),
        *plan.fabric.modelexpress_env,
    ]
    return [{"name": name, "value": value} for name, value in values]


def engine_env(
    role: RoleConfig,
    plan: RolePlan,
    model_load_seconds: int,
    hf_token_secret: str | None,
    tier: KvTierConfig | None = None,
    modelexpress_address: str | None = None,
) -> list[dict[str, Any]]:
    """Environment of the vLLM container (Kubernetes EnvVar objects, camelCase).
    `modelexpress_address` is the ModelExpress server (host:port) when the plan loads weights
    with it."""
    env: list[dict[str, Any]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # NIXL's side channel must advertise the pod IP, not a loopback or host address.
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"},
        {"name": "DP_SIZE_LOCAL", "value": str(plan.dp_size_local)},
        {"name": "TP_SIZE", "value": str(plan.tensor_parallel)},
        # Engines come up only after the weights load; give the DP coordinator as long.
        {
            "name": "VLLM_ENGINE_READY_TIMEOUT_S",
            "value": str(startup_budget_seconds(plan, model_load_seconds)),
        },
        *([{"name": "VLLM_USE_DEEP_GEMM", "value": "1"}] if plan.moe.deep_gemm else []),
        {"name": "VLLM_RANDOMIZE_DP_DUMMY_INPUTS", "value": "1"},
        {"name": "VLLM_SKIP_P2P_CHECK", "value": "1"},
        {"name": "NVIDIA_GDRCOPY", "value": "enabled"},
        {"name": "NVSHMEM_SYMMETRIC_SIZE", "value": f"{role.nvshmem_heap_gib}G"},
        {"name": "PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"},
        # The root file system is read-only: every cache and HOME (torch inductor, DeepGEMM's JIT,
        # ~/.config/vllm usage stats, the hub token file) live in the pod's cache emptyDir.
        {"name": "HOME", "value": HOME_PATH},
        {"name": "HF_HOME", "value": HF_CACHE},
        {"name": "HF_HUB_CACHE", "value": HF_CACHE},
        {"name": "VLLM_CACHE_ROOT", "value": VLLM_CACHE},
        {"name": "CUDA_CACHE_PATH", "value": f"{VLLM_CACHE}/cuda"},
        {"name": "TRITON_CACHE_DIR", "value": f"{VLLM_CACHE}/triton"},
        {"name": "FLASHINFER_WORKSPACE_BASE", "value": f"{VLLM_CACHE}/flashinfer"},
        # getpass() in the engine fails for UIDs without a passwd entry (vllm-project/vllm#44548).
        {"name": "USER", "value": "llm-d"},
    ]
    tier = tier or KvTierConfig()
    if tier.cpu_offload and tier.peer_to_peer:
        # The p2p tier's control socket must advertise the pod IP to peers on other nodes.
        env.append({"name": "VLLM_P2P_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"})
    if tier.cpu_offload:
        # Same hash seed everywhere, so offloaded and peer blocks keep the same identity.
        env.append({"name": "PYTHONHASHSEED", "value": "0"})
    # Fabric settings (NVSHMEM/NCCL/UCX/libfabric) come from the target, never per pod.
    env += [{"name": name, "value": value} for name, value in plan.fabric.engine_env]
    # Every engine sits behind the routing sidecar or the gateway, whose pooled connections idle
    # up to SIDECAR_IDLE_CONN_TIMEOUT_S: the engine must keep them open longer (vLLM's default is
    # 5 s), or a proxy reuses a connection the engine already closed.
    env.append({"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": str(ENGINE_KEEP_ALIVE_S)})
    if modelexpress_address is not None:
        env += modelexpress_env(plan, modelexpress_address)
    if plan.name == "decode" and (tokens := decode_max_tokens(role, plan)) is not None:
        # DeepEP low-latency dispatch keeps a step's tokens in flight on each NVSHMEM QP; the
        # wide-EP guide sizes the queue (MAX_TOKENS + 1) x 2 for the decode batch.
        env.append({"name": "NVSHMEM_QP_DEPTH", "value": str((tokens + 1) * 2)})
    if hf_token_secret:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "HF_TOKEN"}},
            }
        )
    return env
