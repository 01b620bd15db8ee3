"""Autoscaled serving roles: what they may grow to must fit the stack's GPU budget.

A DisaggregatedSet role with `scaling.mode: External` takes its instances from its
DisaggregatedSetRoleScaler `<set>-<role>` (kubernetes-sigs/lws, PR #922), which an autoscaler
drives: a KEDA ScaledObject up to its `maxReplicaCount` (KEDA's default 100 when unset,
apis/keda/v1alpha1/scaledobject_types.go at the pinned release), or an autoscaling/v2
HorizontalPodAutoscaler up to `maxReplicas`. The `gpu-budget` rule counts a role's rendered
replicas, which an External role does not have; this rule counts every role at its maximum, plus
the pods a rolling update surges, as `gpu-budget` does.
"""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Report, Resource, schema, stack_rule
from llmd_fleet.policies.rules._config import GPU_DEVICE_CLASSES, GPU_RESOURCES, MAX_GPUS
from llmd_fleet.policies.rules._dra import claim_index, with_stack_classes
from llmd_fleet.policies.rules._k8s import PodTemplate, all_pod_templates
from llmd_fleet.policies.rules._scaling import ROLE_SCALER_KIND, autoscaler_maxima, external_roles
from llmd_fleet.policies.rules._serving import pod_gpus
from llmd_fleet.policies.rules.accelerators import runs_alone, stack_workloads


def _per_group(template: PodTemplate) -> int:
    """Pods of this template in one LeaderWorkerSet group (the leader, or the workers)."""
    if not template.groups or template.pods is None:
        return 1
    return template.pods // template.groups


def _check_autoscaling_budget(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    budget = cfg["maxGpus"]
    if not budget:
        return
    cfg = with_stack_classes(resources, cfg)
    claims = claim_index(resources)
    maxima = autoscaler_maxima(resources)
    external = {r.urn: external_roles(r) for r in resources}
    if not any(external.values()):
        return
    peak, surge, parts = 0, 0, []
    workloads = stack_workloads(resources)
    for template in all_pod_templates(resources):
        gpus = pod_gpus(template, claims, cfg)
        if not gpus or template.pods is None or runs_alone(template, workloads):
            # A Job that finishes before the serving it precedes starts (the fabric preflight)
            # holds its GPUs before any role scales; gpu-budget counts it on its own.
            continue
        pods = template.pods
        if template.role in external.get(template.workload.urn, set()):
            scaler = f"{template.workload.object_name}-{template.role}"
            bound = maxima.get((template.workload.namespace, scaler))
            if bound is None:
                report(
                    f"{template.where()}: scales externally (scaling.mode External) but no ScaledObject "
                    f"or HorizontalPodAutoscaler targets its {ROLE_SCALER_KIND} {scaler}, so nothing "
                    "bounds how many instances it may run",
                    template.workload,
                )
                continue
            maximum, _ = bound
            pods = maximum * _per_group(template)
            parts.append(f"{template.where()}: up to {maximum} instances, {pods} pods x {gpus}")
        else:
            parts.append(f"{template.where()}: {pods} pods x {gpus}")
        peak += pods * gpus
        surge += template.surge_pods * gpus
    if peak + surge > budget:
        report(
            f"at their autoscaling maxima the workloads request {peak} GPUs plus {surge} for a rolling "
            f"update's surge, {peak + surge} in all, over the stack's budget of {budget}: "
            + "; ".join(parts),
            next(iter(r for r in resources if external.get(r.urn)), None),
        )


autoscaling_within_gpu_budget = stack_rule(
    name="autoscaling-within-gpu-budget",
    description="Every autoscaled serving role at its maximum, with the other workloads and a "
    "rolling update's surge, stays within the stack's GPU budget.",
    remediation="Lower `serving.autoscaling.<role>.maxInstances` (the ScaledObject's "
    "maxReplicaCount) so that the maxima plus one surge instance fit, or raise "
    "`autoscaling-within-gpu-budget.maxGpus` in policies/config/<stack>.json once the capacity "
    "is approved.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_autoscaling_budget,
    config=schema(
        {
            "maxGpus": MAX_GPUS,
            "gpuResources": GPU_RESOURCES,
            "gpuDeviceClasses": GPU_DEVICE_CLASSES,
        }
    ),
    tags=["gpu", "cost", "autoscaling"],
)

POLICIES = [autoscaling_within_gpu_budget]
