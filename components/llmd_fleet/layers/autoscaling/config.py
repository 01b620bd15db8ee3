"""The `serving.autoscaling` section: KEDA and the roles' bounds. Pure."""

from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    ManagedNamespace,
    ServiceUrl,
)


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


KedaMode = Literal["install", "preinstalled"]


class _RoleAutoscalingConfig(_Model):
    """What both roles' autoscaling shares: bounds, polling and the scale-down cooldown."""

    enabled: bool = False
    """Scale this role with KEDA: its DisaggregatedSet role switches to `scaling.mode: External`
    and a ScaledObject drives its DisaggregatedSetRoleScaler `<serving.name>-<role>`. Off by
    default: the role keeps `instances` (the reference stacks are a fixed fleet). When on, the
    role starts at `minInstances`, which `instances` must equal."""
    min_instances: Annotated[int, Field(ge=1, le=4096)] = 1
    """Fewest instances the autoscaler keeps (KEDA minReplicaCount), and where the role starts:
    LWS starts an External role's scaler at 1 and KEDA lifts it here, so it must equal the role's
    `instances`. At least 1: a role at zero needs a whole model load (`serving.modelLoadMinutes`)
    before it serves again."""
    max_instances: Annotated[int, Field(ge=1, le=4096)] | None = None
    """Most instances the autoscaler may run (KEDA maxReplicaCount); the role's `instances` when
    unset. Every role's maximum, plus a rolling update's surge, must fit its node group, and the
    policy pack holds it to the GPU budget (`autoscaling-within-gpu-budget`)."""
    polling_interval_seconds: Annotated[int, Field(ge=5, le=600)] = 30
    """How often KEDA evaluates the trigger (ScaledObject pollingInterval; KEDA's default 30)."""
    cooldown_seconds: Annotated[int, Field(ge=60, le=3600)] | None = None
    """How long the demand must stay low before an instance is removed: the HPA scale-down
    stabilization window. (Not KEDA's cooldownPeriod, which only times a scale to zero, and
    `minInstances` is at least 1.) Must be longer than the model load time,
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
    (llmd_fleet/layers/autoscaling/component.py, docs/autoscaling.md)."""

    keda: KedaMode = "install"
    """`install`: the stack installs KEDA (chart pinned in images/versions.toml) into
    `kedaNamespace`, with NetworkPolicies that admit only its flows; `preinstalled`: the cluster
    already runs KEDA 2.x with the ScaledObject CRD (nothing is installed). Unset under
    `target.platform: preinstalled`, it is preinstalled."""
    keda_namespace: ManagedNamespace = "keda"
    """Namespace of the KEDA operator and its metrics adapter."""
    prometheus_address: ServiceUrl | None = None
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
