"""What a real install of the platform leaves in a cluster, as the twin stands in for it: the
gateway's GatewayClass CRD, class and controller Deployment, and (without the LWS controller's
source) the LWS CRD and webhooks by name and rules. The quickstart walk applies these before the
document's `llmd-fleet doctor`; `make doctor-twin` (doctor.py) applies them too and then breaks the
twin; `prepared_objects` is the cluster tests/cli/test_doctor.py reads. docs/twin.md ("doctor on
the twin") lists each stand-in.
"""

import copy
import functools
from pathlib import Path
from typing import Any

from devtools.twin.nodes import twin_objects
from llmd_fleet.core.yaml_documents import yaml_documents
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.versions import versions

GATEWAY_NAMESPACE = "agentgateway-system"
GATEWAY_CONTROLLER = "agentgateway.dev/agentgateway"
# The agentgateway controller image repository; the tag is the pinned chart version
# (images/versions.toml [charts.agentgateway]): doctor reads the version from the tag.
GATEWAY_IMAGE = "cr.agentgateway.dev/controller"

STANDINS = (
    "the GatewayClass CRD of the pinned Gateway API release (schemas/crds has rendered kinds only)",
    "GatewayClass agentgateway (the gateway chart's)",
    f"Deployment {GATEWAY_NAMESPACE}/agentgateway at the pinned version (kwok runs its pod)",
)
LWS_STANDINS = (
    "the LeaderWorkerSet CRD and the LWS webhooks (no LWS source snapshot: upstream's names and rules)",
)


@functools.cache
def _vendored_crds(root: Path) -> tuple[dict[str, Any], ...]:
    """The CRDs of schemas/crds (parsed once; callers get copies)."""
    crds = []
    for path in sorted((root / "schemas" / "crds").rglob("*.yaml")):
        for document in yaml_documents(path.read_bytes()):
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                crds.append(document)
    return tuple(crds)


def lws_standins() -> list[dict[str, Any]]:
    """The LeaderWorkerSet CRD (its served version) and upstream's webhook configurations, by
    name and rules only (no service: nothing answers them)."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }

    def hook(name: str, group: str, resource: str) -> dict[str, Any]:
        return {
            "name": name,
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [resource],
                }
            ],
        }

    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [hook("mleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets")],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [
            hook("vleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets"),
            hook("vdisaggregatedset.kb.io", "disaggregatedset.x-k8s.io", "disaggregatedsets"),
        ],
    }
    return [crd, mutating, validating]


APPROVAL = "api-approved.kubernetes.io"


def _gateway_approval() -> str:
    from devtools.twin import cluster

    for crd in _vendored_crds(cluster.PROJECT_ROOT):
        if crd["spec"]["group"] == "gateway.networking.k8s.io":
            return str(crd["metadata"]["annotations"][APPROVAL])
    raise KeyError("no vendored Gateway API CRD carries the approval annotation")


def gatewayclass_crd() -> dict[str, Any]:
    """The GatewayClass CRD of the Gateway API release the stack pins (schemas/crds vendors only the
    kinds the stacks render): its name, served version and bundle annotation, no schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "gatewayclasses.gateway.networking.k8s.io",
            # The approval annotation of the Gateway API's protected group, as the vendored
            # Gateway CRD of the same release carries it.
            "annotations": {
                "gateway.networking.k8s.io/bundle-version": versions().manifest("gateway-api").version,
                APPROVAL: _gateway_approval(),
            },
        },
        "spec": {
            "group": "gateway.networking.k8s.io",
            "names": {"kind": "GatewayClass", "plural": "gatewayclasses", "singular": "gatewayclass"},
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def gateway_standins() -> list[dict[str, Any]]:
    """The GatewayClass and the controller Deployment an agentgateway install leaves."""
    version = versions().chart("agentgateway").version
    labels = {"app.kubernetes.io/name": "agentgateway"}
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "agentgateway"},
            "spec": {"controllerName": GATEWAY_CONTROLLER},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "agentgateway", "namespace": GATEWAY_NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "controller", "image": f"{GATEWAY_IMAGE}:{version}"}],
                        # kwok's fake nodes: the pod is scheduled there and marked ready.
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            },
        },
    ]


def prepared_objects(config: StackConfig, root: Path, lws_running: bool = False) -> list[dict[str, Any]]:
    """Everything doctor expects of a prepared cluster for `config`, fresh copies each call."""
    objects = [
        *twin_objects(config.fleet.node_groups),
        *_vendored_crds(root),
        *([] if lws_running else lws_standins()),
        gatewayclass_crd(),
        *gateway_standins(),
    ]
    return copy.deepcopy(objects)


def prepare(kube: Any, lws_running: bool) -> list[str]:
    """Apply the stand-ins a real install leaves (the twin made the rest); their descriptions."""
    from devtools.twin.engine import ensure_platform

    ensure_platform(kube)
    from devtools.twin.kube import wait_for

    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GATEWAY_NAMESPACE}})
    crd = gatewayclass_crd()
    kube.apply(crd)

    def established() -> bool:
        conditions = (kube.read(crd).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("the GatewayClass CRD Established", established, timeout=60)
    made = [*gateway_standins(), *([] if lws_running else _applicable(lws_standins()))]
    for obj in made:
        kube.apply(obj)
    return [*STANDINS, *([] if lws_running else LWS_STANDINS)]


def _applicable(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The LWS stand-ins as an API server takes them: each webhook needs a client config, and
    nothing answers it, so it is ignored on failure (the stand-in admits everything)."""
    for obj in objects:
        for hook in obj.get("webhooks") or []:
            hook.update(
                {
                    "clientConfig": {"url": "https://127.0.0.1:9/never"},
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 1,
                }
            )
    return objects
