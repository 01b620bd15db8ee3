"""The autoscaling rules and the helpers sizing shares with them. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.autoscaling.config import _RoleAutoscalingConfig
from llmd_fleet.layers.serving.config import TEARDOWN_SECONDS, RoleConfig, ServingConfig

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# Kubernetes bounds of an HPA's behavior (autoscaling/v2 HPAScalingRules): a stabilization window
# of at most one hour, a scaling policy's period of at most 30 minutes.
HPA_MAX_STABILIZATION_SECONDS = 3600
HPA_MAX_POLICY_PERIOD_SECONDS = 1800
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
    return min(serving.model_load_seconds + COOLDOWN_MARGIN_SECONDS, HPA_MAX_STABILIZATION_SECONDS)


def autoscaling_problems(config: StackConfig) -> list[Problem]:
    """Bounds around the configured instances, room in the node groups for every maximum, a
    cooldown longer than a model load, a drain a scale-down can wait for, and a Prometheus to
    read."""
    serving, scaling = config.serving, config.serving.autoscaling
    if scaling is None:
        return []
    path = key(config, "serving", "autoscaling")
    problems: list[Problem] = []
    enabled = [name for name in ("prefill", "decode") if scaling.role(name).enabled]
    load_seconds = serving.model_load_seconds
    for name in enabled:
        role: RoleConfig = getattr(serving.roles, name)
        auto, role_path = scaling.role(name), path.at(name)
        # LWS seeds a fresh DisaggregatedSetRoleScaler at 1 and ignores an External role's
        # replicas (lws v0.10.0 api/disaggregatedset/v1/disaggregatedsetrolescaler_types.go
        # lines 32-36, pkg/controllers/disaggregatedset/disaggregatedset_controller.go seedForRole,
        # pkg/webhooks/disaggregatedset/disaggregatedset_webhook.go lines 88-94); KEDA's HPA then
        # lifts it to minReplicaCount. An autoscaled role therefore starts at minInstances, and
        # `instances` must say so.
        if auto.min_instances != role.instances:
            problems.append(
                Problem(
                    role_path.at("min_instances"),
                    f"must equal serving.roles.{name}.instances ({role.instances}) when {name} "
                    "autoscales: LWS starts an External role's DisaggregatedSetRoleScaler at 1 and "
                    "ignores its replicas, and KEDA lifts it to minInstances, so the role starts at "
                    f"minInstances (got {auto.min_instances})",
                )
            )
        if auto.max_instances is not None and auto.max_instances < role.instances:
            problems.append(
                Problem(
                    role_path.at("max_instances"),
                    f"must be at least serving.roles.{name}.instances ({role.instances}) "
                    f"(got {auto.max_instances})",
                )
            )
        cooldown = autoscaling_cooldown_seconds(serving, auto)
        if cooldown <= load_seconds:
            got = f"got {auto.cooldown_seconds}" if auto.cooldown_seconds is not None else "the default"
            problems.append(
                Problem(
                    role_path.at("cooldown_seconds"),
                    f"must be longer than serving.modelLoadMinutes ({serving.model_load_minutes:g} min = "
                    f"{load_seconds} s): an instance removed and needed again pays a whole model load; "
                    f"at most {HPA_MAX_STABILIZATION_SECONDS} s, the longest HPA stabilization window "
                    f"({got})",
                )
            )
        if name == "prefill" and scaling.prefill.prefill_tokens_per_second is None:
            problems.append(
                Problem(
                    role_path.at("prefill_tokens_per_second"),
                    "required when prefill autoscales: it turns in-flight prompt tokens into seconds "
                    "of backlog (measure it on the fleet, docs/autoscaling.md)",
                )
            )
    if "prefill" in enabled and config.router.mode != "active-passive":
        problems.append(
            Problem(
                path.at("prefill", "enabled"),
                "needs router.mode active-passive: prefill scales on the leader endpoint picker's "
                "in-flight tokens, and active-active replicas each count only their own share",
            )
        )
    if enabled and serving.drain_seconds + TEARDOWN_SECONDS > HPA_MAX_POLICY_PERIOD_SECONDS:
        problems.append(
            Problem(
                key(config, "serving", "drain_seconds"),
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
            Problem(
                path.at("prometheus_address"),
                "required unless observability.prometheus is operator or install (the default "
                "address is prometheus-operator's prometheus-operated Service; got "
                f"observability.prometheus {config.observability.prometheus})",
            )
        )
    for group_name, group in sorted(config.fleet.node_groups.items()):
        on_group = [n for n in ("prefill", "decode") if getattr(serving.roles, n).node_group == group_name]
        peak = {n: serving.max_instances(n) * getattr(serving.roles, n).nodes_per_instance for n in on_group}
        scaled = [n for n in on_group if n in enabled]
        if scaled and sum(peak.values()) > group.count:
            detail = " + ".join(f"{n} {peak[n]}" for n in on_group)
            problems.append(
                Problem(
                    path.at(scaled[-1], "max_instances"),
                    f"the roles' maxima need {sum(peak.values())} nodes ({detail}) but node group "
                    f"{group_name!r} has {group.count}",
                )
            )
    return problems
