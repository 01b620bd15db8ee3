"""The simulator engine container of a serving pod (`serving.engine: simulator`), built from the
plan (pure).

llm-d's inference simulator (image `inference-sim` in images/versions.toml) answers vLLM's OpenAI
API on CPU: it starts `--data-parallel-size` ranks in one process on `--port + rank`, reads the
NIXL `kv_transfer_params` the routing sidecar sends (prefill returns at once, decode waits the
emulated transfer time instead of prefilling), emulates a prefix cache of `--kv-cache-size`
blocks whose hits shorten the emulated prefill, and serves vLLM's core metrics. So the pods keep
vLLM's roles, rank ports, client ports and sidecar, and nothing of what vLLM needs on GPUs: no
GPU claim or device limit, no DeepEP/NVSHMEM/NCCL/NIXL environment, no /dev/shm or model cache,
no added capability, no root.

Facts of the pinned tag (llm-d/llm-d-inference-sim, `[images.inference-sim]`, commit f36f652):
flag names and value types from pkg/common/parser.go (pflag, ContinueOnError: an unknown flag
stops the process); ranks from pkg/llm-d-inference-sim/simulator.go; /health and /health/ready from
pkg/communication/http.go; POD_IP from pkg/common/config.go; the image's entrypoint is the
binary itself (Dockerfile: distroless static, USER 65532), so the container passes `args` and
has no shell.
"""

from typing import Any

from llmd_fleet.config.model import ModelConfig, served_model_names
from llmd_fleet.core.pod_context import restricted_container_context
from llmd_fleet.layers.serving.config import RoleConfig, SimulatorConfig
from llmd_fleet.plan.fleet import RolePlan

SIMULATOR_NAME = "simulator"
TMP_PATH = "/tmp"
TMP_SIZE_MIB = 64

# Every flag the pinned simulator's parser registers (pkg/common/parser.go, v0.10.2), with the
# kind of value it takes: `int`, `float`, `duration` (Go time.ParseDuration), `string`, `bool`
# (pflag bool: bare `--flag` means true), `toggle` (no value), `strings` (one or more words).
SIMULATOR_FLAGS: dict[str, str] = {
    "port": "int",
    "max-request-body-size-mb": "int",
    "model": "string",
    "max-num-seqs": "int",
    "max-waiting-queue-length": "int",
    "max-loras": "int",
    "max-cpu-loras": "int",
    "max-model-len": "int",
    "mode": "string",
    "inter-token-latency": "duration",
    "time-to-first-token": "duration",
    "prefill-overhead": "duration",
    "prefill-time-per-token": "duration",
    "prefill-time-std-dev": "duration",
    "kv-cache-transfer-time-per-token": "duration",
    "kv-cache-transfer-time-std-dev": "duration",
    "kv-cache-transfer-latency": "duration",
    "inter-token-latency-std-dev": "duration",
    "time-to-first-token-std-dev": "duration",
    "kv-cache-transfer-latency-std-dev": "duration",
    "seed": "int",
    "time-factor-under-load": "float",
    "max-tool-call-integer-param": "int",
    "min-tool-call-integer-param": "int",
    "max-tool-call-number-param": "float",
    "min-tool-call-number-param": "float",
    "max-tool-call-array-param-length": "int",
    "min-tool-call-array-param-length": "int",
    "tool-call-not-required-param-probability": "int",
    "object-tool-call-not-required-field-probability": "int",
    "enable-kvcache": "bool",
    "kv-cache-size": "int",
    "global-cache-hit-threshold": "float",
    "block-size": "int",
    "hash-seed": "string",
    "zmq-endpoint": "string",
    "event-batch-size": "int",
    "use-vllm-map-event-format": "bool",
    "data-parallel-size": "int",
    "data-parallel-rank": "int",
    "dataset-path": "string",
    "dataset-url": "string",
    "dataset-in-memory": "bool",
    "dataset-table-name": "string",
    "render-url": "string",
    "render-timeout": "duration",
    "mm-render-timeout": "duration",
    "force-dummy-tokenizer": "bool",
    "startup-duration": "duration",
    "enable-request-id-headers": "bool",
    "log-http": "bool",
    "failure-injection-rate": "int",
    "failure-types": "strings",
    "ssl-certfile": "string",
    "ssl-keyfile": "string",
    "self-signed-certs": "bool",
    "latency-calculator": "string",
    "default-embedding-dimensions": "int",
    "fake-metrics-refresh-interval": "duration",
    "image-emission-rate": "int",
    "time-to-generate-image": "duration",
    "time-to-generate-image-std-dev": "duration",
    "mm-processor-kwargs": "string",
    "ec-transfer-config": "string",
    "enforce-eager": "toggle",
    "no-enforce-eager": "toggle",
    "enable-prefix-caching": "toggle",
    "no-enable-prefix-caching": "toggle",
    "enable-sleep-mode": "toggle",
    "no-enable-sleep-mode": "toggle",
    "mm-encoder-only": "toggle",
    "no-mm-encoder-only": "toggle",
    "omni": "toggle",
    "no-omni": "toggle",
    "config": "string",
    "served-model-name": "strings",
    "lora-modules": "strings",
    "fake-metrics": "strings",
    # klog.InitFlags adds its flags to the same set; of those only the verbosity is listed.
    "v": "int",
}

