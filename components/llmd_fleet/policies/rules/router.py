"""The router (llm-d endpoint picker, EPP): high availability, its InferencePool, and agreement
with the serving pods on rank ports and KV-event ports and topics.

Facts used: the EPP runs active-passive with `--ha-enable-leader-election`; active-active is only
safe when every replica builds the same prefix index from KV events (precise prefix cache), not
with the approximate per-replica index. InferencePool (inference.networking.k8s.io/v1) defaults
`endpointPickerRef.failureMode` to FailClose. vLLM publishes KV events of local DP rank i on the
endpoint port + i; the precise-prefix producer subscribes on `podDiscoveryConfig.socketPort`
(default 5557) of every pod and keeps topics starting with `topicFilter` (default `kv@`).
"""

import math
import posixpath
from typing import Any

import yaml
from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Report, Resource, as_int, dig, resource_rule, schema, stack_rule
from llmd_fleet.policies.rules._k8s import (
    ROUTER_CONTAINER,
    SIDECAR_CONTAINER,
    PodTemplate,
    all_pod_templates,
    container,
    containers,
    index_by_name,
    is_router,
    pod_templates,
    router_templates,
    selector_matches,
)
from llmd_fleet.policies.rules._serve import Flags, container_flags, engine_ports, kv_events
from llmd_fleet.policies.rules._serving import ServingRole, engine_args, serving_roles

_PRECISE = ("precise-prefix-cache-producer", "precise-prefix-cache-scorer")
_PREFIX_SCORERS = ("prefix-cache-scorer", "no-hit-lru-scorer")
_LEADER_ELECTION = "--ha-enable-leader-election"


def _replicas(template: PodTemplate) -> int:
    replicas = as_int(dig(template.workload.props, "spec", "replicas"))
    return 1 if replicas is None else replicas


def epp_flags(template: PodTemplate) -> Flags:
    c = container(template.spec, ROUTER_CONTAINER) or next(iter(containers(template.spec)), None)
    return container_flags(c) if c is not None else Flags(flags={})


