"""GPUDirect-TCPXO on GKE A3 Mega: what the cluster needs (`TcpxoNodeSetup`, on the stack's GKE
provider):

- one `GKENetworkParamSet` + `Network` pair (networking.gke.io/v1) per GPU VPC, named vpc1..vpcN,
  so pods can attach eth1..ethN to them;
- the NCCL TCPXO installer DaemonSet (plugin libraries under /var/lib/tcpxo/lib64 on the node,
  the import-helper module and the aperture devices the plugin's LLCM path uses);
- the NRI device injector DaemonSet (adds host devices named in `devices.gke.io/container.<c>`
  pod annotations to that container);
- the COS NVIDIA driver installer DaemonSet: GPU DRA needs GKE's own driver installation off
  (`INSTALLATION_DISABLED`), so the stack installs the driver into /home/kubernetes/bin/nvidia.

What each serving pod needs is pure data in llmd_fleet/targets/gke/tcpxo_plan.py. Pure builders first, the
component last. Every image comes from images/versions.toml.
"""

from typing import Any, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import (
    RUNTIME_DEFAULT_SECCOMP,
    restricted_container_context,
    skip_annotations,
)
from llmd_fleet.labels import common_labels
from llmd_fleet.targets.gke.tcpxo_plan import APERTURE_DEVICES, GKE_DRIVER_ROOT, network_names
from llmd_fleet.targets.gke.tcpxo_security import NODE_AGENT_SKIPS
from llmd_fleet.versions import versions

NAMESPACE = "kube-system"
NETWORK_API = "networking.gke.io/v1"
# PCI vendor:device of the A3 Mega aperture (LLCM) devices.
_APERTURE_PCI_ID = "1ae0:0084"
_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# Present when GKE itself installed the driver; the stack's installer stays off those nodes.
_GKE_DRIVER_LABEL = "cloud.google.com/gke-gpu-driver-version"


# ----------------------------------------------------------------------------------------------
# In-cluster objects.
# ----------------------------------------------------------------------------------------------


def network_param_set_spec(vpc: str, subnet: str) -> dict[str, Any]:
    return {"vpc": vpc, "vpcSubnet": subnet, "deviceMode": "NetDevice"}


def network_spec(param_set: str) -> dict[str, Any]:
    return {
        "type": "Device",
        "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": param_set},
    }


def _host_daemonset(name: str, node_terms: list[dict[str, Any]], pod_spec: dict[str, Any]) -> dict[str, Any]:
    """DaemonSet spec of a node-critical agent in the host's network and PID namespaces, on the
    nodes `node_terms` select, tolerating every taint; `pod_spec` adds its containers and volumes."""
    selector = {"k8s-app": name}
    return {
        "selector": {"matchLabels": selector},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": {**selector, "app.kubernetes.io/part-of": "llmd-fleet"}},
            "spec": {
                "priorityClassName": "system-node-critical",
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}
                    }
                },
                "tolerations": [{"operator": "Exists"}],
                "hostNetwork": True,
                "hostPID": True,
                # None of them calls the API server. RuntimeDefault confines the unprivileged
                # containers; privileged ones run unconfined whatever the pod asks for.
                "automountServiceAccountToken": False,
                "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
                **pod_spec,
            },
        },
    }


def _node_daemonset(
    name: str,
    node_terms: list[dict[str, Any]],
    init_containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> dict[str, Any]:
    """A privileged node-setup DaemonSet: init containers do the work, a pause container keeps
    the pod (and so the completed setup) visible per node."""
    pause = {
        "name": "pause",
        "image": versions().image("gke-pause").ref,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}},
        # The pause image's own user (65535) needs nothing else.
        "securityContext": restricted_container_context(65535),
    }
    return _host_daemonset(
        name, node_terms, {"initContainers": init_containers, "containers": [pause], "volumes": volumes}
    )


def _accelerator_terms(accelerators: list[str]) -> list[dict[str, Any]]:
    return [
        {"matchExpressions": [{"key": _ACCELERATOR_LABEL, "operator": "In", "values": sorted(accelerators)}]}
    ]


# Runs in the host's namespaces: accept the plugin's TCP flows, load the dma-buf import helper,
# and bind-mount each aperture PCI device under /dev/aperture_devices/<BDF> for unprivileged pods.
_PREPARE_NODE = f"""set -eu
/sbin/iptables -C INPUT -p tcp -m tcp -j ACCEPT 2>/dev/null || /sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT
modprobe import-helper
mkdir -p {APERTURE_DEVICES}
for bdf in $(lspci -D -n -d {_APERTURE_PCI_ID} | cut -d' ' -f1); do
  mkdir -p "{APERTURE_DEVICES}/$bdf"
  umount -R "{APERTURE_DEVICES}/$bdf" 2>/dev/null || true
  mount --bind "$(readlink -f "/sys/bus/pci/devices/$bdf")" "{APERTURE_DEVICES}/$bdf"
done
chmod -R a+r {APERTURE_DEVICES}
chmod a+rw {APERTURE_DEVICES}/*/resource* 2>/dev/null || true
"""


def tcpxo_installer_spec(accelerators: list[str]) -> dict[str, Any]:
    """DaemonSet spec: prepare the node, then install the TCPXO NCCL plugin to /var/lib/tcpxo."""
    init: list[dict[str, Any]] = [
        {
            "name": "prepare-node",
            "image": versions().image("node-setup").ref,
            "command": ["nsenter", "--all", "--target", "1", "--", "bash", "-c", _PREPARE_NODE],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": {"privileged": True},
        },
        {
            "name": "nccl-tcpxo-installer",
            "image": versions().image("nccl-tcpxo-installer").ref,
            "command": ["/bin/sh", "-c"],
            "args": [
                "chmod 755 /scripts/container_entry.sh && /scripts/container_entry.sh install --install-nccl"
            ],
            "resources": {"requests": {"cpu": "150m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"}],
        },
    ]
    volumes = [{"name": "var-lib", "hostPath": {"path": "/var/lib", "type": "Directory"}}]
    return _node_daemonset("nccl-tcpxo-installer", _accelerator_terms(accelerators), init, volumes)


