"""Accelerator platform: the drivers that publish GPUs and NICs as DRA devices."""

from typing import Literal, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from components.dra import (
    DRA_DRIVER_NAMESPACE,
    DRANET_RDMA_CLASS,
    GPU_OPERATOR_NAMESPACE,
    dra_driver_values,
    dranet_device_class_spec,
    gpu_operator_values,
)
from components.helm import pinned_release
from components.labels import common_labels
from components.versions import Chart


class AcceleratorPlatformArgs(TypedDict):
    gpu_driver: Literal["host", "gpu-operator"]
    """Where the NVIDIA driver comes from: preinstalled on the hosts (DGX OS) or the GPU Operator's
    driver container (its root is /run/nvidia/driver)."""
    gpu_operator_chart: Chart
    dra_driver_chart: Chart
    dranet_chart: Chart | None
    """DRANET chart for RDMA NICs; None when the fabric NICs are not handed out through DRA."""


class AcceleratorPlatform(pulumi.ComponentResource):
    """On-prem accelerator stack: GPU Operator (device plugin off), NVIDIA DRA driver, DRANET and a
    DeviceClass for its RDMA NICs."""

    releases: list[k8s.helm.v3.Release]

    def __init__(self, name: str, args: AcceleratorPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:platform:AcceleratorPlatform", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = common_labels("accelerators", name)
        self.releases = []
        operator_ns = k8s.core.v1.Namespace(
            f"{name}-gpu-operator-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=GPU_OPERATOR_NAMESPACE, labels=labels),
            opts=child,
        )
        operator = pinned_release(
            f"{name}-gpu-operator",
            "gpu-operator",
            args["gpu_operator_chart"],
            GPU_OPERATOR_NAMESPACE,
            gpu_operator_values(install_driver=args["gpu_driver"] == "gpu-operator"),
            pulumi.ResourceOptions(parent=self, depends_on=[operator_ns]),
        )
        dra_ns = k8s.core.v1.Namespace(
            f"{name}-dra-driver-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=DRA_DRIVER_NAMESPACE, labels=labels),
            opts=child,
        )
        driver_root = "/" if args["gpu_driver"] == "host" else "/run/nvidia/driver"
        dra = pinned_release(
            f"{name}-dra-driver",
            "dra-driver-nvidia-gpu",
            args["dra_driver_chart"],
            DRA_DRIVER_NAMESPACE,
            dra_driver_values(driver_root),
            # The driver root exists only once the operator's driver container has run.
            pulumi.ResourceOptions(parent=self, depends_on=[dra_ns, operator]),
        )
        self.releases += [operator, dra]
        dranet_chart = args.get("dranet_chart")
        if dranet_chart is not None:
            self.releases.append(
                pinned_release(f"{name}-dranet", "dranet", dranet_chart, "kube-system", {}, child)
            )
            k8s.resource.v1.DeviceClass(
                f"{name}-rdma-device-class",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=DRANET_RDMA_CLASS, labels=labels),
                spec=cast(k8s.resource.v1.DeviceClassSpecArgsDict, dranet_device_class_spec()),
                opts=child,
            )
        self.register_outputs({})
