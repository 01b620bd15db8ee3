"""Invariants that only break at fleet scale, silently: each one weakens a mechanism at 544 GPUs
instead of failing at start-up.

Facts used (llm-d-router and vLLM at the versions pinned in images/versions.toml):
- The precise prefix index keeps at most `podCacheSize` holders (pod endpoint x device tier) per
  block key, default 10 (pkg/kvcache/kvblock/in_memory.go); a key held by more endpoints loses
  holders and prefix affinity for the most shared prefixes.
- Flow control bounds queued requests by count (`maxRequests`) and by bytes (`maxBytes`,
  apix/config/v1alpha1); only the byte bound keeps queued request bodies inside the EPP's memory.
- vLLM's OffloadingConnector offloads prompt blocks only unless `offload_prompt_only` is false
  (v1/kv_offload/base.py); a p2p tier then serves peers no generated blocks.
- The routing sidecar's pooled upstream connections idle out after 90 s
  (pkg/sidecar/proxy/proxy.go); vLLM closes idle ones after `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`
  seconds (default 5), so a shorter keep-alive lets the proxy reuse a closed connection.
"""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import (
    Report,
    Resource,
    as_int,
    dig,
    gib,
    parse_quantity,
    resource_rule,
    schema,
    stack_rule,
)
from llmd_fleet.policies.rules._k8s import (
    ROUTER_CONTAINER,
    container,
    containers,
    env_literal,
    index_by_name,
    pod_templates,
    router_templates,
)
from llmd_fleet.policies.rules._scaling import at_autoscaling_maxima
from llmd_fleet.policies.rules._serve import data_parallel_local, kv_connectors, serve_args
from llmd_fleet.policies.rules._serving import serving_roles
from llmd_fleet.policies.rules.router import _served_pods, epp_config, precise_producer

_DEFAULT_POD_CACHE_SIZE = 10
_OFFLOADING = "OffloadingConnector"
_KEEP_ALIVE = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"
_VLLM_DEFAULT_KEEP_ALIVE_S = 5


def _tiers(connectors: list[Any]) -> int:
    """Device tiers an engine reports blocks in: HBM, plus host memory with the offloading tier."""
    return 2 if any(c.name == _OFFLOADING for c in connectors) else 1


