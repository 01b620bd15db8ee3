"""Dynamic Resource Allocation (resource.k8s.io): device requests of ResourceClaims and
ResourceClaimTemplates, and what the claims of a pod template allocate.

Shapes: resource.k8s.io/v1 requests are `{name, exactly{deviceClassName, count, allocationMode}}`
or `{name, firstAvailable[...]}`; v1beta1 puts deviceClassName/count/allocationMode on the
request itself. Pods list `spec.resourceClaims[{name, resourceClaimTemplateName |
resourceClaimName}]` and containers `resources.claims[{name, request?}]`.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmd_fleet.policies.rules._base import Resource, as_int, dig
from llmd_fleet.policies.rules._k8s import PodTemplate, containers, iter_strings


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    classes: tuple[str, ...]
    """Device classes the request may use (more than one for a prioritized list)."""
    count: int | None
    """Devices requested; None for allocationMode All."""


def _request(raw: dict[str, Any]) -> DeviceRequest:
    name = str(raw.get("name") or "?")
    options = raw.get("firstAvailable")
    body: dict[str, Any]
    if isinstance(options, list) and options:
        first = options[0] if isinstance(options[0], dict) else {}
        classes = tuple(str(o.get("deviceClassName")) for o in options if isinstance(o, dict))
        body = first
    else:
        exactly = raw.get("exactly")
        body = exactly if isinstance(exactly, dict) else raw
        classes = (str(body.get("deviceClassName")),) if body.get("deviceClassName") else ()
    if body.get("allocationMode") == "All":
        return DeviceRequest(name, classes, None)
    count = as_int(body.get("count"))
    return DeviceRequest(name, classes, 1 if count is None else count)


_NIC_SELECTOR = re.compile(r"dra\.net|rdma|efa|netdev", re.IGNORECASE)


def with_stack_classes(resources: Iterable[Resource], cfg: dict[str, Any]) -> dict[str, Any]:
    """Config with the stack's own DeviceClasses added by what their selectors pick: GPU classes
    (the NVIDIA GPU driver, or an extended resource name that is a GPU resource) and NIC classes
    (DRANET's `dra.net` driver, RDMA, EFA or netdev devices)."""
    gpu, nic = set(cfg.get("gpuDeviceClasses") or []), set(cfg.get("nicDeviceClasses") or [])
    for r in resources:
        if not (r.is_kubernetes_object and r.kind == "DeviceClass"):
            continue
        spec = r.props.get("spec") or {}
        text = " ".join(value for _, value in iter_strings(spec.get("selectors") or []))
        if "gpu.nvidia.com" in text or spec.get("extendedResourceName") in (cfg.get("gpuResources") or []):
            gpu.add(r.object_name)
        elif _NIC_SELECTOR.search(text):
            nic.add(r.object_name)
    return {**cfg, "gpuDeviceClasses": sorted(gpu), "nicDeviceClasses": sorted(nic)}


def claim_devices(resource: Resource) -> dict[str, Any]:
    """`devices` of a ResourceClaim (spec.devices) or ResourceClaimTemplate (spec.spec.devices)."""
    path = ("spec", "spec", "devices") if resource.kind == "ResourceClaimTemplate" else ("spec", "devices")
    devices = dig(resource.props, *path)
    return devices if isinstance(devices, dict) else {}


def device_requests(devices: dict[str, Any]) -> list[DeviceRequest]:
    return [_request(r) for r in devices.get("requests") or [] if isinstance(r, dict)]


def is_class(request: DeviceRequest, classes: Iterable[str]) -> bool:
    wanted = set(classes)
    return any(c in wanted for c in request.classes)


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's spec.resourceClaims, resolved when the stack declares its source."""

    name: str
    source: str
    """`ResourceClaimTemplate <name>` or `ResourceClaim <name>`."""
    requests: list[DeviceRequest] | None
    """Requests of the source object, None when the stack does not declare it."""


def claim_index(resources: Iterable[Resource]) -> dict[tuple[str, str, str], Resource]:
    """ResourceClaims and ResourceClaimTemplates by (kind, namespace, name)."""
    return {
        (r.kind, r.namespace, r.object_name): r
        for r in resources
        if r.is_kubernetes_object and r.kind in ("ResourceClaim", "ResourceClaimTemplate")
    }


def pod_claims(template: PodTemplate, index: dict[tuple[str, str, str], Resource]) -> list[PodClaim]:
    found = []
    for entry in template.spec.get("resourceClaims") or []:
        if not isinstance(entry, dict):
            continue
        nested = entry.get("source")
        source: dict[str, Any] = nested if isinstance(nested, dict) else entry
        if source.get("resourceClaimTemplateName"):
            kind, ref = "ResourceClaimTemplate", str(source["resourceClaimTemplateName"])
        elif source.get("resourceClaimName"):
            kind, ref = "ResourceClaim", str(source["resourceClaimName"])
        else:
            continue
        target = index.get((kind, template.workload.namespace, ref))
        requests = device_requests(claim_devices(target)) if target is not None else None
        found.append(PodClaim(str(entry.get("name") or "?"), f"{kind} {ref}", requests))
    return found


def claimed_gpus(claims: list[PodClaim], gpu_classes: Iterable[str]) -> int | None:
    """GPUs the pod's claims allocate; None when a claim is unresolved or takes `All` GPUs."""
    total = 0
    for claim in claims:
        if claim.requests is None:
            return None
        for request in claim.requests:
            if is_class(request, gpu_classes):
                if request.count is None:
                    return None
                total += request.count
    return total


def container_claim_names(template: PodTemplate) -> set[str]:
    """Pod claims some container lists in resources.claims."""
    names = set()
    for c in containers(template.spec):
        for ref in dig(c.spec, "resources", "claims") or []:
            if isinstance(ref, dict) and ref.get("name"):
                names.add(str(ref["name"]))
    return names
