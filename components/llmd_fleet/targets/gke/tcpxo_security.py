"""Why each GKE node agent of llmd_fleet/targets/gke/tcpxo.py keeps its privileges: the checkov checks its
DaemonSet fails on purpose, each with the constraint behind it (llmd_fleet/core/pod_context.py explains
the annotation format). Pure data.

All three run in kube-system in the host's network and PID namespaces as privileged root, the
way GKE's own manifests run them (GoogleCloudPlatform/container-engine-accelerators:
gpudirect-tcpxo/nccl-tcpxo-installer.yaml, nri_device_injector/nri-device-injector.yaml,
nvidia-driver-installer/cos/daemonset-preloaded.yaml). NetworkPolicies do not apply to
host-network pods, and the runtime applies no seccomp filter to a privileged container.
"""

from llmd_fleet.core.pod_context import IMAGE_BY_TAG, PULL_IF_NOT_PRESENT, Skip

_PRIVILEGED_ROOT = (
    "a privileged node agent runs as root with every capability and a writable root; it has no "
    "non-root or reduced-capability mode"
)
_PAUSE_ONLY = "the work runs in init containers; the pause container that keeps the pod has nothing to probe"
_NO_CPU_LIMIT = "CPU requests only: a CPU limit would throttle node setup that GPU pods wait for"


def _privileged(why: str, host_pid: str, host_network: str, root_container: bool) -> tuple[Skip, ...]:
    """The checks a privileged root agent fails. `root_container`: its long-running container is
    the agent itself (not a pause container, which runs as its image's non-root user)."""
    root = ("CKV_K8S_23", "CKV_K8S_40") if root_container else ()
    return (
        Skip("CKV_K8S_16", why),
        Skip("CKV_K8S_17", host_pid),
        Skip("CKV_K8S_19", host_network),
        *(
            Skip(check, _PRIVILEGED_ROOT)
            for check in ("CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28", "CKV_K8S_37", *root)
        ),
        Skip("CKV_K8S_11", _NO_CPU_LIMIT),
    )


NODE_AGENT_SKIPS: dict[str, tuple[Skip, ...]] = {
    "nvidia-driver-installer": (
        *_privileged(
            "builds and loads the NVIDIA kernel modules on the COS host (GPU DRA needs GKE's own "
            "driver installation off)",
            "GKE's COS driver installer runs in the host PID namespace",
            "GKE's COS driver installer runs in the host network namespace",
            root_container=False,
        ),
        Skip("CKV_K8S_8", _PAUSE_ONLY),
        Skip("CKV_K8S_9", _PAUSE_ONLY),
        Skip(
            "CKV_K8S_43",
            "GKE preloads the installer on COS GPU nodes, built for the node's COS release, and "
            "publishes it by that tag only",
        ),
        Skip("CKV_K8S_15", "imagePullPolicy Never: the image is preloaded on the node and never pulled"),
    ),
    "nccl-tcpxo-installer": (
        *_privileged(
            "prepares the host for TCPXO (an iptables rule, the import-helper kernel module, bind "
            "mounts of the aperture PCI devices) and installs the NCCL plugin under /var/lib",
            "nsenter --target 1 enters the host's namespaces to prepare the node",
            "the iptables rule it adds belongs to the host's network namespace",
            root_container=False,
        ),
        Skip("CKV_K8S_8", _PAUSE_ONLY),
        Skip("CKV_K8S_9", _PAUSE_ONLY),
        IMAGE_BY_TAG,
        PULL_IF_NOT_PRESENT,
    ),
    "nri-device-injector": (
        *_privileged(
            "injects host devices (GPUs, the dma-buf import helper) into containers through the "
            "runtime's NRI socket",
            "runs in the host PID namespace as GKE's manifest does",
            "runs in the host network namespace as GKE's manifest does",
            root_container=True,
        ),
        Skip("CKV_K8S_8", "the NRI plugin serves no health endpoint; the kubelet restarts it when it exits"),
        Skip("CKV_K8S_9", "the NRI plugin serves no health endpoint and takes no traffic"),
    ),
}
