"""Dynamic Resource Allocation (resource.k8s.io/v1) for GPUs and fabric NICs.

Each GPU is paired with the NIC(s) on its own PCIe root: one request per GPU, one per GPU's NICs,
and one `matchAttribute: resource.kubernetes.io/pcieRoot` constraint per pair. A single constraint
across all sixteen devices would demand that every GPU and NIC share one root, which no HGX board
satisfies (cluster facts 3.1). Fabrics whose topology is unknown use an explicit whole-node claim
(all GPUs, all NICs, no constraint).

This module is pure (no Pulumi): the ResourceClaimTemplate spec, the pod wiring, the DeviceClass
for DRANET NICs and the driver chart values. llmd_fleet/platform/accelerators.py installs the drivers.
"""

from typing import Any

from llmd_fleet.conventions import DRANET_RDMA_CLASS as DRANET_RDMA_CLASS
from llmd_fleet.conventions import DRANET_RDMA_SELECTOR as DRANET_RDMA_SELECTOR
from llmd_fleet.conventions import GPU_TAINT_KEY
from llmd_fleet.plan.fleet import ClaimShape as ClaimShape
from llmd_fleet.plan.fleet import NicTopology as NicTopology

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
GPU_DEVICE_CLASS = "gpu.nvidia.com"
# Node label the NVIDIA DRA kubelet plugin is scheduled on (and the GPU Operator evicts by).
DRA_KUBELET_PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
CLAIM_NAME = "accelerators"
DRA_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
GPU_OPERATOR_NAMESPACE = "gpu-operator"


def claim_template_spec(shape: ClaimShape) -> dict[str, Any]:
    """spec.spec of a ResourceClaimTemplate (resource.k8s.io/v1, camelCase)."""
    if shape.nic_device_class and shape.topology == "pcie-root-per-gpu":
        if shape.nics % shape.gpus:
            raise ValueError(f"{shape.nics} NICs cannot be split evenly over {shape.gpus} GPUs")
        requests: list[dict[str, Any]] = []
        constraints = []
        for i in range(shape.gpus):
            requests.append(
                {"name": f"gpu-{i}", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": 1}}
            )
            requests.append(
                {
                    "name": f"nic-{i}",
                    "exactly": {"deviceClassName": shape.nic_device_class, "count": shape.nics_per_gpu},
                }
            )
            constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT})
        return {"devices": {"requests": requests, "constraints": constraints}}
    requests = [{"name": "gpus", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": shape.gpus}}]
    if shape.nic_device_class:
        # Whole node: every NIC of the node, wherever it sits; no pairing is attempted.
        requests.append(
            {"name": "nics", "exactly": {"deviceClassName": shape.nic_device_class, "allocationMode": "All"}}
        )
    return {"devices": {"requests": requests}}


def claim_template_name(node_group: str, shape: ClaimShape) -> str:
    """e.g. h100-8gpu-8nic-pcie: the node group and what the claim holds."""
    nic = (
        f"-{shape.nics}nic-{'pcie' if shape.topology == 'pcie-root-per-gpu' else 'node'}"
        if shape.nic_device_class
        else ""
    )
    return f"{node_group}-{shape.gpus}gpu{nic}"


def pod_claims(template_name: str) -> list[dict[str, Any]]:
    """spec.resourceClaims of a pod: one claim per pod, made from the template."""
    return [{"name": CLAIM_NAME, "resourceClaimTemplateName": template_name}]


def container_claims() -> list[dict[str, Any]]:
    """resources.claims of the engine container: the whole claim (every request in it)."""
    return [{"name": CLAIM_NAME}]


def device_class_spec(cel_selector: str) -> dict[str, Any]:
    """spec of a DeviceClass selecting devices by one CEL expression."""
    return {"selectors": [{"cel": {"expression": cel_selector}}]}


def dra_driver_values(driver_root: str, critical_priority: bool = True) -> dict[str, Any]:
    """Values of the NVIDIA DRA driver chart: whole GPUs on, ComputeDomains off (multi-node NVLink
    / IMEX is for GB200-class systems, not HGX H100), kubelet plugin only on labelled DRA nodes.

    `critical_priority` False clears the chart's system-*-critical priority classes: GKE admits
    pods of those classes only in kube-system (its resource quota on critical pods), so the
    driver's own namespace gets none; the chart's GKE install script at the pinned release does
    the same (NVIDIA/k8s-dra-driver-gpu v0.4.0 demo/clusters/gke/install-dra-driver-gpu.sh)."""
    values: dict[str, Any] = {
        "nvidiaDriverRoot": driver_root,
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "nodeSelector": {DRA_KUBELET_PLUGIN_LABEL: "true"},
            "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    if not critical_priority:
        values["kubeletPlugin"]["priorityClassName"] = ""
        values["controller"] = {"priorityClassName": ""}
    return values


def gpu_operator_values(install_driver: bool) -> dict[str, Any]:
    """GPU Operator for DRA nodes: its device plugin off (the DRA driver hands out GPUs; running
    both oversubscribes silently), driver container only when the hosts have no driver, and GPU
    pods evicted by the DRA kubelet-plugin label during driver upgrades."""
    return {
        "devicePlugin": {"enabled": False},
        "driver": {
            "enabled": install_driver,
            "manager": {
                "env": [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": DRA_KUBELET_PLUGIN_LABEL}]
            },
        },
    }