def _check_index_holders(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    # Autoscaled roles hold blocks on every rank they may grow to.
    resources = at_autoscaling_maxima(resources)
    # By object name (the EPP's --pool-name), not Pulumi name: with several pools in a namespace
    # each picker counts only the ranks its own pool selects.
    pools = index_by_name(resources, "InferencePool")
    roles = serving_roles(resources)
    for router in router_templates(resources):
        producer = precise_producer(epp_config(router, resources))
        if producer is None:
            continue
        _, served = _served_pods(router, pools, roles)
        endpoints, tiers = 0, 1
        for role in served:
            local = data_parallel_local(role.args, role.group_size) or 1
            endpoints += (role.worker.pods or 0) * local
            tiers = max(tiers, _tiers(kv_connectors(role.args)))
        holders = as_int(
            dig(
                producer,
                "parameters",
                "indexerConfig",
                "kvBlockIndexConfig",
                "inMemoryConfig",
                "podCacheSize",
            )
        )
        holders = _DEFAULT_POD_CACHE_SIZE if holders is None else holders
        if holders < endpoints * tiers:
            report(
                f"{router.where()}: the precise prefix index keeps {holders} holders per block key, but "
                f"{endpoints} rank endpoints x {tiers} tier(s) = {endpoints * tiers} can hold one; the most "
                "shared prefixes lose their holders and prefix affinity",
                router.workload,
            )


router_index_holders = stack_rule(
    name="router-index-holders",
    description="The precise prefix index keeps as many holders per block key as rank endpoints x "
    "tiers can hold it.",
    remediation="Set the precise-prefix-cache-producer's "
    "`indexerConfig.kvBlockIndexConfig.inMemoryConfig.podCacheSize` to at least (DP ranks behind the "
    "pool) x (device tiers: 2 with a CPU offload tier), with headroom.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_index_holders,
    tags=["router", "fleet-scale"],
)


def _memory_limit(router: Any) -> float | None:
    c = container(router.spec, ROUTER_CONTAINER) or next(iter(containers(router.spec)), None)
    return parse_quantity(dig(c.spec, "resources", "limits", "memory")) if c is not None else None


def _check_queue_bytes(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    for router in router_templates(resources):
        config = epp_config(router, resources)
        flow = (config or {}).get("flowControl")
        if "flowControl" not in ((config or {}).get("featureGates") or []) or not isinstance(flow, dict):
            continue
        limit = _memory_limit(router)
        bound = parse_quantity(flow.get("maxBytes"))
        if bound is None:
            report(
                f"{router.where()}: flow control bounds queued requests by count only (no `maxBytes`); "
                "queued request bodies can outgrow the EPP's memory",
                router.workload,
            )
        elif limit is not None and bound >= limit:
            report(
                f"{router.where()}: flow control may queue {gib(bound)} GiB of request bodies, not below "
                f"the EPP's {gib(limit)} GiB memory limit",
                router.workload,
            )


router_queue_bytes = stack_rule(
    name="router-queue-bytes-bound",
    description="Flow control bounds queued bytes below the endpoint picker's memory limit.",
    remediation="Set `flowControl.maxBytes` (and each band's) in the EndpointPickerConfig below the "
    "`epp` container's memory limit, leaving room for the working set.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_queue_bytes,
    tags=["router", "fleet-scale"],
)


def _check_p2p_offload(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for template in pod_templates(resource):
        for c in containers(template.spec):
            args = serve_args(c)
            if args is None:
                continue
            for connector in kv_connectors(args):
                extra = connector.config.get("kv_connector_extra_config") or {}
                tiers = [t for t in extra.get("secondary_tiers") or [] if isinstance(t, dict)]
                p2p = any(t.get("type") == "p2p" for t in tiers)
                if connector.name == _OFFLOADING and p2p and extra.get("offload_prompt_only", True):
                    report(
                        f"{template.where()}: container {c.name} serves a p2p KV tier but offloads prompt "
                        "blocks only, so peers can never pull a conversation's generated turns"
                    )


p2p_offloads_generated_blocks = resource_rule(
    name="p2p-offloads-generated-blocks",
    description="Engines that serve a peer-to-peer KV tier offload generated blocks too.",
    remediation='Set `"offload_prompt_only": false` in the OffloadingConnector\'s '
    "`kv_connector_extra_config` of every pod that may be pulled from.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    types=(":DisaggregatedSet", ":LeaderWorkerSet", ":Deployment", ":StatefulSet"),
    check=_check_p2p_offload,
    tags=["serving", "kv-cache", "fleet-scale"],
)


def _check_keep_alive(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    idle = cfg["proxyIdleTimeoutSeconds"]
    for template in pod_templates(resource):
        for c in containers(template.spec):
            if serve_args(c) is None:
                continue
            value = env_literal(c.spec, _KEEP_ALIVE)
            seconds = as_int(value) if value is not None else _VLLM_DEFAULT_KEEP_ALIVE_S
            if seconds is None or seconds <= idle:
                report(
                    f"{template.where()}: container {c.name} closes idle HTTP connections after "
                    f"{value if value is not None else f'{_VLLM_DEFAULT_KEEP_ALIVE_S} (default)'} s, not "
                    f"longer than the proxies' {idle} s idle timeout; they reuse connections vLLM closed"
                )


engine_keep_alive = resource_rule(
    name="engine-keep-alive-outlasts-proxy",
    description="vLLM keeps idle connections open longer than the routing sidecar and gateway do.",
    remediation=f"Set `{_KEEP_ALIVE}` on every vLLM container above the proxies' idle timeout "
    "(the routing sidecar's is 90 s), e.g. 120.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    types=(":DisaggregatedSet", ":LeaderWorkerSet", ":Deployment", ":StatefulSet"),
    check=_check_keep_alive,
    config=schema(
        {
            "proxyIdleTimeoutSeconds": {
                "type": "integer",
                "minimum": 1,
                "default": 90,
                "description": "Idle timeout of the proxies in front of vLLM (the routing sidecar: 90 s).",
            }
        }
    ),
    tags=["serving", "fleet-scale"],
)

POLICIES = [router_index_holders, router_queue_bytes, p2p_offloads_generated_blocks, engine_keep_alive]
