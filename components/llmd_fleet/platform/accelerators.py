"""Accelerator platform: the drivers that publish GPUs and NICs as DRA devices."""

from typing import NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.conventions import GPU_TAINT_KEY
from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import common_labels
from llmd_fleet.platform.dra import (
    DRA_DRIVER_NAMESPACE,
    GPU_OPERATOR_NAMESPACE,
    device_class_spec,
    dra_driver_values,
    gpu_operator_values,
)
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.versions import Chart


def nic_driver_values(release_name: str) -> dict[str, object]:
    """The NIC DRA driver must run on the GPU nodes, which carry the nvidia.com/gpu taint. The
    aws-dranet chart tolerates only CriticalAddonsOnly unless given `tolerations`; upstream
    DRANET's DaemonSet already tolerates every NoSchedule taint."""
    if release_name == "aws-dranet":
        return {"tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}
    return {}


class AcceleratorPlatformArgs(TypedDict):
    """Arguments of `AcceleratorPlatform`."""

    driver_root: str
    """Where the NVIDIA driver lives on the node, the DRA driver chart's `nvidiaDriverRoot`: `/` for
    a host driver (DGX OS, EKS AL2023), `/run/nvidia/driver` for the GPU Operator's driver
    container, `/home/kubernetes/bin/nvidia` on GKE COS."""
    dra_driver_chart: Chart
    """Pinned chart of the NVIDIA DRA driver, released as `dra-driver-nvidia-gpu` in its own
    namespace."""
    gpu_operator: NotRequired[tuple[Chart, bool] | None]
    """(GPU Operator chart, whether it installs the driver), on-prem: the operator is released first
    (device plugin off) and the DRA driver waits for it. None (the default) where the platform
    supplies driver and toolkit (GKE, EKS)."""
    nic_driver: NotRequired[tuple[str, Chart, str] | None]
    """(release name, chart, namespace) of the DRA driver that publishes the fabric NICs; none is
    installed when None (the default)."""
    nic_device_class: NotRequired[tuple[str, str] | None]
    """(name, CEL selector) of a NIC DeviceClass to create where the NIC driver ships none; none is
    created when None (the default)."""
    critical_priority: NotRequired[bool]
    """Whether the DRA driver's pods keep the chart's system-*-critical priority classes outside
    kube-system (default `True`); False clears them (GKE allows them only in kube-system)."""
    install_drivers: NotRequired[bool]
    """Release the GPU Operator, the DRA driver and the NIC driver (default `True`); False
    (`target.platform: preinstalled`: they already run on the cluster) declares only the NIC
    DeviceClass, which is the stack's either way."""


class AcceleratorPlatform(pulumi.ComponentResource):
    """The drivers that turn GPUs and NICs into DRA devices: NVIDIA DRA driver (whole GPUs, no
    ComputeDomains), optionally the GPU Operator with its device plugin off, a NIC DRA driver and
    a DeviceClass for its NICs."""

    releases: list[k8s.helm.v3.Release]

    def __init__(self, name: str, args: AcceleratorPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:platform:AcceleratorPlatform", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = common_labels("accelerators", name)
        self.releases = []
        if args.get("install_drivers", True):
            self._release_drivers(name, args, labels)
        device_class = args.get("nic_device_class")
        if device_class is not None:
            class_name, selector = device_class
            k8s.resource.v1.DeviceClass(
                f"{name}-nic-device-class",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=class_name, labels=labels),
                spec=cast(k8s.resource.v1.DeviceClassSpecArgsDict, device_class_spec(selector)),
                opts=child,
            )
        self.register_outputs({})

    def _release_drivers(self, name: str, args: AcceleratorPlatformArgs, labels: dict[str, str]) -> None:
        """The GPU Operator (when asked), the NVIDIA DRA driver and the NIC driver, each in its
        privileged namespace."""
        child = pulumi.ResourceOptions(parent=self)
        dra_depends: list[pulumi.Resource] = []
        operator = args.get("gpu_operator")
        if operator is not None:
            operator_chart, install_driver = operator
            operator_ns = k8s.core.v1.Namespace(
                f"{name}-gpu-operator-namespace",
                # Pod Security `privileged`: the operator's driver, container-toolkit and
                # validator DaemonSets run privileged with hostPath mounts of the driver root
                # (NVIDIA's GPU Operator install guide labels the namespace privileged).
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=GPU_OPERATOR_NAMESPACE, labels={**labels, **pod_security_labels("privileged")}
                ),
                opts=child,
            )
            release = pinned_release(
                f"{name}-gpu-operator",
                "gpu-operator",
                operator_chart,
                GPU_OPERATOR_NAMESPACE,
                gpu_operator_values(install_driver=install_driver),
                pulumi.ResourceOptions(parent=self, depends_on=[operator_ns]),
            )
            self.releases.append(release)
            # The driver root exists only once the operator's driver container has run.
            dra_depends.append(release)
        dra_ns = k8s.core.v1.Namespace(
            f"{name}-dra-driver-namespace",
            # Pod Security `privileged`: the DRA kubelet plugin is a privileged DaemonSet that
            # mounts the kubelet's plugin directories and the driver root from the host.
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=DRA_DRIVER_NAMESPACE, labels={**labels, **pod_security_labels("privileged")}
            ),
            opts=child,
        )
        self.releases.append(
            pinned_release(
                f"{name}-dra-driver",
                "dra-driver-nvidia-gpu",
                args["dra_driver_chart"],
                DRA_DRIVER_NAMESPACE,
                dra_driver_values(args["driver_root"], args.get("critical_priority", True)),
                pulumi.ResourceOptions(parent=self, depends_on=[dra_ns, *dra_depends]),
            )
        )
        nic_driver = args.get("nic_driver")
        if nic_driver is not None:
            release_name, chart, namespace = nic_driver
            self.releases.append(
                pinned_release(
                    f"{name}-{release_name}",
                    release_name,
                    chart,
                    namespace,
                    nic_driver_values(release_name),
                    child,
                )
            )
