"""The fabric preflight Job (llmd_fleet/layers/preflight/component.py, docs/preflight.md): its pods take the
devices the serving pods take, and it ends in bounded time with bounded retries."""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.conventions import PREFLIGHT_COMPONENT
from llmd_fleet.policies.rules._base import Report, Resource, as_int, schema, stack_rule
from llmd_fleet.policies.rules._config import GPU_DEVICE_CLASSES, GPU_RESOURCES, NIC_DEVICE_CLASSES
from llmd_fleet.policies.rules._dra import claim_index, container_claim_names, pod_claims, with_stack_classes
from llmd_fleet.policies.rules._k8s import PodTemplate, device_plugin_gpus, pod_templates
from llmd_fleet.policies.rules._serving import serving_roles

COMPONENT_LABEL = "app.kubernetes.io/component"
# Kubernetes' own default when a Job sets no backoffLimit (batch/v1 JobSpec).
DEFAULT_BACKOFF_LIMIT = 6


def is_preflight(resource: Resource) -> bool:
    return (
        resource.is_kubernetes_object
        and resource.kind == "Job"
        and resource.labels.get(COMPONENT_LABEL) == PREFLIGHT_COMPONENT
    )


def claim_shape(
    template: PodTemplate, claims: dict[tuple[str, str, str], Resource], cfg: dict[str, Any]
) -> tuple[Any, ...] | None:
    """What one pod of the template is given: its DRA device requests (class and count, names
    aside, sorted) and its device-plugin GPUs; None when a claim's source is not in the stack."""
    requests = []
    for claim in pod_claims(template, claims):
        if claim.requests is None:
            return None
        requests += [(r.classes, -1 if r.count is None else r.count) for r in claim.requests]
    return (tuple(sorted(requests)), device_plugin_gpus(template.spec, cfg["gpuResources"]))


def _describe(shape: tuple[Any, ...]) -> str:
    requests, plugin = shape
    counted: dict[str, int] = {}
    for classes, count in requests:
        key = "|".join(classes)
        counted[key] = counted.get(key, 0) + (count if count >= 0 else 0)
    parts = [f"{n} x {c}" for c, n in sorted(counted.items())] + (
        [f"{plugin} device-plugin GPUs"] if plugin else []
    )
    return ", ".join(parts) or "no devices"


def _check_preflight(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    jobs = [r for r in resources if is_preflight(r)]
    if not jobs:
        return
    cfg = with_stack_classes(resources, cfg)
    claims = claim_index(resources)
    serving = [
        (role.where(), claim_shape(role.worker, claims, cfg))
        for role in serving_roles(resources)
        if role.worker.workload.kind != "Job"
    ]
    for job in jobs:
        spec = job.props.get("spec") or {}
        deadline = as_int(spec.get("activeDeadlineSeconds"))
        if deadline is None or not 0 < deadline <= cfg["maxDeadlineSeconds"]:
            report(
                f"{job.ref()}: activeDeadlineSeconds is {deadline if deadline is not None else 'unset'}; "
                f"a preflight must end within {cfg['maxDeadlineSeconds']} s (a pending probe pod would "
                "otherwise hold the first deploy forever)",
                job,
            )
        backoff = as_int(spec.get("backoffLimit"))
        if backoff is None or backoff > cfg["maxBackoffLimit"]:
            shown = (
                f"unset (Kubernetes retries {DEFAULT_BACKOFF_LIMIT} times)" if backoff is None else backoff
            )
            report(
                f"{job.ref()}: backoffLimit is {shown}; at most {cfg['maxBackoffLimit']}: a fabric that "
                "fails the probe fails it again",
                job,
            )
        for template in pod_templates(job):
            if missing := {c.name for c in pod_claims(template, claims)} - container_claim_names(template):
                report(
                    f"{job.ref()}: pod claims {', '.join(sorted(missing))} are given to no container, so "
                    "the probe would not see the NICs it is meant to test",
                    job,
                )
            shape = claim_shape(template, claims, cfg)
            for where, expected in serving:
                if shape != expected:
                    got = _describe(shape) if shape is not None else "a claim the stack does not declare"
                    want = (
                        _describe(expected) if expected is not None else "a claim the stack does not declare"
                    )
                    report(
                        f"{job.ref()}: its pods request {got}, {where} requests {want}; the preflight must "
                        "test the devices the serving pods get",
                        job,
                    )


preflight_job = stack_rule(
    name="preflight-job",
    description="A fabric preflight Job requests the same devices (DRA claim shape or device-plugin "
    "GPUs) as the serving pods, and ends in bounded time with bounded retries.",
    remediation="Render the preflight from the stack (`serving.preflight`, "
    "llmd_fleet/layers/preflight/component.py): "
    "it takes the serving ResourceClaimTemplate, activeDeadlineSeconds from deadlineMinutes and "
    "backoffLimit 1.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_preflight,
    config=schema(
        {
            "maxDeadlineSeconds": {
                "type": "integer",
                "minimum": 60,
                "default": 14400,
                "description": "Longest activeDeadlineSeconds a preflight Job may set.",
            },
            "maxBackoffLimit": {
                "type": "integer",
                "minimum": 0,
                "default": 3,
                "description": "Most pod retries a preflight Job may allow.",
            },
            "gpuResources": GPU_RESOURCES,
            "gpuDeviceClasses": GPU_DEVICE_CLASSES,
            "nicDeviceClasses": NIC_DEVICE_CLASSES,
        }
    ),
    tags=["serving", "fabric"],
)

POLICIES = [preflight_job]
