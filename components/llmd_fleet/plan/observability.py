"""What the fleet should look like live: the plan's figures that alerts compare against and that
`llmd-fleet plan` prints next to the metric and panel showing them (pure; no SDK).

Every threshold an alert takes from the plan is computed here, once: the scrape targets each role
must expose, the KV-transfer time bound from the node groups' NIC line rate, the flow-control byte
bounds per band, how long a role may be short of ranks before it is more than a rollout, and the
endpoint picker's leader Lease.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.config.grammar import url_port
from llmd_fleet.labels import MODEL_SCOPE_LABEL
from llmd_fleet.plan.fleet import GIB, FleetPlan, RoleName, RolePlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# vLLM 0.33.0 observes vllm:nixl_xfer_time_seconds into buckets up to 5 s
# (distributed/kv_transfer/kv_connector/v1/nixl/stats.py); a p90 beyond the top bucket reads as
# 5 s, so a bound at or above it could never fire.
NIXL_XFER_TIME_TOP_BUCKET_S = 5.0
# How far above the line-rate time of the longest possible transfer the p90 may go before the
# fabric counts as degraded: protocol overhead and a busy NIC stay well inside 2x.
KV_TRANSFER_SLACK = 2.0
# A role is short of ranks for longer than a rollout step takes (one instance's model load plus
# its drain) plus this margin before it alerts.
ROLLOUT_MARGIN_MINUTES = 15
# Flow control rejects a band's requests at its maxBytes; warn at this share of it.
QUEUE_BYTES_WARN_FRACTION = 0.9


@dataclass(frozen=True)
class RoleTargets:
    """The scrape targets of one role."""

    name: RoleName
    pods: int
    """Serving pods: instances x nodes per instance (an autoscaled role's minimum instances)."""
    ranks: int
    """vLLM API servers, one per local DP rank, each a scrape target with its own /metrics."""
    ports: tuple[int, ...]
    """The rank ports scraped (decode: the engines behind the sidecar, not the sidecar)."""
    kv_tokens_per_rank: int
    cpu_tier_gib_per_rank: int
    short_for_minutes: int
    """How long the role may have fewer than `ranks` targets up before it alerts."""


@dataclass(frozen=True)
class KvTransferBound:
    """The KV-transfer p90 bound: the longest possible transfer at the slower role's NIC share."""

    max_tokens: int
    """maxModelLen: the most tokens one request's KV can hold."""
    max_bytes: int
    """Their KV bytes (max tokens x kvBytesPerToken)."""
    gbps_per_gpu: float
    """The slower role's NIC share per GPU: nicsPerNode x nicGbps / gpusPerNode."""
    line_rate_seconds: float
    """The longest transfer at that line rate."""
    bound_seconds: float
    """The alert's threshold: line-rate time x KV_TRANSFER_SLACK, below vLLM's top bucket."""


@dataclass(frozen=True)
class ObservabilityPlan:
    """What the alerts, dashboards and monitors are built from: the plan's names, scrape targets and
    thresholds (`plan_observability`)."""

    namespace: str
    """The serving namespace: every series the alerts and dashboards select is in it."""
    pool: str
    """The serving pool's name (`serving.name`): pod names and dashboard titles carry it."""
    roles: tuple[RoleTargets, ...]
    kv_transfer: KvTransferBound
    endpoints: int
    """Rank endpoints the endpoint picker should report ready (every DP rank of both roles)."""
    band_max_bytes: tuple[tuple[int, int], ...]
    """(priority, maxBytes) of each flow-control band; empty without flow control."""
    queue_max_bytes: int
    mtp_tokens: int
    """Speculative tokens per step (0: no MTP alert or panel)."""
    leader_lease: str | None
    """The EPP's leader-election Lease name; None when the EPP does not elect a leader."""
    cpu_tier: bool
    """Whether the engines run the CPU KV tier (the allocation-failure alert needs it)."""
    scope: tuple[tuple[str, str], ...] = ()
    """Label matchers every query adds besides the namespace: with `llmd-fleet:models` the
    model's own (llmd_fleet/labels.py MODEL_SCOPE_LABEL); none for a single model."""

    def role(self, name: RoleName) -> RoleTargets:
        return next(r for r in self.roles if r.name == name)


def scraped_ports(role: RolePlan) -> tuple[int, ...]:
    """Every rank's own API server: each serves /metrics for its engine. Decode's sidecar ports
    proxy to the same engines, so the engine ports are scraped instead (no duplicate series)."""
    return role.engine_ports


def gbps_per_gpu(config: StackConfig, role: RolePlan) -> float:
    """The fabric bandwidth one GPU (one engine) of the role has: its node's NICs' line rate shared
    by the node's GPUs."""
    group = config.fleet.node_groups[role.node_group]
    assert group.nic_gbps is not None  # parse_config fills the target's default
    # GPU-less nodes (kind local): the node's whole nominal bandwidth, one engine per node.
    return group.nics_per_node * group.nic_gbps / max(1, group.gpus_per_node)


def kv_transfer_bound(config: StackConfig, plan: FleetPlan) -> KvTransferBound:
    """The slow-KV-transfer alert's threshold: the longest context's KV at the slower role's line
    rate, times `KV_TRANSFER_SLACK`, kept below vLLM's top histogram bucket so the alert can fire."""
    tokens = config.serving.roles.decode.max_model_len
    size = tokens * config.model.kv_bytes_per_token
    rate = min(gbps_per_gpu(config, plan.role("prefill")), gbps_per_gpu(config, plan.role("decode")))
    line = size * 8 / (rate * 1e9)
    # Two decimals, rounded up, and always below the top bucket so the alert can fire.
    bound = min(math.ceil(line * KV_TRANSFER_SLACK * 100) / 100, NIXL_XFER_TIME_TOP_BUCKET_S * 0.9)
    return KvTransferBound(tokens, size, rate, line, bound)


def plan_observability(config: StackConfig, plan: FleetPlan) -> ObservabilityPlan:
    """The stack's `ObservabilityPlan`, derived from its config and fleet plan alone."""
    router = config.router
    # Whole minutes, each part rounded up, as the alerts' `for` counts them.
    serving = config.serving
    rollout_minutes = math.ceil(serving.model_load_seconds / 60) + math.ceil(serving.drain_seconds / 60)
    # An autoscaled role may run as few as its minimum, so the targets-down alert counts that.
    roles = tuple(
        RoleTargets(
            name=r.name,
            pods=r.min_instances * r.nodes_per_instance,
            ranks=r.min_instances * r.nodes_per_instance * r.dp_size_local,
            ports=scraped_ports(r),
            kv_tokens_per_rank=r.memory.kv_tokens,
            cpu_tier_gib_per_rank=r.memory.cpu_tier_gib,
            short_for_minutes=rollout_minutes + ROLLOUT_MARGIN_MINUTES,
        )
        for r in plan.roles
    )
    elects = router.mode == "active-passive" and router.replicas > 1
    lease = f"epp-{config.serving.namespace}-{config.serving.name}.llm-d.ai" if elects else None
    return ObservabilityPlan(
        namespace=config.serving.namespace,
        pool=config.serving.name,
        roles=roles,
        kv_transfer=kv_transfer_bound(config, plan),
        endpoints=plan.router.endpoints,
        band_max_bytes=plan.router.band_max_bytes if router.flow_control else (),
        queue_max_bytes=plan.router.queue_max_bytes,
        mtp_tokens=config.serving.roles.decode.mtp_tokens,
        leader_lease=lease,
        cpu_tier=config.serving.kv_tier.cpu_offload and any(r.memory.cpu_tier_gib > 0 for r in plan.roles),
        scope=((MODEL_SCOPE_LABEL, config.model_scope),) if config.model_scope is not None else (),
    )


def gib(value: int) -> str:
    """Bytes as GiB with one decimal, for alert and panel text."""
    return f"{value / GIB:.1f} GiB"


PROMETHEUS_OPERATED = "prometheus-operated"
"""The Service prometheus-operator creates in front of the Prometheus servers of a namespace
(prometheus-operator v0.93.0 pkg/prometheus/server/statefulset.go, port 9090 in
pkg/prometheus/common.go)."""
PROMETHEUS_PORT = 9090


def prometheus_address(config: StackConfig) -> str:
    """The Prometheus query API the triggers read: explicit, or prometheus-operator's
    `prometheus-operated` Service in the observability namespace."""
    scaling = config.serving.autoscaling
    if scaling is not None and scaling.prometheus_address is not None:
        return scaling.prometheus_address
    namespace = config.observability.namespace
    return f"http://{PROMETHEUS_OPERATED}.{namespace}.svc:{PROMETHEUS_PORT}"


def prometheus_port(config: StackConfig) -> int:
    """The TCP port of `prometheus_address` (the scheme's default when the URL names none)."""
    return url_port(prometheus_address(config))