def epp_config(template: PodTemplate, resources: list[Resource]) -> dict[str, Any] | None:
    """The EndpointPickerConfig the EPP loads: `--config-text`, or `--config-file` read from the
    ConfigMap volume mounted at that path. None when the stack does not declare it."""
    flags = epp_flags(template)
    text = flags.raw("--config-text")
    if text is None:
        path = flags.raw("--config-file")
        c = container(template.spec, ROUTER_CONTAINER) or next(iter(containers(template.spec)), None)
        if path is None or c is None:
            return None
        configmaps = index_by_name(resources, "ConfigMap")
        volumes = {v.get("name"): v for v in template.spec.get("volumes") or [] if isinstance(v, dict)}
        for mount in c.spec.get("volumeMounts") or []:
            mount_path = str(mount.get("mountPath") or "")
            volume = volumes.get(mount.get("name")) or {}
            name = dig(volume, "configMap", "name")
            if not name or not (path == mount_path or path.startswith(mount_path.rstrip("/") + "/")):
                continue
            key = mount.get("subPath") or posixpath.relpath(path, mount_path)
            for item in dig(volume, "configMap", "items") or []:
                if item.get("path") == key:
                    key = item.get("key")
            configmap = configmaps.get((template.workload.namespace, str(name)))
            text = dig(configmap.props, "data", str(key)) if configmap is not None else None
            break
    if not isinstance(text, str):
        return None
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _plugins(config: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [p for p in (config or {}).get("plugins") or [] if isinstance(p, dict)]


def precise_producer(config: dict[str, Any] | None) -> dict[str, Any] | None:
    return next((p for p in _plugins(config) if p.get("type") in _PRECISE), None)


def uses_approximate_prefix(config: dict[str, Any] | None) -> bool:
    """Routing scores prefixes from an approximate index: a prefix scorer fed by anything but a
    precise producer. (An approximate producer that only informs the P/D decider does not make
    replicas route differently.)"""
    plugins = _plugins(config)
    precise_names = {p.get("name") or p.get("type") for p in plugins if p.get("type") in _PRECISE}
    return any(
        p.get("type") in _PREFIX_SCORERS
        and dig(p, "parameters", "prefixMatchInfoProducerName") not in precise_names
        for p in plugins
    )


def _check_replicas(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for template in pod_templates(resource):
        if is_router(template) and _replicas(template) < cfg["minReplicas"]:
            report(
                f"{template.where()} runs {_replicas(template)} replica(s) of the endpoint picker; "
                f"at least {cfg['minReplicas']} keep routing alive through a node loss or rollout"
            )


router_replicas = resource_rule(
    name="router-replicas",
    description="The router (llm-d endpoint picker) runs at least two replicas.",
    remediation="Set the endpoint-picker Deployment's `spec.replicas` to 2 or more (active-passive "
    "with `--ha-enable-leader-election`, or active-active with precise prefix routing).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(":Deployment", ":StatefulSet"),
    check=_check_replicas,
    config=schema(
        {
            "minReplicas": {
                "type": "integer",
                "minimum": 1,
                "default": 2,
                "description": "Fewest router replicas.",
            }
        }
    ),
    tags=["router", "availability"],
)


def _guaranteed(pdb: Resource, replicas: int) -> int:
    """Router pods the PDB keeps up during voluntary disruptions."""
    spec = pdb.props.get("spec") or {}

    def amount(value: Any, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            share = float(value[:-1]) / 100 * replicas
            return math.ceil(share) if round_up else math.floor(share)
        return as_int(value) or 0

    if spec.get("minAvailable") is not None:
        return amount(spec["minAvailable"], round_up=True)
    if spec.get("maxUnavailable") is not None:
        return replicas - amount(spec["maxUnavailable"], round_up=True)
    return 0


def _check_pdb(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    pdbs = [r for r in resources if r.is_kubernetes_object and r.kind == "PodDisruptionBudget"]
    for template in router_templates(resources):
        replicas = _replicas(template)
        matching = [
            p
            for p in pdbs
            if p.namespace == template.workload.namespace
            and selector_matches(dig(p.props, "spec", "selector"), template.labels)
        ]
        if not matching:
            report(
                f"{template.where()}: no PodDisruptionBudget selects the endpoint-picker pods",
                template.workload,
            )
        elif all(_guaranteed(p, replicas) < 1 for p in matching):
            report(
                f"{template.where()}: {matching[0].ref()} lets a drain evict all {replicas} "
                "endpoint-picker pods",
                template.workload,
            )


router_pdb = stack_rule(
    name="router-pdb",
    description="A PodDisruptionBudget keeps at least one router pod running through node drains.",
    remediation="Add a policy/v1 PodDisruptionBudget in the router's namespace whose selector matches "
    "the endpoint-picker pod labels, with `minAvailable: 1` (or `maxUnavailable: 1` with 2+ replicas).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_pdb,
    tags=["router", "availability"],
)


def _check_leader_election(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    for template in router_templates(resources):
        if _replicas(template) < 2:
            continue
        if epp_flags(template).bool_value(_LEADER_ELECTION):
            continue
        config = epp_config(template, resources)
        if config is None:
            report(
                f"{template.where()}: {_replicas(template)} replicas without {_LEADER_ELECTION}, and the "
                "endpoint-picker config is not declared in the stack, so active-active cannot be verified",
                template.workload,
            )
        elif precise_producer(config) is None or uses_approximate_prefix(config):
            report(
                f"{template.where()}: {_replicas(template)} replicas run active-active without "
                f"{_LEADER_ELECTION}, but the config routes on an approximate per-replica prefix index",
                template.workload,
            )


router_leader_election = stack_rule(
    name="router-leader-election",
    description="A replicated router runs active-passive with leader election unless it routes on "
    "precise prefix-cache events, which keep active-active replicas consistent.",
    remediation="Add `--ha-enable-leader-election` to the `epp` container's args, or switch the "
    "EndpointPickerConfig to the precise-prefix-cache-producer (KV events from every pod) and drop "
    "the approximate prefix producer before running active-active.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_leader_election,
    tags=["router", "availability"],
)


def _failure_mode(resource: Resource) -> str:
    spec = resource.props.get("spec") or {}
    ref = spec.get("endpointPickerRef") or spec.get("extensionRef") or {}
    return str(ref.get("failureMode") or "FailClose")


def _check_fail_open(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    mode = _failure_mode(resource)
    if mode != "FailOpen":
        report(
            f"{resource.ref()}: endpointPickerRef.failureMode is {mode}; the gateway stops serving "
            "whenever the endpoint picker fails over"
        )


inference_pool_fail_open = resource_rule(
    name="inference-pool-fail-open",
    description="The InferencePool fails open, so the gateway keeps serving while the endpoint "
    "picker fails over.",
    remediation="Set `spec.endpointPickerRef.failureMode: FailOpen` on the InferencePool (the API "
    "default is FailClose).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(":InferencePool",),
    check=_check_fail_open,
    tags=["router", "availability"],
)


def _pool_selector(pool: Resource) -> dict[str, Any]:
    selector = dig(pool.props, "spec", "selector") or {}
    if "matchLabels" in selector or "matchExpressions" in selector:
        return selector
    return {"matchLabels": selector}  # v1alpha2: a plain label map


def _pool_ports(pool: Resource) -> list[int]:
    spec = pool.props.get("spec") or {}
    ports = [as_int(p.get("number")) for p in spec.get("targetPorts") or [] if isinstance(p, dict)]
    if not ports and spec.get("targetPortNumber") is not None:
        ports = [as_int(spec["targetPortNumber"])]
    return sorted(p for p in ports if p is not None)


def client_ports(template: PodTemplate) -> list[int] | None:
    """Ports the router sends requests to: the routing sidecar's (one per local DP rank) when the
    pod has one, else vLLM's API ports."""
    sidecar = container(template.spec, SIDECAR_CONTAINER)
    if sidecar is not None:
        flags = container_flags(sidecar)
        port = flags.int_value("--port")
        port = 8000 if port is None and not flags.has("--port") else port
        ranks = flags.int_value("--data-parallel-size")
        ranks = 1 if ranks is None and not flags.has("--data-parallel-size") else ranks
        if port is None or ranks is None:
            return None
        return [port + i for i in range(ranks)]
    args = engine_args(template)
    return engine_ports(args, template.group_size) if args is not None else None


def _ranges(ports: list[int]) -> str:
    return (
        ",".join(str(p) for p in ports) if len(ports) < 3 else f"{ports[0]}-{ports[-1]} ({len(ports)} ports)"
    )


def _served_pods(
    router: PodTemplate, pools: dict[tuple[str, str], Resource], roles: list[ServingRole]
) -> tuple[Resource | None, list[ServingRole]]:
    """The InferencePool an EPP serves and the serving roles behind it."""
    flags = epp_flags(router)
    namespace = router.workload.namespace
    pool_name = flags.value("--pool-name")
    pool = pools.get((flags.value("--pool-namespace") or namespace, pool_name or ""))
    if pool is not None:
        selector = _pool_selector(pool)
        selected = [
            r
            for r in roles
            if r.workload.namespace == pool.namespace and selector_matches(selector, r.worker.labels)
        ]
        return pool, selected
    endpoint_selector = flags.value("--endpoint-selector")
    if endpoint_selector:
        labels = dict(part.split("=", 1) for part in endpoint_selector.split(",") if "=" in part)
        selector = {"matchLabels": labels}
        return None, [
            r
            for r in roles
            if r.workload.namespace == namespace and selector_matches(selector, r.worker.labels)
        ]
    return None, [r for r in roles if r.workload.namespace == namespace]


def _check_agreement(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    pools = index_by_name(resources, "InferencePool")
    roles = serving_roles(resources)
    templates = all_pod_templates(resources)
    for pool in pools.values():
        selector = _pool_selector(pool)
        selected = [
            t
            for t in templates
            if t.workload.namespace == pool.namespace and selector_matches(selector, t.labels)
        ]
        if not selected:
            report(f"{pool.ref()}: its selector matches no pod template in the stack", pool)
        targets = _pool_ports(pool)
        for t in selected:
            ports = client_ports(t)
            if ports is not None and sorted(ports) != targets:
                report(
                    f"{pool.ref()}: targetPorts {_ranges(targets)} but {t.where()} serves one port per DP "
                    f"rank on {_ranges(sorted(ports))}; ranks without a target port get no traffic",
                    pool,
                )
    for router in router_templates(resources):
        flags = epp_flags(router)
        pool_name = flags.value("--pool-name")
        served_pool, served = _served_pods(router, pools, roles)
        if pool_name and served_pool is None and pools:
            report(
                f"{router.where()}: --pool-name {pool_name} names no InferencePool in the stack",
                router.workload,
            )
        if served_pool is None and flags.has("--endpoint-target-ports"):
            wanted = sorted(
                int(p)
                for p in (flags.value("--endpoint-target-ports") or "").split(",")
                if p.strip().isdigit()
            )
            for role in served:
                ports = client_ports(role.worker)
                if ports is not None and sorted(ports) != wanted:
                    report(
                        f"{router.where()}: --endpoint-target-ports {_ranges(wanted)} but {role.where()} "
                        f"serves on {_ranges(sorted(ports))}",
                        router.workload,
                    )
        producer = precise_producer(epp_config(router, resources))
        if producer is None:
            continue
        params = producer.get("parameters") or {}
        events = params.get("kvEventsConfig") or dig(params, "indexerConfig", "kvEventsConfig") or {}
        if events.get("discoverPods") is False:
            continue
        socket_port = as_int(dig(events, "podDiscoveryConfig", "socketPort")) or 5557
        topic_filter = str(events.get("topicFilter") or "kv@")
        block = dig(params, "tokenProcessorConfig", "blockSizeTokens") or dig(
            params, "tokenProcessorConfig", "blockSize"
        )
        for role in served:
            published = kv_events(role.args, multi_pod=role.group_size > 1)
            where = role.where()
            if published is None:
                report(
                    f"{router.where()} routes on precise prefix-cache events but {where} publishes none "
                    "(--kv-events-config)",
                    router.workload,
                )
                continue
            if published.shifts_with_rank:
                report(
                    f"{where}: KV-event endpoint {published.endpoint} is a fixed port, and vLLM adds the "
                    "global DP rank to it, so each pod of the group publishes on different ports",
                    role.workload,
                )
            elif published.base_port is not None and published.base_port != socket_port:
                report(
                    f"{where}: rank 0 publishes KV events on port {published.base_port} but "
                    f"{router.where()} subscribes on socketPort {socket_port}",
                    role.workload,
                )
            if not published.topic.startswith(topic_filter):
                report(
                    f"{where}: KV-event topic {published.topic!r} does not start with the router's "
                    f"topicFilter {topic_filter!r}",
                    role.workload,
                )
            parts = published.topic.split("@")
            ports = client_ports(role.worker)
            if len(parts) >= 2 and ports:
                topic_port = parts[1].rsplit(":", 1)[-1]
                if topic_port.isdigit() and int(topic_port) not in ports:
                    report(
                        f"{where}: KV-event topic names port {topic_port}, which is not one of the pod's "
                        f"rank ports {_ranges(sorted(ports))}",
                        role.workload,
                    )
            vllm_block = role.args.value("--block-size")
            if block is not None and vllm_block is not None and str(as_int(block)) != vllm_block:
                report(
                    f"{where}: --block-size {vllm_block} but {router.where()} hashes blocks of "
                    f"{as_int(block)} "
                    "tokens, so prefix matches never line up",
                    role.workload,
                )


router_serving_agreement = stack_rule(
    name="router-serving-agreement",
    description="The router and the serving pods agree on rank ports, KV-event ports and topics, "
    "and KV block size.",
    remediation="List every DP rank's client port (8000-8007 on an 8-GPU pod) in the InferencePool's "
    "`targetPorts`, select the serving pods with its selector, publish KV events on the router's "
    "`socketPort` from rank 0 (base = port - START_RANK), start the topic with its `topicFilter` "
    "and use the same block size in vLLM and the precise-prefix producer.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_agreement,
    tags=["router", "serving"],
)

POLICIES = [
    router_replicas,
    router_pdb,
    router_leader_election,
    inference_pool_fail_open,
    router_serving_agreement,
]
