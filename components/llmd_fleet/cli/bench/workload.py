"""The benchmark Job of a stack, as pure builders: the agentic traffic shape, the inference-perf
workload file, and the Kubernetes objects that run it (ConfigMap, Job, NetworkPolicy and, for
an in-cluster gateway, a Service over the gateway's proxies).

Everything comes from the stack config: the gateway and its listener port (`gateway`), the
session header the router keys affinity on (`router.sessionAffinity.header`), the model, its
revision and context window (`model`), the serving namespace and its HF token Secret
(`serving`, `hfToken`), and where Prometheus answers (`observability`). Nothing here is part of
the stack program: only `llmd-fleet bench` renders these objects (docs/benchmark.md).

inference-perf field names are those of its config models at the pinned release
(inference_perf/config/: apis/config.py APIConfig, client/modelserver/config.py
ModelServerClientConfig, utils/config.py CustomTokenizerConfig, datagen/config.py DataConfig,
datagen/replay.py SyntheticAgenticConfig, loadgen/config.py LoadConfig and
TraceSessionReplayLoadStage, metrics/config.py MetricsClientConfig,
client/server_metrics/config.py PrometheusClientConfig, reportgen/config.py ReportConfig,
client/filestorage/config.py StorageConfig); `make bench-workload` validates the rendered file
with those models.
"""

import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from llmd_fleet.config.grammar import ipv4_address_problem, service_url_problem, url_port
from llmd_fleet.config.model import client_model_name
from llmd_fleet.core.netpol import dns_egress, model_hub_egress, namespace, tcp
from llmd_fleet.core.pod_context import restricted_container_context, restricted_pod_context
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.layers.gateway.specs import (
    GATEWAY_NAME,
    GATEWAY_NAME_LABEL,
    gateway_proxies,
)
from llmd_fleet.layers.serving.specs import HF_TOKEN_SECRET
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.targets.specs import cluster_ranges
from llmd_fleet.versions import versions

# --- The traffic shape (issue #23; shared/DESIGN.md: median request ~195k input tokens, ~317
# output tokens, >= 90% of each main-agent turn repeating the previous turn's input, bursts of
# parallel sub-agents). The numbers are inference-perf `synthetic_agentic` inputs; what a run
# realised is in its report (median input and output tokens, printed by `llmd-fleet bench-summary`).

REFERENCE_CONTEXT = 202_752
"""The context window the shape below is sized for (GLM-5.2's `maxContextTokens`, which the
reference stacks serve as every role's `maxModelLen`)."""
SYSTEM_HEAD_TOKENS = 16_000
"""The standing system prompt every agent call opens with (`shared_system_prompt_len`): the
coding agent's instructions and policies, identical across sessions."""
TOOL_CATALOG = 8
"""Tools advertised per agent (`tool_catalog_size_per_agent`, fixed)."""
CATALOG_TOKENS_PER_TOOL = 380
"""inference-perf's own worst-case tokens per advertised tool (SyntheticAgenticConfig's
max_model_len check, datagen/replay.py): used here so the shape passes that check."""
OUTPUT_MEAN, OUTPUT_STD, OUTPUT_MIN, OUTPUT_MAX = 317, 100, 32, 480
"""Output tokens of a plain-text answer (lognormal around the issue's ~317)."""
TOOL_LOOP_MIN, TOOL_LOOP_MAX = 6, 10
"""Tool-loop iterations per agent run (uniform): each is a model call whose input is the previous
call's input plus one tool call and its result, so it repeats well over 90% of it. Of a main
agent's 7-11 calls, all but the first repeat the previous one."""
INPUT_HEADROOM = 1_500
"""Distance of the per-turn input's mean below its ceiling (normal, std INPUT_STD)."""
INPUT_STD = 3_000
FANOUT_PROBABILITY = 0.3
"""Chance that an agent spawns a burst of sub-agents (`fanout_probability`)."""
SUB_AGENTS_MIN, SUB_AGENTS_MAX = 2, 6
"""Sub-agents per burst (uniform); they run in parallel."""
MAX_DEPTH = 1
"""Sub-agents spawn no sub-agents of their own."""
MAX_EVENTS_PER_SESSION = 128
"""inference-perf's per-session event budget: a root run (up to 11 calls) plus a burst of up to
6 sub-agent runs (up to 11 calls each) stays under it."""
TOOL_LATENCY_MEAN_S = 2.0
"""Seconds a tool takes between an agent's calls (normal, 0.5-8 s): the agent holds no GPU."""
MIN_INPUT_TOKENS = 1_024
"""A per-turn input smaller than this leaves no agentic shape: the context window is too small."""

