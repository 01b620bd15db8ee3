"""GPU and NIC allocation: one allocator per pod, NICs paired with GPUs by PCIe root, GPU
tolerations, and the stack's GPU budget."""

import re
from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.conventions import RUNS_BEFORE_ANNOTATION
from llmd_fleet.policies.rules._base import Report, Resource, as_int, dig, resource_rule, schema, stack_rule
from llmd_fleet.policies.rules._config import GPU_DEVICE_CLASSES, GPU_RESOURCES, MAX_GPUS, NIC_DEVICE_CLASSES
from llmd_fleet.policies.rules._dra import (
    DeviceRequest,
    claim_devices,
    claim_index,
    container_claim_names,
    device_requests,
    is_class,
    pod_claims,
    with_stack_classes,
)
from llmd_fleet.policies.rules._k8s import (
    WORKLOAD_TYPES,
    PodTemplate,
    all_pod_templates,
    device_plugin_gpus,
    pod_templates,
)
from llmd_fleet.policies.rules._scaling import at_autoscaling_maxima
from llmd_fleet.policies.rules._serving import pod_gpus

_DRA_DRIVER_CHARTS = ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu")


def _helm_charts(resources: list[Resource]) -> list[tuple[Resource, str, dict[str, Any]]]:
    found = []
    for r in resources:
        if r.type in ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"):
            chart = str(r.props.get("chart") or "")
            raw = r.props.get("values")
            values: dict[str, Any] = raw if isinstance(raw, dict) else {}
            found.append((r, chart.rstrip("/").rsplit("/", 1)[-1], values))
    return found


