"""Prometheus' Kubernetes discovery, as file-discovery target groups (pure), for the day-two
replay's Prometheus (docs/day-two.md, "Prometheus and alerts").

The scrape configuration is prometheus-operator's own (devtools/daytwo/operator_config.py), and
its jobs discover their targets with `kubernetes_sd_configs`. The replay's Prometheus is built
without Kubernetes discovery (`remove_all_sd`), and the twin's endpoint-picker pods are not where
the pickers run (the picker processes are, devtools/dataplane/run.py `start_pickers`), so each
job's Kubernetes discovery is replaced by file discovery whose targets carry the labels Prometheus'
Kubernetes discovery gives for the same objects; the operator's relabelling then selects and
names them as it would in a cluster. The labels follow Prometheus v0.314.0 (the module
`[tools].promtool` pins), `discovery/kubernetes`: `pod.go` (`buildPod`, `podLabels`, `podReady`),
`endpointslice.go` (`buildEndpointSlice`) and `kubernetes.go` (`addObjectMetaLabels`). Node and
namespace metadata (`attach_metadata`), role selectors and the other roles are not translated: a
job that asks for them is an error naming the job.
"""

import re
from collections.abc import Iterable
from typing import Any

META = "__meta_kubernetes_"
ROLES = ("pod", "endpointslice")


class DiscoveryError(Exception):
    """A generated job asks for discovery this translation does not give."""


def _sanitize(name: str) -> str:
    """strutil.SanitizeLabelName: every character outside [a-zA-Z0-9_] as `_`."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _clean(labels: dict[str, str]) -> dict[str, str]:
    """An empty label value is no label in Prometheus."""
    return {k: v for k, v in labels.items() if v != ""}


def object_meta_labels(meta: dict[str, Any], role: str) -> dict[str, str]:
    """addObjectMetaLabels: `<role>_name`, every label and annotation with its `present` twin."""
    out = {f"{META}{role}_name": meta.get("name", "")}
    for kind, values in (("label", meta.get("labels")), ("annotation", meta.get("annotations"))):
        for key, value in (values or {}).items():
            out[f"{META}{role}_{kind}_{_sanitize(key)}"] = str(value)
            out[f"{META}{role}_{kind}present_{_sanitize(key)}"] = "true"
    return out


def pod_ready(pod: dict[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status", "Unknown")).lower()
    return "unknown"


def pod_labels(pod: dict[str, Any]) -> dict[str, str]:
    """podLabels: the pod's address, readiness, phase, node, metadata and controller."""
    status, spec, meta = pod.get("status") or {}, pod.get("spec") or {}, pod["metadata"]
    out = {
        f"{META}pod_ip": status.get("podIP", ""),
        f"{META}pod_ready": pod_ready(pod),
        f"{META}pod_phase": status.get("phase", ""),
        f"{META}pod_node_name": spec.get("nodeName", ""),
        f"{META}pod_host_ip": status.get("hostIP", ""),
        f"{META}pod_uid": meta.get("uid", ""),
        **object_meta_labels(meta, "pod"),
    }
    for owner in meta.get("ownerReferences") or []:
        if owner.get("controller"):
            out[f"{META}pod_controller_kind"] = owner.get("kind", "")
            out[f"{META}pod_controller_name"] = owner.get("name", "")
    return out