STAGE_SIXTHS = (1, 2, 4, 6)
"""Concurrent agents (sessions) per stage by default, in sixths of the stack's declared
`workload.agents`: the published ladder 500, 1,000, 2,000, 3,000 up to the 3,000 agents its
figures ran (the workload's default), scaled to the agents a stack declares."""
MAX_STAGES = 10
MAX_AGENTS = 100_000
STAGE_RAMP_SECONDS = 60
"""Each stage starts its sessions over about a minute (`session_rate`), not all at once."""
STAGE_TIMEOUT_SECONDS = 3_600
"""Wall-clock limit of one stage (`timeout`): in-flight sessions are cancelled after it."""
SEED = 42

# --- The Job.
CONFIG_DIR = "/etc/llmd-fleet-bench"
CONFIG_FILE = "config.yml"
TOKENIZER_DIR = "/work/tokenizer"
REPORTS_DIR = "/work/reports"
HF_HOME = "/work/huggingface"
TOKENIZER_FILES = ("*.json", "*.jinja", "*.model", "*.tiktoken", "*.txt")
"""What the init container takes from the model repository: the tokenizer, its config and chat
template, never the weights (`hf download --include`)."""
WORKERS = 16
"""inference-perf worker processes (`load.num_workers`); the pod gets one CPU each."""
MEMORY_GIB = 64
"""The pod's memory: the generated sessions (~200k tokens of text each) are held in memory."""
PROMETHEUS_PORT = 9090
PROMETHEUS_SERVICE = "prometheus-operated"
"""The governing Service prometheus-operator creates for the Prometheus instances of a namespace
unless one sets `spec.serviceName`, port 9090 (prometheus-operator v0.93.0,
pkg/prometheus/server/statefulset.go `governingServiceName`, pkg/prometheus/common.go
BuildStatefulSetService)."""
REPORT_MARKER = "==> llmd-fleet-bench report "
"""Start of the line before each report file the Job prints to its log; `llmd-fleet
bench-summary` reads the files back from that log."""
REPORT_END = "==> llmd-fleet-bench end <=="


class BenchError(Exception):
    """The stack or the options cannot make a benchmark (bad input: exit 2)."""


@dataclass(frozen=True)
class BenchOptions:
    """What `llmd-fleet bench` takes besides the stack."""

    stages: tuple[int, ...] | None = None
    """Concurrent agents per stage, ascending; None: from the stack's workload (`default_stages`)."""
    gateway_address: str | None = None
    """The gateway's address; required for a managed gateway (GKE's gke-l7-rilb), whose address
    only the cloud knows; refused for an in-cluster one."""
    prometheus_url: str | None = None
    """Prometheus to read server metrics from; default from `observability.prometheus`."""


