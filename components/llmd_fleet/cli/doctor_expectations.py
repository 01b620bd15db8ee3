"""What `llmd-fleet doctor` expects of a cluster for one stack, read from the stack's own render:
the DeviceClasses its claims name and the attributes they match on, each role's pod (GPUs, CPU,
memory, shm) and node selector, the gateway class and implementation, the namespaces, the Secrets
its pods read and the ones it creates. The checks (cli/doctor.py) compare this with the cluster.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from llmd_fleet.conventions import GPU_RESOURCE
from llmd_fleet.platform.dra import GPU_DEVICE_CLASS
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.targets.specs import SPECS


@dataclass(frozen=True)
class RolePod:
    """One role's serving pod as the stack renders it."""

    role: str
    pods: int
    node_selector: tuple[tuple[str, str], ...]
    cpu: Decimal
    memory: Decimal
    shm: Decimal
    gpus: int
    claim_template: str | None


@dataclass(frozen=True)
class Expectations:
    stack: str
    kind: str
    platform: str
    kubernetes_version: str
    allocation: str
    """dra, device-plugin or none: how the GPU node groups hand out GPUs."""
    namespace: str
    serving: str
    claim_classes: tuple[str, ...]
    """DeviceClasses the claim templates name."""
    created_classes: tuple[str, ...]
    """DeviceClasses the stack creates itself."""
    match_attributes: tuple[str, ...]
    roles: tuple[RolePod, ...]
    gateway: str | None
    gateway_class: str | None
    implementation: str
    creates_gateway_class: bool
    secrets_read: tuple[str, ...]
    """Secrets the pods read (name), in the serving namespace or their own."""
    secrets_created: tuple[str, ...]
    releases: tuple[str, ...]
    """Helm releases the stack declares (platform install)."""

    @property
    def creates_cluster(self) -> bool:
        return SPECS[self.kind].creates_cluster

    @property
    def installs(self) -> bool:
        return self.platform == "install"


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (`64`, `500m`, `1824Gi`) as a number; 0 when it is not one."""
    from kubernetes.utils.quantity import parse_quantity

    try:
        return Decimal(parse_quantity(str(value)))  # type: ignore[no-untyped-call]
    except (ValueError, InvalidOperation, TypeError):
        return Decimal(0)


def gib(value: Decimal) -> str:
    return f"{value / (1024**3):.0f}Gi"


def _pod_specs(obj: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every pod spec inside a rendered object (Deployments, Jobs, DisaggregatedSet roles)."""
    if not isinstance(obj, dict):
        return
    for key, value in obj.items():
        if key in ("workerTemplate", "leaderTemplate", "template") and isinstance(value, dict):
            spec = value.get("spec")
            if isinstance(spec, dict) and "containers" in spec:
                yield spec
                continue
        if isinstance(value, dict):
            yield from _pod_specs(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from _pod_specs(item)


def _secrets_of(spec: dict[str, Any]) -> set[str]:
    names: set[str] = {s.get("name", "") for s in spec.get("imagePullSecrets") or []}
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            names.add(volume["secret"].get("secretName", ""))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                names.add(source["secret"].get("name", ""))
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                names.add(ref.get("name", ""))
        for source in container.get("envFrom") or []:
            if "secretRef" in source:
                names.add(source["secretRef"].get("name", ""))
    return {n for n in names if n}


def expectations(
    stack: str, config: StackConfig, objects: list[dict[str, Any]], releases: list[str]
) -> Expectations:
    """What the stack relies on: read from its rendered objects and Helm releases."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    templates = {t["metadata"]["name"]: t for t in by_kind.get("ResourceClaimTemplate", [])}
    claim_classes: list[str] = []
    attributes: list[str] = []
    gpus_per_template: dict[str, int] = {}
    for name, template in templates.items():
        devices = ((template.get("spec") or {}).get("spec") or {}).get("devices") or {}
        gpus = 0
        for request in devices.get("requests") or []:
            exactly = request.get("exactly") or {}
            device_class = exactly.get("deviceClassName")
            if device_class and device_class not in claim_classes:
                claim_classes.append(device_class)
            if device_class == GPU_DEVICE_CLASS:
                gpus += int(exactly.get("count", 1)) if exactly.get("allocationMode") != "All" else 0
        for constraint in devices.get("constraints") or []:
            if constraint.get("matchAttribute") and constraint["matchAttribute"] not in attributes:
                attributes.append(constraint["matchAttribute"])
        gpus_per_template[name] = gpus
    roles: list[RolePod] = []
    for ds in by_kind.get("DisaggregatedSet", []):
        for role in (ds.get("spec") or {}).get("roles") or []:
            spec = role.get("spec") or {}
            lwt = spec.get("leaderWorkerTemplate") or {}
            pod = ((lwt.get("workerTemplate") or {}).get("spec")) or {}
            requests: dict[str, Decimal] = {"cpu": Decimal(0), "memory": Decimal(0)}
            gpus = 0
            for container in pod.get("containers") or []:
                resources = container.get("resources") or {}
                for resource in ("cpu", "memory"):
                    requests[resource] += quantity((resources.get("requests") or {}).get(resource, 0))
                gpus += int(quantity((resources.get("limits") or {}).get(GPU_RESOURCE, 0)))
            claim = next((c.get("resourceClaimTemplateName") for c in pod.get("resourceClaims") or []), None)
            if claim:
                gpus += gpus_per_template.get(claim, 0)
            shm = sum(
                (
                    quantity((v.get("emptyDir") or {}).get("sizeLimit", 0))
                    for v in pod.get("volumes") or []
                    if (v.get("emptyDir") or {}).get("medium") == "Memory"
                ),
                Decimal(0),
            )
            roles.append(
                RolePod(
                    role=str(role.get("name")),
                    pods=int(spec.get("replicas", 1)) * int(lwt.get("size", 1)),
                    node_selector=tuple(sorted((pod.get("nodeSelector") or {}).items())),
                    cpu=requests["cpu"],
                    memory=requests["memory"],
                    shm=shm,
                    gpus=gpus,
                    claim_template=claim,
                )
            )
    gateways = by_kind.get("Gateway", [])
    read: set[str] = set()
    for obj in objects:
        for spec in _pod_specs(obj):
            read |= _secrets_of(spec)
    created = {o["metadata"]["name"] for o in by_kind.get("Secret", [])}
    groups = {g.accelerator_allocation for g in config.fleet.node_groups.values()}
    allocation = "dra" if "dra" in groups else "device-plugin" if "device-plugin" in groups else "none"
    return Expectations(
        stack=stack,
        kind=config.target.kind,
        platform=config.target.platform,
        kubernetes_version=config.target.kubernetes_version,
        allocation=allocation,
        namespace=config.serving.namespace,
        serving=config.serving.name,
        claim_classes=tuple(claim_classes),
        created_classes=tuple(sorted(o["metadata"]["name"] for o in by_kind.get("DeviceClass", []))),
        match_attributes=tuple(attributes),
        roles=tuple(roles),
        gateway=gateways[0]["metadata"]["name"] if gateways else None,
        gateway_class=(gateways[0].get("spec") or {}).get("gatewayClassName") if gateways else None,
        implementation=config.gateway.implementation,
        creates_gateway_class=bool(by_kind.get("GatewayClass")),
        secrets_read=tuple(sorted(read)),
        secrets_created=tuple(sorted(created)),
        releases=tuple(sorted(releases)),
    )


# --- The checks.
