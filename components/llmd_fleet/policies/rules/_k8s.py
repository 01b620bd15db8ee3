"""Kubernetes views: pod templates of any workload kind, containers, selectors, GPU counts.

Conventions the fleet's objects follow (checked against components/ by tests/policies/):
serving pods run vLLM in container `vllm`, decode pods carry llm-d's routing sidecar as the
native-sidecar initContainer `routing-proxy`, and the router (llm-d endpoint picker) is a workload
labelled `app.kubernetes.io/component: endpoint-picker` whose container is `epp`.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from llmd_fleet.policies.rules._base import Resource, as_int, dig

ENGINE_CONTAINER = "vllm"
SIDECAR_CONTAINER = "routing-proxy"
ROUTER_CONTAINER = "epp"
COMPONENT_LABEL = "app.kubernetes.io/component"
ROUTER_COMPONENT = "endpoint-picker"
ROLE_LABEL = "llm-d.ai/role"
MODEL_LABEL = "llm-d.ai/model"

# Kinds whose spec carries pod templates, and where.
_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController"}
WORKLOAD_KINDS = frozenset({*_TEMPLATE_KINDS, "Pod", "Job", "CronJob", "LeaderWorkerSet", "DisaggregatedSet"})
WORKLOAD_TYPES = tuple(f":{kind}" for kind in sorted(WORKLOAD_KINDS))


@dataclass(frozen=True)
class PodTemplate:
    """One pod template of a workload and how many pods use it."""

    workload: Resource
    path: str
    """Where the template sits in the object, e.g.
    `spec.roles[1].spec.leaderWorkerTemplate.workerTemplate`."""
    role: str | None
    """DisaggregatedSet role name, else the `llm-d.ai/role` label."""
    labels: dict[str, str]
    spec: dict[str, Any]
    pods: int | None
    """Pods created from this template (None when the node count decides, as for DaemonSets)."""
    group_size: int
    """Pods per LeaderWorkerSet group (1 outside LeaderWorkerSets)."""
    groups: int | None
    """LeaderWorkerSet groups (replicas x slices); None outside LeaderWorkerSets."""
    leader: bool = False
    """True for an LWS leaderTemplate (one pod per group)."""
    surge_pods: int = 0
    """Pods created from this template beyond `pods` while a rolling update surges."""
    surge_blocks_rollout: bool = False
    """True when the rollout waits for surge pods before taking any old pod down
    (maxUnavailable 0): a surge that cannot schedule stalls it."""

    def where(self) -> str:
        """Workload and role (or template path) for messages."""
        if self.role:
            return f"{self.workload.ref()} role {self.role}"
        if self.path.endswith(".leaderWorkerTemplate.workerTemplate"):
            return f"{self.workload.ref()} workers"
        if self.path.endswith(".leaderWorkerTemplate.leaderTemplate"):
            return f"{self.workload.ref()} leader"
        if self.path not in ("spec", "spec.template"):
            return f"{self.workload.ref()} {self.path}"
        return self.workload.ref()


def _labels(metadata: Any) -> dict[str, str]:
    labels = dig(metadata, "labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _rollout_amount(value: Any, replicas: int, default: int | str, round_up: bool) -> int:
    """maxSurge/maxUnavailable as a count: an int, or a percentage of replicas (Kubernetes rounds
    maxSurge up and maxUnavailable down)."""
    if value is None:
        value = default
    if isinstance(value, str) and value.endswith("%") and value[:-1].strip().isdigit():
        scaled = int(value[:-1]) * replicas
        return -(-scaled // 100) if round_up else scaled // 100
    return as_int(value) or 0


def _surge(
    rolling: Any, replicas: int, surge_default: int | str, unavailable_default: int | str
) -> tuple[int, bool]:
    """(replicas added while surging, whether the rollout waits for them)."""
    rolling = rolling if isinstance(rolling, dict) else {}
    surge = _rollout_amount(rolling.get("maxSurge"), replicas, surge_default, round_up=True)
    unavailable = _rollout_amount(
        rolling.get("maxUnavailable"), replicas, unavailable_default, round_up=False
    )
    return surge, surge > 0 and unavailable == 0


def _lws_templates(
    workload: Resource, lws_spec: Any, path: str, role: str | None, multiplier: int
) -> list[PodTemplate]:
    lwt = dig(lws_spec, "leaderWorkerTemplate") or {}
    size = as_int(lwt.get("size")) or 1
    replicas = as_int(dig(lws_spec, "replicas"))
    groups = (1 if replicas is None else replicas) * multiplier
    # LeaderWorkerSet defaults: maxUnavailable 1, maxSurge 0 (rollingUpdateConfiguration).
    surge_groups, blocks = _surge(
        dig(lws_spec, "rolloutStrategy", "rollingUpdateConfiguration"), groups // multiplier, 0, 1
    )
    surge_groups *= multiplier
    worker = lwt.get("workerTemplate") or {}
    leader = lwt.get("leaderTemplate")
    found = []
    if isinstance(leader, dict):
        found.append(
            PodTemplate(
                workload,
                f"{path}.leaderWorkerTemplate.leaderTemplate",
                role or _labels(leader.get("metadata")).get(ROLE_LABEL),
                _labels(leader.get("metadata")),
                leader.get("spec") or {},
                groups,
                size,
                groups,
                leader=True,
                surge_pods=surge_groups,
                surge_blocks_rollout=blocks,
            )
        )
        worker_pods, workers_per_group = groups * (size - 1), size - 1
    else:
        worker_pods, workers_per_group = groups * size, size
    found.append(
        PodTemplate(
            workload,
            f"{path}.leaderWorkerTemplate.workerTemplate",
            role or _labels(worker.get("metadata")).get(ROLE_LABEL),
            _labels(worker.get("metadata")),
            worker.get("spec") or {},
            worker_pods,
            size,
            groups,
            surge_pods=surge_groups * workers_per_group,
            surge_blocks_rollout=blocks,
        )
    )
    return found


def pod_templates(resource: Resource) -> list[PodTemplate]:
    """Every pod template of a workload object (empty for other kinds)."""
    if not resource.is_kubernetes_object or resource.kind not in WORKLOAD_KINDS:
        return []
    kind, spec = resource.kind, resource.props.get("spec") or {}
    if kind == "Pod":
        labels = resource.labels
        return [PodTemplate(resource, "spec", labels.get(ROLE_LABEL), labels, spec, 1, 1, None)]
    if kind in _TEMPLATE_KINDS or kind in ("Job", "CronJob"):
        if kind == "CronJob":
            spec, path = dig(spec, "jobTemplate", "spec") or {}, "spec.jobTemplate.spec.template"
        else:
            path = "spec.template"
        template = spec.get("template") or {}
        labels = _labels(template.get("metadata"))
        pods: int | None
        if kind == "DaemonSet":
            pods = None
        elif kind in ("Job", "CronJob"):
            pods = as_int(spec.get("parallelism"))
            pods = 1 if pods is None else pods
        else:
            pods = as_int(spec.get("replicas"))
            pods = 1 if pods is None else pods
        surge, blocks = 0, False
        if kind == "Deployment" and dig(spec, "strategy", "type") != "Recreate":
            # Deployment defaults: maxSurge 25%, maxUnavailable 25%.
            surge, blocks = _surge(dig(spec, "strategy", "rollingUpdate"), pods or 0, "25%", "25%")
        return [
            PodTemplate(
                resource,
                path,
                labels.get(ROLE_LABEL),
                labels,
                template.get("spec") or {},
                pods,
                1,
                None,
                surge_pods=surge,
                surge_blocks_rollout=blocks,
            )
        ]
    if kind == "LeaderWorkerSet":
        return _lws_templates(resource, spec, "spec", None, 1)
    # DisaggregatedSet: every role is an inlined LeaderWorkerSet spec; slices copy all roles.
    slices = as_int(spec.get("slices"))
    found: list[PodTemplate] = []
    for i, role in enumerate(spec.get("roles") or []):
        if isinstance(role, dict):
            found += _lws_templates(
                resource, role.get("spec") or {}, f"spec.roles[{i}].spec", role.get("name"), slices or 1
            )
    return found


def all_pod_templates(resources: Iterable[Resource]) -> list[PodTemplate]:
    return [t for r in resources for t in pod_templates(r)]


@dataclass(frozen=True)
class Container:
    """A container of a pod template: `main`, `init` or `sidecar` (init with restartPolicy Always)."""

    spec: dict[str, Any]
    kind: str

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "?")

    @property
    def image(self) -> str | None:
        image = self.spec.get("image")
        return image if isinstance(image, str) else None


def containers(pod_spec: dict[str, Any]) -> list[Container]:
    """Main containers, then init containers (native sidecars marked as such)."""
    found = [Container(c, "main") for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    for c in pod_spec.get("initContainers") or []:
        if isinstance(c, dict):
            found.append(Container(c, "sidecar" if c.get("restartPolicy") == "Always" else "init"))
    return found


def container(pod_spec: dict[str, Any], name: str) -> Container | None:
    return next((c for c in containers(pod_spec) if c.name == name), None)


def env_literal(container_spec: dict[str, Any], name: str) -> str | None:
    """The literal `value` of an env var (None when unset or taken from a reference)."""
    for env in container_spec.get("env") or []:
        if isinstance(env, dict) and env.get("name") == name and isinstance(env.get("value"), str):
            return str(env["value"])
    return None


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """A LabelSelector ({matchLabels, matchExpressions}) against labels; an empty one matches all."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != str(value):
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def is_router(template: PodTemplate) -> bool:
    """The llm-d endpoint picker: labelled as such on the workload or on its pods."""
    return ROUTER_COMPONENT in (
        template.workload.labels.get(COMPONENT_LABEL),
        template.labels.get(COMPONENT_LABEL),
    )


