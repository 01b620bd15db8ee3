"""ModelExpress (`serving.weightLoading: modelexpress`): the server that coordinates peer-to-peer
weight loading between serving pods, and the pure builders of its objects.

Pods that already serve the model publish where their weights sit in GPU memory; a pod that starts
asks the server for a source and receives the weights over NIXL instead of downloading them, or
falls back to the hub when no peer has them. The server keeps that metadata in the cluster (its
Kubernetes backend: ModelMetadata and ModelCacheEntry custom resources, ConfigMaps), so it needs
their CRDs and a namespaced Role. Facts (ports, env, RBAC verbs, CRD file) are those of
ai-dynamo/modelexpress at the tag images/versions.toml pins (examples/p2p_transfer_k8s/server/
kubernetes_backend/ and examples/crds.yaml at the pinned tag).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import (
    TOKENIZER_SKIPS,
    restricted_container_context,
    restricted_pod_context,
    skip_annotations,
)
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.modelexpress.specs import COMPONENT, server_address, server_name, server_selector
from llmd_fleet.plan.weight_load import MX_SERVER_PORT
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

CRD_MANIFEST = "modelexpress-crds"
"""The version-matrix manifest holding the ModelMetadata and ModelCacheEntry CRDs."""
# Requests of the upstream Kubernetes-backend example (4 CPU, 8 GiB): the server holds every
# source's tensor metadata, which for a wide-EP fleet is one record per GPU.
SERVER_RESOURCES = {"cpu": "4", "memory": "8Gi"}


def server_labels(config: StackConfig) -> dict[str, str]:
    """The ModelExpress server's labels (its pods' selector, `server_selector`, is a subset)."""
    return {**common_labels(COMPONENT, config.serving.name), "app.kubernetes.io/name": "modelexpress-server"}


def server_rbac_rules() -> list[dict[str, Any]]:
    """What the Kubernetes metadata backend reads and writes in its namespace (the upstream
    rbac-modelmetadata.yaml Role at the pinned tag)."""
    group = "modelexpress.nvidia.com"
    write = ["get", "list", "watch", "create", "update", "patch", "delete"]
    status = ["get", "update", "patch"]
    return [
        {"apiGroups": [group], "resources": ["modelmetadatas"], "verbs": write},
        {"apiGroups": [group], "resources": ["modelmetadatas/status"], "verbs": status},
        # Tensor descriptors are stored in ConfigMaps of the namespace.
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": write},
        {
            "apiGroups": [group],
            "resources": ["modelcacheentries"],
            "verbs": ["get", "list", "create", "update", "patch", "delete"],
        },
        {"apiGroups": [group], "resources": ["modelcacheentries/status"], "verbs": status},
    ]


def server_deployment_spec(config: StackConfig) -> dict[str, Any]:
    """One server replica: clients that cannot reach it fall back to the hub, so it is not on the
    serving path; its state lives in the custom resources, so a replacement picks it up."""
    resources = dict(SERVER_RESOURCES)
    probe = {"tcpSocket": {"port": "grpc"}, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}
    return {
        "replicas": 1,
        "selector": {"matchLabels": server_selector(config)},
        "template": {
            "metadata": {"labels": server_labels(config)},
            "spec": {
                "serviceAccountName": server_name(config.serving.name),
                "securityContext": restricted_pod_context(),
                "containers": [
                    {
                        "name": "server",
                        "image": versions().image("modelexpress-server").ref,
                        "imagePullPolicy": "IfNotPresent",
                        "env": [
                            {"name": "MX_METADATA_BACKEND", "value": "kubernetes"},
                            {
                                "name": "MX_METADATA_NAMESPACE",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            },
                        ],
                        "ports": [{"name": "grpc", "containerPort": MX_SERVER_PORT, "protocol": "TCP"}],
                        "startupProbe": {**probe, "failureThreshold": 30},
                        "livenessProbe": probe,
                        "readinessProbe": probe,
                        "resources": {"requests": dict(resources), "limits": resources},
                        "securityContext": restricted_container_context(),
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }
                ],
                "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
            },
        },
    }


def server_service_spec(config: StackConfig) -> dict[str, Any]:
    """The server's Service: its gRPC port, the address the engines' clients dial (`server_address`)."""
    return {
        "selector": server_selector(config),
        "ports": [{"name": "grpc", "port": MX_SERVER_PORT, "targetPort": "grpc", "protocol": "TCP"}],
    }


class ModelExpressServerArgs(TypedDict):
    """Arguments of `ModelExpressServer`. Every key is required."""

    config: StackConfig
    """The validated stack config; `serving` names the namespace and the objects (`server_name`)."""
    install_crds: bool
    """Install the ModelMetadata and ModelCacheEntry CRDs (the `modelexpress-crds` manifest of the
    version matrix); False where they are already there."""


class ModelExpressServer(pulumi.ComponentResource):
    """The ModelExpress server: its CRDs, ServiceAccount, Role and RoleBinding, Deployment and
    Service (`server_deployment_spec`, `server_rbac_rules`)."""

    address: str
    """host:port the serving pods' MX_SERVER_ADDRESS names."""

    def __init__(self, name: str, args: ModelExpressServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:serving:ModelExpressServer", name, {}, opts)
        config = args["config"]
        serving = config.serving
        object_name = server_name(serving.name)
        labels = server_labels(config)
        child = pulumi.ResourceOptions(parent=self)
        crds: list[pulumi.Resource] = []
        if args["install_crds"]:
            crds.append(
                k8s.yaml.v2.ConfigFile(f"{name}-crds", file=versions().manifest(CRD_MANIFEST).url, opts=child)
            )

        def meta(annotations: dict[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=serving.namespace, labels=labels, annotations=annotations
            )

        account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account", metadata=meta(), automount_service_account_token=True, opts=child
        )
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=meta(), rules=server_rbac_rules(), opts=child)
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-role-binding",
            metadata=meta(),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": object_name},
            subjects=[{"kind": "ServiceAccount", "name": object_name, "namespace": serving.namespace}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, account]),
        )
        k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(skip_annotations(TOKENIZER_SKIPS)),
            spec=server_deployment_spec(config),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding, *crds]),
        )
        k8s.core.v1.Service(f"{name}-service", metadata=meta(), spec=server_service_spec(config), opts=child)
        self.address = server_address(serving.name, serving.namespace)
        self.register_outputs({"address": self.address})
