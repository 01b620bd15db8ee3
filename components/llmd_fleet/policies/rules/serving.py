"""Serving pods: every role runs an engine this pack can check, memory-backed /dev/shm, a startup
probe that outlasts the model load, a memory limit that holds the CPU KV tier, a grace period that
outlasts the engine's drain, and ModelExpress ports clear of the fleet's."""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Resource, as_int, dig, gib, parse_quantity, resource_rule, schema
from llmd_fleet.policies.rules._config import GPU_RESOURCES
from llmd_fleet.policies.rules._k8s import (
    WORKLOAD_TYPES,
    Container,
    PodTemplate,
    container,
    device_plugin_gpus,
    env_literal,
    pod_templates,
)
from llmd_fleet.policies.rules._serve import ServeArgs, data_parallel_local, engine_ports, kv_connectors
from llmd_fleet.policies.rules._serving import ServingRole, serving_roles

SHM_PATH = "/dev/shm"


def _roles(resource: Resource) -> list[ServingRole]:
    return serving_roles([resource])


def _engine(role: ServingRole, template: PodTemplate) -> Container | None:
    return container(template.spec, role.args.container_name)


def _memory_volumes(template: PodTemplate) -> dict[str, dict[str, Any]]:
    return {
        str(v.get("name")): v
        for v in template.spec.get("volumes") or []
        if isinstance(v, dict) and dig(v, "emptyDir", "medium") == "Memory"
    }