def router_templates(resources: Iterable[Resource]) -> list[PodTemplate]:
    return [t for t in all_pod_templates(resources) if is_router(t)]


def resource_amount(container_spec: dict[str, Any], resource_name: str) -> int:
    """Whole units of an extended resource a container gets (limits, else requests)."""
    resources = container_spec.get("resources") or {}
    for section in ("limits", "requests"):
        value = as_int(dig(resources, section, resource_name))
        if value is not None:
            return value
    return 0


def device_plugin_gpus(pod_spec: dict[str, Any], gpu_resources: Iterable[str]) -> int:
    """GPUs a pod takes through device-plugin resources (effective: sidecars and main containers
    add up, an ordinary init container only needs its own peak)."""
    names = list(gpu_resources)
    running = sum(
        sum(resource_amount(c.spec, n) for n in names)
        for c in containers(pod_spec)
        if c.kind in ("main", "sidecar")
    )
    init_peak = max(
        (sum(resource_amount(c.spec, n) for n in names) for c in containers(pod_spec) if c.kind == "init"),
        default=0,
    )
    return max(running, init_peak)


def iter_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string leaf of a nested value with its dotted path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from iter_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from iter_strings(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def index_by_name(resources: Iterable[Resource], kind: str) -> dict[tuple[str, str], Resource]:
    """Kubernetes objects of one kind by (namespace, name)."""
    return {(r.namespace, r.object_name): r for r in resources if r.is_kubernetes_object and r.kind == kind}
