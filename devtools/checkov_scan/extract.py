"""The scan directory of one stack: its rendered manifests plus every pod template that checkov
cannot see, written out as a Pod.

checkov's Kubernetes runner reads the pod templates of Deployments, DaemonSets, StatefulSets and
Jobs, but not those inside custom resources: a DisaggregatedSet holds one LeaderWorkerSet
template per role (`spec.roles[].spec.leaderWorkerTemplate`), a LeaderWorkerSet one
(`spec.leaderWorkerTemplate`), each with a `workerTemplate` and optionally a `leaderTemplate`.
Each becomes `Pod <object>-<role>-<leader|worker>` in the object's namespace, with the template's
labels and annotations (so the checkov skip annotations of the template apply).
"""

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmd_fleet.core.pod_context import SKIP_PREFIX

TEMPLATE_KEYS = (("leaderTemplate", "leader"), ("workerTemplate", "worker"))


@dataclass(frozen=True)
class ExtractedPod:
    """A pod template taken out of a custom resource."""

    source: str
    """`<Kind>/<namespace>/<name>` of the object that holds it."""
    pod: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    for document in yaml.safe_load_all(path.read_text()):
        if isinstance(document, dict):
            yield document


def _lws_templates(kind: str, spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(role, leaderWorkerTemplate) of a DisaggregatedSet's roles or of a LeaderWorkerSet."""
    if kind == "DisaggregatedSet":
        for role in spec.get("roles") or ():
            template = (role.get("spec") or {}).get("leaderWorkerTemplate")
            if template:
                yield str(role["name"]), template
    elif kind == "LeaderWorkerSet" and spec.get("leaderWorkerTemplate"):
        yield "", spec["leaderWorkerTemplate"]


def pod_templates(document: dict[str, Any]) -> list[ExtractedPod]:
    """Every pod template of one DisaggregatedSet or LeaderWorkerSet, as Pods; [] for other kinds."""
    kind = str(document.get("kind", ""))
    metadata = document.get("metadata") or {}
    name, namespace = str(metadata.get("name", "")), metadata.get("namespace")
    source = f"{kind}/{namespace or ''}/{name}"
    pods = []
    for role, lws in _lws_templates(kind, document.get("spec") or {}):
        for key, which in TEMPLATE_KEYS:
            template = lws.get(key)
            if not template:
                continue
            template_meta = template.get("metadata") or {}
            pod_meta: dict[str, Any] = {"name": "-".join(part for part in (name, role, which) if part)}
            if namespace:
                pod_meta["namespace"] = namespace
            for field in ("labels", "annotations"):
                if template_meta.get(field):
                    pod_meta[field] = dict(template_meta[field])
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": pod_meta,
                "spec": template.get("spec") or {},
            }
            pods.append(ExtractedPod(source=source, pod=pod))
    return pods


def strip_skips(document: Any) -> Any:
    """`document` without any checkov skip annotation, at any depth (what checkov would report
    if nothing were explained)."""
    if isinstance(document, dict):
        stripped = {}
        for key, value in document.items():
            if key == "annotations" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if not str(k).startswith(SKIP_PREFIX)}
                if not value:
                    continue
            stripped[key] = strip_skips(value)
        return stripped
    if isinstance(document, list):
        return [strip_skips(item) for item in document]
    return document


def write_scan_dir(manifests: Path, out: Path, without_skips: bool = False) -> list[ExtractedPod]:
    """Copy `manifests` into `out` (which is replaced) and add one file per extracted Pod under
    `out/extracted-pods/`. With `without_skips`, every checkov skip annotation is removed."""
    if not manifests.is_dir():
        raise FileNotFoundError(f"{manifests}: no rendered manifests (run llmd-fleet render first)")
    if out.exists():
        shutil.rmtree(out)
    extracted: list[ExtractedPod] = []
    for path in sorted(manifests.rglob("*.yaml")):
        documents = list(_documents(path))
        target = out / path.relative_to(manifests)
        target.parent.mkdir(parents=True, exist_ok=True)
        if without_skips:
            documents = [strip_skips(d) for d in documents]
        target.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        for document in documents:
            extracted += pod_templates(document)
    pods_dir = out / "extracted-pods"
    pods_dir.mkdir(parents=True, exist_ok=True)
    for pod in extracted:
        namespace = pod.pod["metadata"].get("namespace", "cluster")
        (pods_dir / f"pod-{namespace}-{pod.name}.yaml").write_text(yaml.safe_dump(pod.pod, sort_keys=False))
    return extracted