def _check_single_mechanism(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    cfg = with_stack_classes(resources, cfg)
    index = claim_index(resources)
    for template in all_pod_templates(resources):
        plugin = device_plugin_gpus(template.spec, cfg["gpuResources"])
        claims = pod_claims(template, index)
        gpu_claims = [
            c.name
            for c in claims
            if c.requests is not None and any(is_class(r, cfg["gpuDeviceClasses"]) for r in c.requests)
        ]
        if plugin and gpu_claims:
            report(
                f"{template.where()}: takes {plugin} GPU(s) from the device plugin "
                f"({', '.join(cfg['gpuResources'])}) and more through DRA claim(s) {', '.join(gpu_claims)}",
                template.workload,
            )
        listed = container_claim_names(template)
        for claim in claims:
            if claim.name not in listed:
                report(
                    f"{template.where()}: pod claim {claim.name} ({claim.source}) is listed in no "
                    "container's resources.claims, so no container can use its devices",
                    template.workload,
                )
    charts = _helm_charts(resources)
    dra = [r for r, chart, _ in charts if chart in _DRA_DRIVER_CHARTS]
    plugins = [
        r
        for r, chart, values in charts
        if chart == "nvidia-device-plugin"
        or (chart == "gpu-operator" and dig(values, "devicePlugin", "enabled") is not False)
    ]
    if dra and plugins:
        report(
            f"{dra[0].ref()} installs the NVIDIA DRA driver while {plugins[0].ref()} runs the GPU device "
            "plugin: both would hand out the same GPUs",
            plugins[0],
        )


gpu_allocation_single_mechanism = stack_rule(
    name="gpu-allocation-single-mechanism",
    description="Every pod gets its GPUs from exactly one allocator, DRA claims or the device "
    "plugin, and the cluster never runs both on the same GPUs.",
    remediation="Drop the `nvidia.com/gpu` requests/limits from pods that claim GPUs through a "
    "ResourceClaim(Template) (or drop the claim), list every pod claim in the consuming container's "
    "`resources.claims`, and set GPU Operator `devicePlugin.enabled: false` where the NVIDIA DRA "
    "driver is installed.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_single_mechanism,
    config=schema({"gpuResources": GPU_RESOURCES, "gpuDeviceClasses": GPU_DEVICE_CLASSES}),
    tags=["gpu", "dra"],
)


def _constraint_requests(constraint: dict[str, Any], requests: list[DeviceRequest]) -> list[DeviceRequest]:
    """Requests a constraint binds (all of the claim's when it names none)."""
    names = constraint.get("requests")
    if not names:
        return list(requests)
    wanted = {str(n).split("/")[0] for n in names}
    return [r for r in requests if r.name in wanted]


def _check_claim(resource: Resource, cfg: dict[str, Any], report: Report) -> None:
    devices = claim_devices(resource)
    requests = device_requests(devices)
    gpus = [r for r in requests if is_class(r, cfg["gpuDeviceClasses"])]
    nics = [r for r in requests if is_class(r, cfg["nicDeviceClasses"])]
    if not nics:
        return
    attribute = cfg["alignmentAttribute"]
    if not gpus:
        report(
            f"{resource.ref()} claims NICs ({', '.join(r.name for r in nics)}) without GPUs: constraints "
            "only apply inside one claim, so these NICs cannot be paired with the pod's GPUs by "
            f"{attribute}",
            resource,
        )
        return
    aligned = [
        _constraint_requests(c, requests)
        for c in devices.get("constraints") or []
        if isinstance(c, dict) and c.get("matchAttribute") == attribute
    ]
    for nic in nics:
        if not any(nic in group and any(g in group for g in gpus) for group in aligned):
            report(
                f"{resource.ref()}: NIC request {nic.name} shares no {attribute} constraint with a GPU "
                "request, so the scheduler may hand the pod a NIC on another PCIe root than its GPU",
                resource,
            )
    per_root = cfg["gpusPerPcieRoot"]
    for group in aligned:
        group_gpus = [g for g in group if g in gpus]
        counts = [g.count for g in group_gpus]
        total = None if None in counts else sum(c or 0 for c in counts)
        if group_gpus and (total is None or total > per_root):
            names = ", ".join(g.name for g in group_gpus)
            report(
                f"{resource.ref()}: one {attribute} constraint binds {'all' if total is None else total} "
                f"GPUs ({names}) but a node has {per_root} GPU(s) per PCIe root, so the claim can never "
                "be allocated; pair each GPU with its NIC(s) in its own constraint",
                resource,
            )


def _check_alignment(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    cfg = with_stack_classes(resources, cfg)
    for resource in resources:
        if resource.is_kubernetes_object and resource.kind in ("ResourceClaim", "ResourceClaimTemplate"):
            _check_claim(resource, cfg, report)


dra_nic_gpu_alignment = stack_rule(
    name="dra-nic-gpu-alignment",
    description="DRA claims that take GPU-fabric NICs take them in the same claim as the GPUs, "
    "each NIC paired with a GPU on the same PCIe root.",
    remediation="Put GPUs and NICs in one ResourceClaim(Template) with one request per GPU "
    "(`gpu-i`) and per NIC (`nic-i`), and one constraint `{requests: [gpu-i, nic-i], matchAttribute: "
    "resource.kubernetes.io/pcieRoot}` per pair; never one constraint over all GPUs.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_alignment,
    config=schema(
        {
            "gpuResources": GPU_RESOURCES,
            "gpuDeviceClasses": GPU_DEVICE_CLASSES,
            "nicDeviceClasses": NIC_DEVICE_CLASSES,
            "alignmentAttribute": {
                "type": "string",
                "default": "resource.kubernetes.io/pcieRoot",
                "description": "Device attribute that places a GPU and a NIC on one PCIe root.",
            },
            "gpusPerPcieRoot": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "GPUs that share one PCIe root on the fleet's nodes "
                "(1 on HGX H100, 2 on p4d).",
            },
        }
    ),
    tags=["gpu", "network", "dra"],
)


def _tolerates(tolerations: Any, key: str) -> bool:
    for t in tolerations or []:
        if not isinstance(t, dict) or t.get("effect") not in (None, "", "NoSchedule"):
            continue
        if (t.get("operator") == "Exists" and not t.get("key")) or t.get("key") == key:
            return True
    return False


def _check_toleration(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for template in pod_templates(resource):
        if device_plugin_gpus(template.spec, cfg["gpuResources"]) and not _tolerates(
            template.spec.get("tolerations"), cfg["gpuTaintKey"]
        ):
            report(f"{template.where()}: requests GPUs but does not tolerate the {cfg['gpuTaintKey']} taint")


gpu_pods_tolerate_gpu_taint = resource_rule(
    name="gpu-pods-tolerate-gpu-taint",
    description="Pods that request GPUs tolerate the GPU taint every GPU pool carries.",
    remediation="Add `{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}` to the pod "
    "template's tolerations.",
    level=EnforcementLevel.ADVISORY,
    severity=Severity.LOW,
    types=WORKLOAD_TYPES,
    check=_check_toleration,
    config=schema(
        {
            "gpuResources": GPU_RESOURCES,
            "gpuTaintKey": {
                "type": "string",
                "default": "nvidia.com/gpu",
                "description": "Taint key of GPU pools.",
            },
        }
    ),
    tags=["gpu", "scheduling"],
)

_MACHINE_GPUS = re.compile(r"-(\d+)g$")


def _launch_template_types(resources: list[Resource]) -> dict[str, str]:
    """EC2 instance type of each launch template, by the references a node group can hold: its
    `name` input, and its id (offline the mock engine's id is `<logical name>-id`; during a real
    preview a new template's id is unknown and the node group's own instanceTypes must say)."""
    types = {}
    for r in resources:
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate" and r.props.get("instanceType"):
            instance_type = str(r.props["instanceType"])
            types[f"{r.name}-id"] = instance_type
            if r.props.get("name"):
                types[str(r.props["name"])] = instance_type
    return types


def _node_pool_gpus(
    resource: Resource, cfg: dict[str, Any], launch_templates: dict[str, str]
) -> tuple[int, str] | None:
    """(GPUs at the pool's maximum size, how that was counted) for a cloud GPU node pool."""
    props = resource.props
    if resource.type == "gcp:container/nodePool:NodePool":
        node_config = props.get("nodeConfig") or {}
        per_node = sum(as_int(a.get("count")) or 0 for a in node_config.get("guestAccelerators") or [])
        machine = _MACHINE_GPUS.search(str(node_config.get("machineType") or ""))
        if not per_node and machine:
            per_node = int(machine.group(1))
        zones = len(props.get("nodeLocations") or []) or 1
        autoscaling = props.get("autoscaling") or {}
        nodes = as_int(autoscaling.get("totalMaxNodeCount"))
        if nodes is None and as_int(autoscaling.get("maxNodeCount")) is not None:
            nodes = (as_int(autoscaling.get("maxNodeCount")) or 0) * zones
        if nodes is None:
            count = as_int(props.get("nodeCount"))
            count = as_int(props.get("initialNodeCount")) if count is None else count
            nodes = (count or 0) * zones
        return (nodes * per_node, f"{nodes} nodes x {per_node} GPUs") if per_node else None
    if resource.type == "aws:eks/nodeGroup:NodeGroup":
        types = [str(t) for t in props.get("instanceTypes") or []]
        template = props.get("launchTemplate") or {}
        for ref in (template.get("id"), template.get("name")):
            if not types and ref in launch_templates:
                types = [launch_templates[str(ref)]]
        per_node = max((cfg["instanceGpus"].get(t) or 0 for t in types), default=0)
        nodes = as_int(dig(props, "scalingConfig", "maxSize")) or 0
        return (nodes * per_node, f"{nodes} nodes x {per_node} GPUs") if per_node else None
    return None


def runs_before(workload: Resource) -> tuple[str, str] | None:
    """(kind, name) a Job declares it runs before (RUNS_BEFORE_ANNOTATION), if any."""
    if workload.kind != "Job":
        return None
    value = (workload.metadata.get("annotations") or {}).get(RUNS_BEFORE_ANNOTATION)
    kind, _, name = str(value or "").partition("/")
    return (kind, name) if kind and name else None


def runs_alone(template: PodTemplate, workloads: set[tuple[str, str, str]]) -> tuple[str, str] | None:
    """The workload (kind, name) a template's Job finishes before, when that workload is in the
    stack (`workloads`: (kind, namespace, name) of every object): its GPUs are counted on their
    own, not on top of the workload's."""
    before = runs_before(template.workload)
    if before is not None and (before[0], template.workload.namespace, before[1]) in workloads:
        return before
    return None


def stack_workloads(resources: list[Resource]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every Kubernetes object of the stack."""
    return {(r.kind, r.namespace, r.object_name) for r in resources if r.is_kubernetes_object}


def _check_budget(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    budget = cfg["maxGpus"]
    if not budget:
        return
    # Autoscaled roles count at their autoscaler's maximum (autoscaling-within-gpu-budget also
    # refuses the ones nothing bounds).
    resources = at_autoscaling_maxima(resources)
    cfg = with_stack_classes(resources, cfg)
    claims = claim_index(resources)
    usage: dict[str, tuple[Resource, int, list[str]]] = {}
    surges: list[tuple[PodTemplate, int]] = []
    workloads = stack_workloads(resources)
    for template in all_pod_templates(resources):
        gpus = pod_gpus(template, claims, cfg)
        if not gpus or template.pods is None:
            continue
        before = runs_alone(template, workloads)
        if before is not None:
            # Done before the workload it precedes starts (the fabric preflight): on its own.
            if template.pods * gpus > budget:
                report(
                    f"{template.where()} requests {template.pods * gpus} GPUs before "
                    f"{before[0]} {before[1]} starts, over the stack's budget of {budget}",
                    template.workload,
                )
            continue
        resource, total, parts = usage.get(template.workload.urn, (template.workload, 0, []))
        label = template.role or template.path
        usage[template.workload.urn] = (
            resource,
            total + template.pods * gpus,
            [*parts, f"{label} {template.pods} pods x {gpus}"],
        )
        if template.surge_pods:
            surges.append((template, template.surge_pods * gpus))
    requested = sum(total for _, total, _ in usage.values())
    if requested > budget:
        ranked = sorted(usage.values(), key=lambda u: -u[1])
        detail = "; ".join(f"{r.ref()}: {total} ({', '.join(parts)})" for r, total, parts in ranked)
        report(
            f"workloads request {requested} GPUs, over the stack's budget of {budget}: {detail}", ranked[0][0]
        )
    else:
        _check_surge(requested, budget, surges, report)
    if cfg["countNodePools"]:
        templates = _launch_template_types(resources)
        pools = [(r, g) for r in resources if (g := _node_pool_gpus(r, cfg, templates)) is not None]
        provisioned = sum(g for _, (g, _) in pools)
        if provisioned > budget:
            ranked_pools = sorted(pools, key=lambda p: -p[1][0])
            detail = "; ".join(f"{r.ref()}: {how}" for r, (_, how) in ranked_pools)
            report(
                f"GPU node pools provision up to {provisioned} GPUs, over the stack's budget of "
                f"{budget}: {detail}",
                ranked_pools[0][0],
            )


def _check_surge(requested: int, budget: int, surges: list[tuple[PodTemplate, int]], report: Report) -> None:
    """A rolling update's surge pods need GPUs beyond the steady state; within the budget or the
    rollout cannot start the new pods (and, with maxUnavailable 0, never proceeds)."""
    peak = requested + sum(gpus for _, gpus in surges)
    if peak <= budget:
        return
    for template, gpus in surges:
        consequence = (
            "with maxUnavailable 0 the rollout waits for pods that cannot be placed and stalls"
            if template.surge_blocks_rollout
            else "the surge pods stay pending until old ones are gone"
        )
        report(
            f"{template.where()}: a rolling update surges {template.surge_pods} pods x "
            f"{gpus // template.surge_pods} GPUs on top of the {requested} GPUs in use, up to {peak}, "
            f"over the stack's budget of {budget}; {consequence}. Set maxSurge 0 and "
            "maxUnavailable 1, or budget (and provision) the spare capacity",
            template.workload,
        )


gpu_budget = stack_rule(
    name="gpu-budget",
    description="The GPUs a stack requests, including the surge of a rolling update, and the GPU "
    "node pools it provisions, stay within the stack's GPU budget.",
    remediation="Shrink the roles (instances, nodesPerInstance) or the node pools, or raise "
    "`gpu-budget.maxGpus` in policies/config/<stack>.json once the capacity is approved.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_budget,
    config=schema(
        {
            "maxGpus": MAX_GPUS,
            "countNodePools": {
                "type": "boolean",
                "default": True,
                "description": "Also hold the GPUs of cloud node pools at their maximum size to the budget.",
            },
            "instanceGpus": {
                "type": "object",
                "additionalProperties": {"type": "integer", "minimum": 0},
                "default": {
                    "p5.48xlarge": 8,
                    "p5e.48xlarge": 8,
                    "p5en.48xlarge": 8,
                    "p4d.24xlarge": 8,
                    "p4de.24xlarge": 8,
                },
                "description": "GPUs per EC2 instance type, for EKS node groups.",
            },
            "gpuResources": GPU_RESOURCES,
            "gpuDeviceClasses": GPU_DEVICE_CLASSES,
        }
    ),
    tags=["gpu", "cost"],
)

POLICIES = [gpu_allocation_single_mechanism, dra_nic_gpu_alignment, gpu_pods_tolerate_gpu_taint, gpu_budget]