def default_stages(agents: int) -> tuple[int, ...]:
    """The stages for `agents` declared agents: STAGE_SIXTHS of them, rounded half up, at least
    1, each once (3,000 -> 500, 1,000, 2,000, 3,000; 16 -> 3, 5, 11, 16)."""
    return tuple(sorted({max(1, (agents * sixths + 3) // 6) for sixths in STAGE_SIXTHS}))


def stages_of(config: StackConfig, options: BenchOptions) -> tuple[int, ...]:
    """`--stages` when given, else the default stages of the stack's `workload.agents`."""
    return options.stages if options.stages is not None else default_stages(config.workload.agents)


def parse_stages(text: str) -> tuple[int, ...]:
    """`500,1000,3000` -> (500, 1000, 3000): ascending, 1-100000 agents, at most 10 stages."""
    parts = text.split(",")
    if not 1 <= len(parts) <= MAX_STAGES:
        raise BenchError(f"--stages {text[:80]!r}: give 1 to {MAX_STAGES} comma-separated agent counts")
    stages: list[int] = []
    for part in parts:
        if not re.fullmatch(r"[0-9]{1,6}", part.strip()):
            raise BenchError(f"--stages {text[:80]!r}: {part.strip()[:20]!r} is not a whole number of agents")
        value = int(part)
        if not 1 <= value <= MAX_AGENTS:
            raise BenchError(f"--stages: {value} agents is outside 1-{MAX_AGENTS}")
        stages.append(value)
    if any(b <= a for a, b in itertools.pairwise(stages)):
        raise BenchError(f"--stages {text[:80]!r}: stages must rise strictly (e.g. 500,1000,3000)")
    return tuple(stages)


def check_options(config: StackConfig, options: BenchOptions) -> None:
    """Raise BenchError naming the option when `options` do not fit the stack."""
    managed = config.gateway.implementation in MANAGED_IMPLEMENTATIONS
    if options.gateway_address is not None:
        if not managed:
            raise BenchError(
                f"--gateway-address: the stack's gateway ({config.gateway.implementation}) runs in the "
                "cluster and is reached through its Service; the option is for a managed gateway"
            )
        if problem := ipv4_address_problem(options.gateway_address):
            raise BenchError(f"--gateway-address: {problem}")
    elif managed:
        raise BenchError(
            f"--gateway-address is required: the stack's gateway ({config.gateway.implementation}) is "
            "managed by the cloud, and only the cloud knows its address "
            "(kubectl get gateway -n NAMESPACE -o jsonpath='{.status.addresses[0].value}')"
        )
    if options.prometheus_url is not None and (problem := service_url_problem(options.prometheus_url)):
        raise BenchError(f"--prometheus-url {options.prometheus_url[:80]!r}: {problem}")
    if options.stages is not None and not options.stages:
        raise BenchError("--stages: at least one stage")
    shape(config)  # a context window too small for the shape is refused here


# --- The shape, fitted to the model's context window.


@dataclass(frozen=True)
class Shape:
    """The token shape of the workload for one model."""

    system_head: int
    input_max: int
    input_mean: int
    max_model_len: int

    @property
    def loop_peak(self) -> int:
        """Tokens a full tool loop adds in inference-perf's worst-case estimate: each iteration
        one output-sized call and one output-sized result."""
        return TOOL_LOOP_MAX * (OUTPUT_MAX + OUTPUT_MAX)

    @property
    def peak_request(self) -> int:
        """inference-perf's projected largest request (prompt plus output) of this shape."""
        catalog = TOOL_CATALOG * CATALOG_TOKENS_PER_TOOL
        return self.system_head + catalog + self.input_max + self.loop_peak + OUTPUT_MAX


def served_context(config: StackConfig) -> int:
    """The longest request the engines accept: the roles' `maxModelLen` (prefill's equals
    decode's, and neither exceeds `model.maxContextTokens`; llmd_fleet/config/fleet.py)."""
    roles = config.serving.roles
    return min(roles.prefill.max_model_len, roles.decode.max_model_len)


def shape(config: StackConfig) -> Shape:
    """The reference shape for a model served with GLM-5.2's window, scaled down for a smaller
    one: the system head in proportion, the per-turn input filling what is left below the
    served window by inference-perf's own worst-case estimate (so its max_model_len check
    passes). A window larger than the reference keeps the reference shape."""
    window = served_context(config)
    head = SYSTEM_HEAD_TOKENS * min(window, REFERENCE_CONTEXT) // REFERENCE_CONTEXT
    catalog = TOOL_CATALOG * CATALOG_TOKENS_PER_TOOL
    loop = TOOL_LOOP_MAX * 2 * OUTPUT_MAX
    room = min(window, REFERENCE_CONTEXT) - head - catalog - loop - OUTPUT_MAX
    if room < MIN_INPUT_TOKENS + INPUT_HEADROOM:
        raise BenchError(
            f"llmd-fleet:serving.roles.decode.maxModelLen: {window} tokens leave no room for an agentic "
            f"turn (system head {head}, tool catalog {catalog}, tool loop {loop}, output {OUTPUT_MAX})"
        )
    return Shape(system_head=head, input_max=room, input_mean=room - INPUT_HEADROOM, max_model_len=window)


# --- Names and addresses.


def bench_name(config: StackConfig) -> str:
    """Name of every bench object: the serving name with `-bench` (a DNS label: the serving name
    is at most 24 characters)."""
    return f"{config.serving.name}-bench"


def bench_labels(config: StackConfig) -> dict[str, str]:
    labels = common_labels("bench", config.serving.name)
    # Applied with kubectl, never by Pulumi: the stack's state does not hold these objects.
    labels["app.kubernetes.io/managed-by"] = "llmd-fleet-bench"
    return labels


def bench_selector(config: StackConfig) -> dict[str, str]:
    return {"app.kubernetes.io/component": "bench", "app.kubernetes.io/instance": config.serving.name}


def gateway_service_name(config: StackConfig) -> str:
    return f"{bench_name(config)}-gateway"


def gateway_url(config: StackConfig, options: BenchOptions) -> str:
    """The base URL the load generator sends to. In-cluster gateways (agentgateway, istio): port
    80 of the bench's Service over the Gateway's proxy pods (selected by the label the
    implementations put on them, as the NetworkPolicies select them), whose DNS name is the same
    for every implementation. A managed gateway: its address on the listener port."""
    if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
        assert options.gateway_address is not None, "check_options requires it"
        return f"http://{options.gateway_address}:{config.gateway.listener_port}"
    return f"http://{gateway_service_name(config)}.{config.serving.namespace}.svc"


def prometheus_config(config: StackConfig, options: BenchOptions) -> dict[str, Any] | None:
    """inference-perf's `metrics` section, or None when the stack has no Prometheus to ask.
    `operator`/`install`: prometheus-operator's `prometheus-operated` Service in the
    observability namespace; `gmp`: Google Cloud Managed Service for Prometheus
    (`google_managed`); `none`: no server metrics unless --prometheus-url names one."""
    obs = config.observability
    filters = [f'namespace="{config.serving.namespace}"']
    common = {"scrape_interval": obs.scrape_interval_seconds, "filters": filters}
    if options.prometheus_url is not None:
        url = options.prometheus_url
    elif obs.prometheus in ("operator", "install"):
        url = f"http://{PROMETHEUS_SERVICE}.{obs.namespace}.svc:{PROMETHEUS_PORT}"
    elif obs.prometheus == "gmp":
        return {"type": "prometheus", "prometheus": {**common, "google_managed": True}}
    else:
        return None
    return {"type": "prometheus", "prometheus": {**common, "url": url}}


# --- The workload file.


def _normal(mean: float, std: float, low: int, high: int) -> dict[str, Any]:
    return {"type": "normal", "mean": mean, "std_dev": std, "min": low, "max": high}


def _uniform(low: int, high: int) -> dict[str, Any]:
    return {"type": "uniform", "min": low, "max": high}


def _fixed(value: int) -> dict[str, Any]:
    return {"type": "fixed", "mean": value, "min": value, "max": value}


def workload(config: StackConfig, options: BenchOptions) -> dict[str, Any]:
    """inference-perf's config: OpenAI chat completions, streamed, with the router's session
    header on every request of a session; synthetic agentic sessions (a root agent's tool loop
    over a ~195k-token context, bursts of parallel sub-agents); one trace-session-replay stage
    per concurrency level; server metrics from Prometheus; reports under REPORTS_DIR."""
    check_options(config, options)
    model = config.model
    fitted = shape(config)
    stages = stages_of(config, options)
    sessions = sum(stages)
    per_worker = math.ceil(max(stages) / WORKERS)
    document: dict[str, Any] = {
        "api": {
            "type": "chat",
            "streaming": True,
            "session_id_header_key": config.router.session_affinity.header,
        },
        "server": {
            "type": "vllm",
            "model_name": client_model_name(model),
            "base_url": gateway_url(config, options),
            "ignore_eos": True,
        },
        # Loaded from the files the init container downloaded at the stack's model revision
        # (inference-perf's tokenizer config has no revision of its own).
        "tokenizer": {
            "pretrained_model_name_or_path": TOKENIZER_DIR,
            "trust_remote_code": model.trust_remote_code,
        },
        "data": {
            "type": "synthetic_agentic",
            "synthetic_agentic": {
                "num_sessions": sessions,
                "seed": SEED,
                "shared_system_prompt_len": fitted.system_head,
                "input_tokens_per_turn": _normal(
                    fitted.input_mean,
                    INPUT_STD,
                    max(fitted.input_mean - 4 * INPUT_STD, fitted.input_mean // 2),
                    fitted.input_max,
                ),
                "output_tokens_per_turn": {
                    "type": "lognormal",
                    "mean": OUTPUT_MEAN,
                    "std_dev": OUTPUT_STD,
                    "min": OUTPUT_MIN,
                    "max": OUTPUT_MAX,
                },
                "turns_per_session": _fixed(1),
                "tool_loop_depth": _uniform(TOOL_LOOP_MIN, TOOL_LOOP_MAX),
                "tool_catalog_size_per_agent": _fixed(TOOL_CATALOG),
                "parallel_tool_calls_per_step": _fixed(1),
                "tool_call_latency_sec": _normal(TOOL_LATENCY_MEAN_S, 1.0, 0, 8),
                "fanout_probability": FANOUT_PROBABILITY,
                "sub_agents_per_spawn": _uniform(SUB_AGENTS_MIN, SUB_AGENTS_MAX),
                "max_depth": MAX_DEPTH,
                "max_events_per_session": MAX_EVENTS_PER_SESSION,
                "max_model_len": fitted.max_model_len,
            },
        },
        "load": {
            "type": "trace_session_replay",
            "num_workers": WORKERS,
            "worker_max_concurrency": per_worker,
            # A fixed seed: the default is the clock, and the file must render the same twice.
            "base_seed": SEED,
            "request_timeout": float(config.gateway.request_timeout_seconds),
            "stages": [
                {
                    "concurrent_sessions": agents,
                    "num_sessions": agents,
                    "session_rate": max(round(agents / STAGE_RAMP_SECONDS, 3), 1.0),
                    "timeout": float(STAGE_TIMEOUT_SECONDS),
                }
                for agents in stages
            ],
        },
        "report": {
            "request_lifecycle": {"summary": True, "per_stage": True, "per_request": False},
            "session_lifecycle": {"summary": True, "per_stage": True, "per_session": False},
        },
        "storage": {"local_storage": {"path": REPORTS_DIR}},
    }
    metrics = prometheus_config(config, options)
    if metrics is not None:
        document["metrics"] = metrics
        document["report"]["prometheus"] = {"summary": True, "per_stage": True}
    else:
        # No Prometheus: inference-perf's default report would ask a client that is not there.
        document["report"]["prometheus"] = None
    return document


# --- The Kubernetes objects.

_PRINT_REPORTS = f"""set -u
inference-perf --config_file {CONFIG_DIR}/{CONFIG_FILE}
status=$?
for f in {REPORTS_DIR}/summary_*.json {REPORTS_DIR}/stage_*.json; do
  [ -f "$f" ] || continue
  echo "{REPORT_MARKER}$(basename "$f") <=="
  cat "$f"
  echo
done
echo "{REPORT_END}"
exit $status
"""


def _job_timeout(config: StackConfig, options: BenchOptions) -> int:
    """activeDeadlineSeconds: every stage's timeout, plus an hour for data generation, the
    tokenizer download and the reports."""
    return len(stages_of(config, options)) * STAGE_TIMEOUT_SECONDS + 3_600


def job(config: StackConfig, options: BenchOptions, config_map_name: str) -> dict[str, Any]:
    """The Job: an init container downloads the tokenizer at the stack's model revision from the
    model hub (HF_TOKEN from the stack's Secret when `hfToken` is set), then inference-perf runs
    the workload and prints its summary report files to the log. Runs once (no retries: a
    second attempt would mix two runs), restricted pod, no service-account token."""
    model = config.model
    image = versions().image("inference-perf").ref
    env_common: list[dict[str, Any]] = [
        {"name": "HF_HOME", "value": HF_HOME},
        {"name": "HOME", "value": "/work/home"},
    ]
    token_env: list[dict[str, Any]] = []
    if config.has_hf_token:
        token_env.append(
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "HF_TOKEN"}}}
        )
    download = ["hf", "download", model.id, "--revision", model.revision, "--local-dir", TOKENIZER_DIR]
    for pattern in TOKENIZER_FILES:
        download += ["--include", pattern]
    volume_mounts = [
        {"name": "work", "mountPath": "/work"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    small = {"cpu": "1", "memory": "2Gi"}
    big = {"cpu": str(WORKERS), "memory": f"{MEMORY_GIB}Gi"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": bench_name(config),
            "namespace": config.serving.namespace,
            "labels": bench_labels(config),
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": _job_timeout(config, options),
            # The log (the reports) stays readable for a week after the run.
            "ttlSecondsAfterFinished": 7 * 86_400,
            "template": {
                "metadata": {"labels": bench_labels(config)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_context(),
                    "initContainers": [
                        {
                            "name": "tokenizer",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": download,
                            "env": [*env_common, *token_env],
                            "resources": {"requests": dict(small), "limits": dict(small)},
                            "securityContext": restricted_container_context(),
                            "volumeMounts": volume_mounts,
                        }
                    ],
                    "containers": [
                        {
                            "name": "inference-perf",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/sh", "-c", _PRINT_REPORTS],
                            # Everything the run needs is local by now: no hub access.
                            "env": [*env_common, {"name": "HF_HUB_OFFLINE", "value": "1"}],
                            "resources": {"requests": dict(big), "limits": dict(big)},
                            "securityContext": restricted_container_context(),
                            "volumeMounts": [
                                *volume_mounts,
                                {"name": "workload", "mountPath": CONFIG_DIR, "readOnly": True},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "workload", "configMap": {"name": config_map_name}},
                        {"name": "work", "emptyDir": {"sizeLimit": "20Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
                    ],
                },
            },
        },
    }


def config_map(config: StackConfig, name: str, workload_yaml: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": config.serving.namespace, "labels": bench_labels(config)},
        "data": {CONFIG_FILE: workload_yaml},
    }


def network_policy(config: StackConfig, options: BenchOptions) -> dict[str, Any]:
    """The bench pod's own flows in the serving namespace's default-deny: no ingress; egress to
    cluster DNS, the gateway (its proxy pods on the listener port, or a managed gateway's
    address), Prometheus, and TCP 443 outside the cluster's ranges (the model hub for the
    tokenizer; GKE's managed Prometheus API)."""
    if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
        assert options.gateway_address is not None, "check_options requires it"
        gateway_peer: dict[str, Any] = {"ipBlock": {"cidr": f"{options.gateway_address}/32"}}
    else:
        gateway_peer = gateway_proxies()
    egress: list[dict[str, Any]] = [
        dns_egress(),
        {"to": [gateway_peer], "ports": tcp(config.gateway.listener_port)},
        model_hub_egress(cluster_ranges(config)),
    ]
    metrics = prometheus_config(config, options)
    if metrics is not None and options.prometheus_url is None and "url" in metrics["prometheus"]:
        egress.append({"to": [namespace(config.observability.namespace)], "ports": tcp(PROMETHEUS_PORT)})
    elif options.prometheus_url is not None:
        egress.append({"ports": tcp(url_port(options.prometheus_url))})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": bench_name(config),
            "namespace": config.serving.namespace,
            "labels": bench_labels(config),
        },
        "spec": {
            "podSelector": {"matchLabels": bench_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "egress": egress,
        },
    }


def gateway_service(config: StackConfig) -> dict[str, Any] | None:
    """In-cluster gateways: a ClusterIP Service over the Gateway's proxy pods, port 80 to the
    listener (what the Responses layer's upstream Service does, llmd_fleet/layers/responses/component.py).
    None for a managed gateway."""
    if config.gateway.implementation in MANAGED_IMPLEMENTATIONS:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": gateway_service_name(config),
            "namespace": config.serving.namespace,
            "labels": bench_labels(config),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {GATEWAY_NAME_LABEL: GATEWAY_NAME},
            "ports": [
                {"name": "http", "port": 80, "targetPort": config.gateway.listener_port, "protocol": "TCP"}
            ],
        },
    }


def bench_files(config: StackConfig, options: BenchOptions) -> dict[str, str]:
    """Relative path -> text of everything `llmd-fleet bench` writes: the workload file (also the
    ConfigMap's data) and one manifest per object under manifests/."""
    from llmd_fleet.cli.render import to_yaml

    name = bench_name(config)
    workload_yaml = to_yaml(workload(config, options))
    objects = [config_map(config, name, workload_yaml), network_policy(config, options)]
    if (service := gateway_service(config)) is not None:
        objects.append(service)
    objects.append(job(config, options, name))
    files = {"workload.yaml": workload_yaml}
    for obj in objects:
        files[f"manifests/{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"] = to_yaml(obj)
    return files