def _check_shm(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in _roles(resource):
        for template in role.templates:
            engine = _engine(role, template)
            if engine is None:
                continue
            mount = next(
                (m for m in engine.spec.get("volumeMounts") or [] if m.get("mountPath") == SHM_PATH), None
            )
            volume = _memory_volumes(template).get(str((mount or {}).get("name")))
            if mount is None or volume is None:
                report(
                    f"{template.where()}: container {engine.name} has no memory-backed {SHM_PATH}; the "
                    "runtime's 64 MiB default breaks NCCL, DeepEP and torch IPC"
                )
            elif dig(volume, "emptyDir", "sizeLimit") is None:
                report(
                    f"{template.where()}: the memory-backed {SHM_PATH} volume {volume.get('name')} "
                    "has no sizeLimit"
                )


serving_shm_memory_backed = resource_rule(
    name="serving-shm-memory-backed",
    description="Every vLLM container mounts a size-limited, memory-backed emptyDir at /dev/shm.",
    remediation="Add a volume `{name: dshm, emptyDir: {medium: Memory, sizeLimit: <N>Gi}}` and mount "
    "it at /dev/shm in the vllm container (the plan sizes it at 1 GiB per local DP rank).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_shm,
    tags=["serving"],
)


def _check_startup(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in _roles(resource):
        for template in role.templates:
            engine = _engine(role, template)
            if engine is None:
                continue
            timeout = as_int(env_literal(engine.spec, "VLLM_ENGINE_READY_TIMEOUT_S"))
            required = timeout if timeout is not None else round(cfg["modelLoadMinutes"] * 60)
            source = (
                "VLLM_ENGINE_READY_TIMEOUT_S" if timeout is not None else "the configured model load time"
            )
            probe = engine.spec.get("startupProbe")
            if not isinstance(probe, dict):
                report(
                    f"{template.where()}: container {engine.name} has no startupProbe for a {required} s load"
                )
                continue
            delay = as_int(probe.get("initialDelaySeconds")) or 0
            period = as_int(probe.get("periodSeconds")) or 10
            failures = as_int(probe.get("failureThreshold")) or 3
            budget = delay + period * failures
            if budget < required:
                report(
                    f"{template.where()}: the startup probe gives up after {budget} s "
                    f"({delay} + {period} x {failures}) but {source} is {required} s; the kubelet "
                    "restarts the pod before the weights are loaded"
                )


startup_probe_budget = resource_rule(
    name="startup-probe-budget",
    description="The vLLM container's startup probe waits at least as long as the model takes to load.",
    remediation="Set the startup probe's `failureThreshold` x `periodSeconds` (+ initialDelaySeconds) to "
    "at least `serving.modelLoadMinutes` x 60 (the VLLM_ENGINE_READY_TIMEOUT_S the pod sets).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_startup,
    config=schema(
        {
            "modelLoadMinutes": {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": 45,
                "description": "Model load time to hold probes to when the pod does not set "
                "VLLM_ENGINE_READY_TIMEOUT_S.",
            }
        }
    ),
    tags=["serving", "availability"],
)


def cpu_kv_bytes_per_engine(args: ServeArgs, engine: Container) -> tuple[float, str] | None:
    """Host memory one engine (DP rank) pins for its CPU KV tier, and where that comes from."""
    for conn in kv_connectors(args):
        size = as_int(dig(conn.config, "kv_connector_extra_config", "cpu_bytes_to_use"))
        if size:
            return float(size), f"{conn.name} cpu_bytes_to_use"
    offload = args.value("--kv-offloading-size")
    if offload is not None:
        try:
            return float(offload) * 2**30, "--kv-offloading-size"
        except ValueError:
            return None
    lmcache = env_literal(engine.spec, "LMCACHE_MAX_LOCAL_CPU_SIZE")
    if lmcache is not None and any(c.name.startswith("LMCache") for c in kv_connectors(args)):
        try:
            return float(lmcache) * 2**30, "LMCACHE_MAX_LOCAL_CPU_SIZE"
        except ValueError:
            return None
    return None


def _check_kv_memory(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in _roles(resource):
        engines = data_parallel_local(role.args, role.group_size) or 1
        for template in role.templates:
            engine = _engine(role, template)
            if engine is None:
                continue
            limit = parse_quantity(dig(engine.spec, "resources", "limits", "memory"))
            if limit is None:
                report(f"{template.where()}: container {engine.name} has no memory limit")
                continue
            tier = cpu_kv_bytes_per_engine(role.args, engine)
            shm = sum(
                parse_quantity(dig(v, "emptyDir", "sizeLimit")) or 0
                for v in _memory_volumes(template).values()
            )
            overhead = cfg["hostMemoryPerEngineGiB"] * 2**30 * engines
            # vLLM's OffloadingConnector keeps the CPU tier in one shared region under /dev/shm
            # (vllm/v1/kv_offload/cpu/shared_offload_region.py), so there the tier is part of the
            # memory-backed volume, which must be large enough to hold it.
            in_shm = tier is not None and "OffloadingConnector" in tier[1]
            if tier and in_shm and shm < tier[0] * engines:
                report(
                    f"{template.where()}: /dev/shm ({gib(shm)} GiB) is smaller than the CPU KV tier "
                    f"vLLM maps there ({engines} x {gib(tier[0])} GiB); the engine fails to allocate it"
                )
            tier_outside_shm = tier[0] * engines if tier and not in_shm else 0
            needed = tier_outside_shm + max(shm, tier[0] * engines if tier and in_shm else 0) + overhead
            if limit < needed:
                parts = [f"{engines} engine(s) x {cfg['hostMemoryPerEngineGiB']} GiB"]
                if tier:
                    parts.insert(0, f"CPU KV tier {engines} x {gib(tier[0])} GiB ({tier[1]})")
                if shm:
                    parts.append(f"{gib(shm)} GiB memory-backed volumes")
                report(
                    f"{template.where()}: memory limit {gib(limit)} GiB is below the {gib(needed)} GiB "
                    f"the pod pins ({' + '.join(parts)}); the kernel OOM-kills the engine under load"
                )


kv_tier_memory_limit = resource_rule(
    name="kv-tier-memory-limit",
    description="A serving pod's memory limit covers its CPU KV tier, its memory-backed volumes and "
    "the engines' own host memory.",
    remediation="Raise the vllm container's memory limit (and request) to at least engines x "
    "(cpu_bytes_to_use + hostMemoryPerEngineGiB) + /dev/shm size, or shrink the CPU KV tier.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_kv_memory,
    config=schema(
        {
            "hostMemoryPerEngineGiB": {
                "type": "integer",
                "minimum": 0,
                "default": 8,
                "description": "Host memory one vLLM engine (DP rank) needs besides the KV tier.",
            }
        }
    ),
    tags=["serving", "kv-cache"],
)

# Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30


def _check_drain(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in _roles(resource):
        drain = role.args.int_value("--shutdown-timeout")
        if not drain:
            continue
        needed = drain + cfg["teardownSeconds"]
        for template in role.templates:
            grace = as_int(template.spec.get("terminationGracePeriodSeconds"))
            grace = DEFAULT_GRACE_SECONDS if grace is None else grace
            if grace < needed:
                report(
                    f"{template.where()}: terminationGracePeriodSeconds is {grace} but vLLM drains "
                    f"in-flight requests for up to {drain} s (--shutdown-timeout) and needs "
                    f"{cfg['teardownSeconds']} s more to free the GPUs; the kubelet kills the pod "
                    "mid-drain and its requests fail"
                )


drain_fits_grace_period = resource_rule(
    name="drain-fits-grace-period",
    description="Serving pods get enough termination grace for vLLM's drain plus GPU teardown.",
    remediation="Set `terminationGracePeriodSeconds` to at least `--shutdown-timeout` + teardownSeconds "
    "(llmd_fleet/layers/serving/pod.py derives it from `serving.drainSeconds`), or shorten the drain.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_drain,
    config=schema(
        {
            "teardownSeconds": {
                "type": "integer",
                "minimum": 0,
                "default": 30,
                "description": "Seconds a pod needs after the drain to stop its ranks and free GPU "
                "memory and NIXL registrations.",
            }
        }
    ),
    tags=["serving", "availability"],
)

# The ModelExpress client's port defaults (modelexpress envs.py at the tag images/versions.toml
# pins); each base is + the GPU's device index.
MX_PORT_DEFAULTS = {"MX_METADATA_PORT": 5555, "MX_WORKER_GRPC_PORT": 6555}
# The port prefixes pod.py names the ModelExpress container ports with.
MX_PORT_NAMES = ("mx-",)


def _mx_ranges(role: ServingRole, engine: Container) -> dict[str, range] | None:
    """The ModelExpress ports of a pod (by variable), or None when it does not load with it."""
    if (role.args.value("--load-format") or "").lower() not in ("modelexpress", "mx"):
        return None
    local = data_parallel_local(role.args, role.group_size) or 1
    gpus = local * (role.args.int_value("--tensor-parallel-size") or 1)
    ranges = {}
    for variable, default in MX_PORT_DEFAULTS.items():
        base = as_int(env_literal(engine.spec, variable))
        base = default if base is None else base
        ranges[variable] = range(base, base + gpus)
    return ranges


def _fleet_ports(role: ServingRole, template: PodTemplate) -> dict[int, str]:
    """Ports the pod's own containers and vLLM already use: every declared container port but the
    ModelExpress ones, the API ports and the DP coordinator's RPC port."""
    taken: dict[int, str] = {}
    for spec in (template.spec.get("containers") or []) + (template.spec.get("initContainers") or []):
        for port in (spec or {}).get("ports") or []:
            name = str(port.get("name") or "")
            number = as_int(port.get("containerPort"))
            if number is not None and not name.startswith(MX_PORT_NAMES):
                taken[number] = f"container port {name or number}"
    for port in engine_ports(role.args, role.group_size) or []:
        taken.setdefault(port, "the vLLM API")
    rpc = role.args.int_value("--data-parallel-rpc-port")
    if rpc is not None:
        taken[rpc] = "--data-parallel-rpc-port"
    return taken


def _check_mx_ports(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in _roles(resource):
        for template in role.templates:
            engine = _engine(role, template)
            ranges = None if engine is None else _mx_ranges(role, engine)
            if not ranges:
                continue
            taken = _fleet_ports(role, template)
            metadata, worker = ranges["MX_METADATA_PORT"], ranges["MX_WORKER_GRPC_PORT"]
            for variable, ports in ranges.items():
                clashes = sorted(p for p in ports if p in taken)
                if clashes:
                    report(
                        f"{template.where()}: ModelExpress {variable} {ports.start}-{ports.stop - 1} "
                        f"(one per GPU) collides with {', '.join(f'{p} ({taken[p]})' for p in clashes)}"
                    )
            if set(metadata) & set(worker):
                report(
                    f"{template.where()}: ModelExpress MX_METADATA_PORT {metadata.start}-"
                    f"{metadata.stop - 1} overlaps MX_WORKER_GRPC_PORT {worker.start}-{worker.stop - 1}"
                )


modelexpress_ports_clear = resource_rule(
    name="modelexpress-ports-clear",
    description="A pod that loads weights with ModelExpress gives its per-GPU NIXL and metadata ports "
    "room apart from every port the pod already uses.",
    remediation="Set MX_METADATA_PORT and MX_WORKER_GRPC_PORT so that base .. base + GPUs - 1 misses the "
    "pod's container ports and --data-parallel-rpc-port (the client's default 5555 is vLLM's usual "
    "DP RPC port); llmd_fleet/plan/fleet.py picks them for the fleet.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_mx_ports,
    tags=["serving", "modelexpress"],
)

# The pod label that marks llm-d's inference simulator (`serving.engine: simulator`, kind local).
SIMULATOR_NAME_LABEL = ("app.kubernetes.io/name", "llm-d-inference-sim")
_GROUP_KINDS = ("DisaggregatedSet", "LeaderWorkerSet")


def _group_prefix(template: PodTemplate) -> str:
    return template.path.split(".leaderWorkerTemplate.")[0]


def _check_engine_identified(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    if resource.kind not in _GROUP_KINDS:
        return
    checked = {_group_prefix(t) for role in _roles(resource) for t in role.templates}
    key, value = SIMULATOR_NAME_LABEL
    for template in pod_templates(resource):
        if _group_prefix(template) in checked:
            continue
        if template.labels.get(key) == value:
            gpus = device_plugin_gpus(template.spec, cfg["gpuResources"])
            claims = [c.get("name") for c in template.spec.get("resourceClaims") or []]
            if gpus or claims:
                report(
                    f"{template.where()}: runs llm-d's inference simulator but takes GPUs "
                    f"({gpus} device-plugin GPU(s), resource claims {claims}); the simulator uses "
                    "none, so they would sit idle"
                )
            continue
        report(
            f"{template.where()}: runs neither `vllm serve` nor llm-d's inference simulator "
            f"(pod label {key}={value}); this pack's serving rules read vLLM command lines, so "
            "nothing about this role would be checked"
        )


serving_engine_identified = resource_rule(
    name="serving-engine-identified",
    description="Every LeaderWorkerSet-shaped serving role runs `vllm serve` (which the serving "
    "rules check) or llm-d's inference simulator without GPUs, never something the pack cannot read.",
    remediation="Run the engine as `vllm serve ...` in the pod's command "
    "(llmd_fleet/layers/serving/vllm.py), "
    "or the simulator with its `app.kubernetes.io/name: llm-d-inference-sim` label and no GPU "
    "claim or limit (llmd_fleet/layers/serving/simulator.py).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    types=WORKLOAD_TYPES,
    check=_check_engine_identified,
    config=schema({"gpuResources": GPU_RESOURCES}),
    tags=["serving"],
)

POLICIES = [
    serving_engine_identified,
    serving_shm_memory_backed,
    startup_probe_budget,
    kv_tier_memory_limit,
    drain_fits_grace_period,
    modelexpress_ports_clear,
]
