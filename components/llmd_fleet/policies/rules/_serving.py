"""Serving roles: the pod templates of one DisaggregatedSet role / LeaderWorkerSet / Deployment
that run `vllm serve`, with the parsed command and the GPUs each pod gets."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmd_fleet.policies.rules._base import Resource
from llmd_fleet.policies.rules._dra import claim_index, claimed_gpus, pod_claims
from llmd_fleet.policies.rules._k8s import (
    ENGINE_CONTAINER,
    PodTemplate,
    containers,
    device_plugin_gpus,
    pod_templates,
)
from llmd_fleet.policies.rules._serve import ServeArgs, serve_args


@dataclass(frozen=True)
class ServingRole:
    workload: Resource
    name: str | None
    """Role (`prefill`, `decode`, ...), from the DisaggregatedSet or the `llm-d.ai/role` label."""
    templates: tuple[PodTemplate, ...]
    """Leader template first when the LeaderWorkerSet has one, then the worker template."""
    args: ServeArgs

    @property
    def worker(self) -> PodTemplate:
        return self.templates[-1]

    @property
    def group_size(self) -> int:
        return self.worker.group_size

    def where(self) -> str:
        return self.worker.where()

    @property
    def kind(self) -> str:
        """`prefill`, `decode` or '' from the role name."""
        name = (self.name or "").lower()
        return next((k for k in ("prefill", "decode") if name.startswith(k)), "")


def engine_args(template: PodTemplate) -> ServeArgs | None:
    """The `vllm serve` command of a pod template (container `vllm` first, then any container)."""
    ordered = sorted(containers(template.spec), key=lambda c: c.name != ENGINE_CONTAINER)
    for c in ordered:
        args = serve_args(c)
        if args is not None:
            return args
    return None


def serving_roles(resources: Iterable[Resource]) -> list[ServingRole]:
    roles = []
    for resource in resources:
        by_prefix: dict[str, list[PodTemplate]] = {}
        for template in pod_templates(resource):
            prefix = template.path.split(".leaderWorkerTemplate.")[0]
            by_prefix.setdefault(prefix, []).append(template)
        for templates in by_prefix.values():
            args = engine_args(templates[-1]) or engine_args(templates[0])
            if args is not None:
                roles.append(ServingRole(resource, templates[-1].role, tuple(templates), args))
    return roles


def pod_gpus(
    template: PodTemplate, claims: dict[tuple[str, str, str], Resource], cfg: dict[str, Any]
) -> int | None:
    """GPUs one pod of the template gets: device-plugin resources plus DRA GPU claims (None when
    a claim's source is not in the stack)."""
    plugin = device_plugin_gpus(template.spec, cfg["gpuResources"])
    dra = claimed_gpus(pod_claims(template, claims), cfg["gpuDeviceClasses"])
    return None if dra is None else plugin + dra


def group_gpus(
    role: ServingRole, claims: dict[tuple[str, str, str], Resource], cfg: dict[str, Any]
) -> int | None:
    """GPUs of one instance (LWS group): leader + (size - 1) workers, or size x worker."""
    per_template = [pod_gpus(t, claims, cfg) for t in role.templates]
    if any(g is None for g in per_template):
        return None
    if len(role.templates) == 2:
        leader, worker = per_template
        return (leader or 0) + (role.group_size - 1) * (worker or 0)
    return role.group_size * (per_template[0] or 0)


def stack_claims(resources: Iterable[Resource]) -> dict[tuple[str, str, str], Resource]:
    return claim_index(resources)