def _containers(pod: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """The containers, then the initContainers (native sidecars among them), as discovery lists them."""
    spec = pod.get("spec") or {}
    return [(c, False) for c in spec.get("containers") or []] + [
        (c, True) for c in spec.get("initContainers") or []
    ]


def _container_labels(container: dict[str, Any], port: dict[str, Any] | None, init: bool) -> dict[str, str]:
    out = {
        f"{META}pod_container_name": container["name"],
        f"{META}pod_container_image": container.get("image", ""),
        f"{META}pod_container_init": "true" if init else "false",
    }
    if port is not None:
        out |= {
            f"{META}pod_container_port_name": port.get("name", ""),
            f"{META}pod_container_port_number": str(port["containerPort"]),
            f"{META}pod_container_port_protocol": port.get("protocol", "TCP"),
        }
    return out


def pod_groups(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Role `pod`: per pod with an address, one target per container port (a container without
    ports gives one target at the bare address), each with the pod's labels."""
    groups = []
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        common = pod_labels(pod) | {f"{META}namespace": pod["metadata"]["namespace"]}
        for container, init in _containers(pod):
            ports = container.get("ports") or []
            for port in ports or [None]:
                address = ip if port is None else f"{ip}:{port['containerPort']}"
                labels = _clean(common | _container_labels(container, port, init))
                groups.append({"targets": [address], "labels": labels})
    return groups


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _target_port(service_port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    """The EndpointSlice controller's port for one pod: `targetPort` by number, or by a container
    port's name; `port` when it has none."""
    target = service_port.get("targetPort", service_port["port"])
    if isinstance(target, int):
        return target
    for container, _init in _containers(pod):
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


def endpointslice_groups(
    services: Iterable[dict[str, Any]], pods: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Role `endpointslice`: per Service with a selector, the slice the EndpointSlice controller
    keeps for the ready pods it selects (one endpoint per pod, ports by name), each target with
    the slice's, the Service's and the pod's labels, and the container port it lands on."""
    groups = []
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        selector = spec.get("selector") or {}
        backing = [
            p
            for p in pods
            if p["metadata"]["namespace"] == meta["namespace"]
            and _selects(selector, p["metadata"].get("labels") or {})
            and (p.get("status") or {}).get("podIP")
        ]
        slice_meta = {"name": meta["name"], "labels": {"kubernetes.io/service-name": meta["name"]}}
        common = {
            f"{META}namespace": meta["namespace"],
            f"{META}endpointslice_address_type": "IPv4",
            **object_meta_labels(slice_meta, "endpointslice"),
            **object_meta_labels(meta, "service"),
        }
        for pod in backing:
            ready = pod_ready(pod) == "true"
            for service_port in spec.get("ports") or []:
                number = _target_port(service_port, pod)
                if number is None:
                    continue
                target = {
                    f"{META}endpointslice_port_name": service_port.get("name", ""),
                    f"{META}endpointslice_port_protocol": service_port.get("protocol", "TCP"),
                    f"{META}endpointslice_port": str(number),
                    f"{META}endpointslice_endpoint_conditions_ready": str(ready).lower(),
                    f"{META}endpointslice_endpoint_conditions_serving": str(ready).lower(),
                    f"{META}endpointslice_endpoint_conditions_terminating": "false",
                    f"{META}endpointslice_address_target_kind": "Pod",
                    f"{META}endpointslice_address_target_name": pod["metadata"]["name"],
                    f"{META}endpointslice_endpoint_node_name": (pod.get("spec") or {}).get("nodeName", ""),
                    **pod_labels(pod),
                }
                for container, init in _containers(pod):
                    port = next(
                        (p for p in container.get("ports") or [] if p["containerPort"] == number), None
                    )
                    if port is not None:
                        target |= _container_labels(container, port, init)
                        break
                address = f"{pod['status']['podIP']}:{number}"
                groups.append({"targets": [address], "labels": _clean(common | target)})
    return groups


def job_groups(
    job: dict[str, Any], pods: list[dict[str, Any]], services: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The target groups of one generated job's `kubernetes_sd_configs`, from the objects given
    (the pods and Services of the namespaces the replay lists)."""
    groups = []
    for sd in job.get("kubernetes_sd_configs") or []:
        extra = sorted(set(sd) - {"role", "namespaces"})
        role = sd.get("role")
        if extra or role not in ROLES:
            raise DiscoveryError(
                f"job {job['job_name']}: kubernetes_sd_configs with role {role!r} and "
                f"{extra or 'no other keys'}: the replay translates roles {', '.join(ROLES)} "
                "with `namespaces` only"
            )
        names = (sd.get("namespaces") or {}).get("names")
        in_ns = [p for p in pods if names is None or p["metadata"]["namespace"] in names]
        if role == "pod":
            groups += pod_groups(in_ns)
        else:
            svcs = [s for s in services if names is None or s["metadata"]["namespace"] in names]
            groups += endpointslice_groups(svcs, in_ns)
    return groups