# The metric families the pinned simulator registers (pkg/llm-d-inference-sim/metrics.go
# constants, v0.10.2): vLLM's names for what it emulates. Everything vLLM exposes beyond these
# (preemptions, NIXL transfers, the CPU tier, speculative decoding, prompt tokens by source) stays
# absent on a simulator stack, so the alerts and panels reading them stay quiet there
# (docs/local-sim.md).
SIMULATOR_METRICS: tuple[str, ...] = (
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:max_num_generation_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_params_max_tokens",
    "vllm:request_prompt_tokens",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:request_success_total",
    "vllm:lora_requests_info",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:cache_config_info",
    "vllm:prefix_cache_hits",
    "vllm:prefix_cache_queries",
)


def simulator_argv(model: ModelConfig, role: RoleConfig, plan: RolePlan, sim: SimulatorConfig) -> list[str]:
    """The simulator's args (its image's entrypoint is the binary). One `--flag=value` word per
    flag, so that no value is ever read as a flag, but for the served names: a list of words, as
    in vLLM. `$(POD_IP)` is not needed in any of them."""
    argv = [
        f"--model={model.id}",
        # The simulator reads this flag's values as vLLM does, every word up to the next flag
        # (pkg/common/parser.go getParamValueFromArgs at v0.10.2); names never start with '-'.
        "--served-model-name",
        *served_model_names(model),
        f"--port={plan.engine_ports[0]}",
        f"--data-parallel-size={plan.dp_size_local}",
        f"--max-model-len={role.max_model_len}",
        f"--mode={sim.mode}",
        # Per-token timing: prefill time counts only the prompt tokens the emulated prefix cache
        # does not hold; decode with do_remote_prefill waits the emulated KV transfer instead.
        f"--prefill-overhead={sim.prefill_overhead_ms}ms",
        f"--prefill-time-per-token={sim.prefill_time_per_token_us}us",
        f"--inter-token-latency={sim.inter_token_latency_ms}ms",
        f"--kv-cache-transfer-time-per-token={sim.kv_cache_transfer_time_per_token_us}us",
        f"--time-factor-under-load={sim.time_factor_under_load:g}",
        # The emulated prefix cache: blocks per rank and tokens per block, as vLLM's HBM cache.
        "--enable-kvcache=true",
        f"--kv-cache-size={sim.kv_cache_blocks}",
        f"--block-size={role.block_size}",
        # No KV-event publisher: nothing consumes its events in this layout (approximate prefix
        # routing; config/fleet.py _simulator_problems says why precise cannot).
        "--zmq-endpoint=",
        # Token ids from the simulator's own tokenizer: nothing is downloaded from the model hub.
        "--force-dummy-tokenizer=true",
    ]
    if role.max_num_seqs is not None:
        argv.append(f"--max-num-seqs={role.max_num_seqs}")
    return argv


def simulator_env() -> list[dict[str, Any]]:
    """POD_IP names the pod in the emulated cache (the simulator refuses to start its KV cache
    without it); POD_NAME and POD_NAMESPACE are what it reports about itself."""
    return [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]


def simulator_container(
    model: ModelConfig, role: RoleConfig, plan: RolePlan, sim: SimulatorConfig, image: str
) -> dict[str, Any]:
    """The engine container of a simulator pod: every local rank's port, probes on rank 0 (the
    simulator has no DP supervisor; all ranks live and die with its one process)."""
    prefix = "rank" if plan.name == "prefill" else "vllm-rank"
    resources = {"cpu": f"{plan.pod_cpu_millis}m", "memory": f"{plan.pod_memory_mib}Mi"}
    first = f"{prefix}0"
    return {
        "name": SIMULATOR_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": simulator_argv(model, role, plan, sim),
        "env": simulator_env(),
        "ports": [
            {"name": f"{prefix}{i}", "containerPort": port, "protocol": "TCP"}
            for i, port in enumerate(plan.engine_ports)
        ],
        # Requests equal limits: Guaranteed QoS, like the vLLM pods.
        "resources": {"requests": dict(resources), "limits": resources},
        "securityContext": restricted_container_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_PATH}],
        "startupProbe": {
            "httpGet": {"path": "/health", "port": first},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 30,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": first},
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/health/ready", "port": first},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
    }
