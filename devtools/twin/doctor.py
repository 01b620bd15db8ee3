"""What `make doctor-twin` puts into the quickstart's twin: only what a real install of the
platform leaves behind, each stand-in listed (docs/twin.md "doctor on the twin").

- the twin's own nodes, ResourceSlices and the `gpu.nvidia.com` DeviceClass (devtools/twin/nodes.py);
- the vendored CRDs (schemas/crds/), as the charts and release manifests would install them;
- the LWS CRDs and webhooks: the real controller's when it runs (built from its source snapshot),
  else stand-ins with upstream's webhook names and rules (config/webhook/manifests.yaml at the
  pinned commit);
- the GatewayClass `agentgateway` and the gateway controller's Deployment at the pinned version
  (kwok marks its pods ready; nothing runs);
- after `pulumi up`, the Gateway's address, set on its status as a gateway controller would.

`prepared_objects` is also the cluster the offline doctor tests read (tests/cli/test_doctor.py),
so the twin and the tests check the same picture.
"""

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from devtools.twin.nodes import twin_objects
from llmd_fleet.config.stack import StackConfig
from llmd_fleet.versions import versions

GATEWAY_NAMESPACE = "agentgateway-system"
GATEWAY_CONTROLLER = "agentgateway.dev/agentgateway"
# The agentgateway controller image repository; the tag is the pinned chart version
# (images/versions.toml [charts.agentgateway]): doctor reads the version from the tag.
GATEWAY_IMAGE = "cr.agentgateway.dev/controller"
GATEWAY_ADDRESS = "10.96.0.80"

STANDINS = (
    "GatewayClass agentgateway (the gateway chart's)",
    f"Deployment {GATEWAY_NAMESPACE}/agentgateway at the pinned version (kwok runs its pod)",
    "the Gateway's status address (a gateway controller sets it)",
)
LWS_STANDINS = (
    "the LeaderWorkerSet CRD and the LWS webhooks (no LWS source snapshot: upstream's names and rules)",
)


@functools.cache
def _vendored_crds(root: Path) -> tuple[dict[str, Any], ...]:
    """The CRDs of schemas/crds (parsed once; callers get copies)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = []
    for path in sorted((root / "schemas" / "crds").rglob("*.yaml")):
        for document in yaml.load_all(path.read_bytes(), Loader=loader):
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
        *gateway_standins(),
    ]
    return copy.deepcopy(objects)