def nri_device_injector_spec() -> dict[str, Any]:
    """DaemonSet spec of the NRI device injector on every GPU node (a long-running plugin)."""
    on_gpu_nodes = [{"matchExpressions": [{"key": _ACCELERATOR_LABEL, "operator": "Exists"}]}]
    injector = {
        "name": "device-injector",
        "image": versions().image("nri-device-injector").ref,
        "resources": {"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}],
    }
    volumes = [
        {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}},
        {"name": "nri", "hostPath": {"path": "/var/run/nri", "type": "Directory"}},
    ]
    return _host_daemonset(
        "nri-device-injector", on_gpu_nodes, {"containers": [injector], "volumes": volumes}
    )


def cos_driver_installer_spec(accelerators: list[str]) -> dict[str, Any]:
    """DaemonSet spec of the COS NVIDIA driver installer (preloaded image), only on GPU nodes
    where GKE did not install a driver itself."""
    terms = [
        {
            "matchExpressions": [
                {"key": _ACCELERATOR_LABEL, "operator": "In", "values": sorted(accelerators)},
                {"key": _GKE_DRIVER_LABEL, "operator": "DoesNotExist"},
            ]
        }
    ]
    env = {
        "NVIDIA_INSTALL_DIR_HOST": GKE_DRIVER_ROOT,
        "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
        "VULKAN_ICD_DIR_HOST": f"{GKE_DRIVER_ROOT}/vulkan/icd.d",
        "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
        "ROOT_MOUNT_DIR": "/root",
        "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
        "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
    }
    init: list[dict[str, Any]] = [
        {
            "name": "nvidia-driver-installer",
            "image": versions().image("cos-nvidia-installer").ref,
            # GKE preloads the installer on COS GPU nodes; it is never pulled.
            "imagePullPolicy": "Never",
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "resources": {"requests": {"cpu": "150m", "memory": "256Mi"}, "limits": {"memory": "4Gi"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [
                {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
                {"name": "vulkan-icd-mount", "mountPath": "/etc/vulkan/icd.d"},
                {"name": "dev", "mountPath": "/dev"},
                {"name": "root-mount", "mountPath": "/root"},
                {"name": "cos-tools", "mountPath": "/build/cos-tools"},
            ],
        }
    ]
    volumes = [
        {
            "name": "nvidia-install-dir-host",
            "hostPath": {"path": GKE_DRIVER_ROOT, "type": "DirectoryOrCreate"},
        },
        {
            "name": "vulkan-icd-mount",
            "hostPath": {"path": f"{GKE_DRIVER_ROOT}/vulkan/icd.d", "type": "DirectoryOrCreate"},
        },
        {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}},
        {"name": "root-mount", "hostPath": {"path": "/", "type": "Directory"}},
        {"name": "cos-tools", "hostPath": {"path": "/var/lib/cos-tools", "type": "DirectoryOrCreate"}},
    ]
    return _node_daemonset("nvidia-driver-installer", terms, init, volumes)


class TcpxoNodeSetupArgs(TypedDict):
    """Arguments of `TcpxoNodeSetup`. Every key is required."""

    gpu_networks: list[tuple[str, str]]
    """(VPC name, subnet name) per GPU NIC, in NIC order (eth1 first); one GKENetworkParamSet and
    Network pair (vpc1..vpcN) each."""
    accelerators: list[str]
    """GKE accelerator types of the GPU pools (node label cloud.google.com/gke-accelerator), whose
    nodes get the TCPXO installer and (where GKE installed no driver) the COS driver installer."""


class TcpxoNodeSetup(pulumi.ComponentResource):
    """Multi-network objects and node DaemonSets for GPUDirect-TCPXO and the COS GPU driver."""

    daemonsets: dict[str, k8s.apps.v1.DaemonSet]
    networks: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: TcpxoNodeSetupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:platform:TcpxoNodeSetup", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = common_labels("tcpxo", name)
        self.networks = []
        for pod_network, (vpc, subnet) in zip(
            network_names(len(args["gpu_networks"])), args["gpu_networks"], strict=True
        ):
            params = k8s.apiextensions.CustomResource(
                f"{name}-{pod_network}-params",
                api_version=NETWORK_API,
                kind="GKENetworkParamSet",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=pod_network, labels=labels),
                spec=network_param_set_spec(vpc, subnet),
                opts=child,
            )
            self.networks.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-{pod_network}",
                    api_version=NETWORK_API,
                    kind="Network",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=pod_network, labels=labels),
                    spec=network_spec(pod_network),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[params]),
                )
            )
        specs = {
            "nvidia-driver-installer": cos_driver_installer_spec(args["accelerators"]),
            "nccl-tcpxo-installer": tcpxo_installer_spec(args["accelerators"]),
            "nri-device-injector": nri_device_injector_spec(),
        }
        self.daemonsets = {
            ds_name: k8s.apps.v1.DaemonSet(
                f"{name}-{ds_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=ds_name,
                    namespace=NAMESPACE,
                    labels={**labels, "k8s-app": ds_name},
                    annotations=skip_annotations(NODE_AGENT_SKIPS[ds_name]),
                ),
                spec=cast(k8s.apps.v1.DaemonSetSpecArgsDict, spec),
                opts=child,
            )
            for ds_name, spec in specs.items()
        }
        self.register_outputs({})
