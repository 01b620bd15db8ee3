"""GPUDirect-TCPXO on GKE A3 Mega: what every serving pod needs (the `tcpxo` Fabric,
llmd_fleet/targets/gke/fabric.py): the multi-network annotations, the TCPXO receive-datapath manager (RxDM) as
a native sidecar, the plugin libraries and aperture devices mounted into the engine, and the NCCL
environment. Pure data, no Pulumi: the plan and the pod builders read it on every target, and
only the GKE target imports the cluster side (llmd_fleet/targets/gke/tcpxo.py).
"""

import json
from typing import Any

from llmd_fleet.core.pod_context import Skip
from llmd_fleet.versions import versions

# Where the installer leaves the plugin libraries on the node, and where pods see them.
HOST_TCPXO_LIB = "/var/lib/tcpxo/lib64"
TCPXO_LIB = "/usr/local/tcpxo/lib64"
APERTURE_DEVICES = "/dev/aperture_devices"
GKE_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
RXDM_NAME = "tcpxo-daemon"
_RXDM_ENTRY = "/fts/entrypoint_rxdm_container.sh"

RXDM_CAPABILITY_REASON = "tcpxo-daemon adds NET_ADMIN and NET_BIND_SERVICE for GKE's TCPXO receive datapath"
"""Why RxDM adds capabilities (with the engine's, checkov's CKV_K8S_25 on a serving pod)."""
_RXDM = (
    "tcpxo-daemon is GKE's TCPXO receive-datapath manager, run with the security context of GKE's "
    "TCPXO manifest"
)
RXDM_SKIPS = (
    Skip("CKV_K8S_37", f"{_RXDM}: it keeps the runtime's default capabilities (no drop ALL)"),
    Skip("CKV_K8S_28", f"{_RXDM}: NET_RAW is among the runtime's default capabilities it keeps"),
    Skip("CKV_K8S_20", f"{_RXDM}: a root process with NET_ADMIN, privilege escalation not turned off"),
    Skip("CKV_K8S_22", f"{_RXDM}: its command makes its entrypoint script executable inside the image"),
)
"""What a serving pod with GKE's TCPXO RxDM sidecar keeps in addition."""


def network_names(count: int) -> list[str]:
    """Pod-facing names of the GPU networks: vpc1..vpcN (eth1..ethN)."""
    return [f"vpc{i}" for i in range(1, count + 1)]


def gpu_interfaces(count: int) -> list[tuple[str, str]]:
    """(interface name inside the pod, network) of each GPU NIC: ethI on vpcI. The one list the
    interfaces annotation and every interface setting of the engines and the probe derive from."""
    return [(f"eth{i}", name) for i, name in enumerate(network_names(count), 1)]


def data_interfaces(count: int) -> list[str]:
    """The GPU NICs' interface names inside the pod (eth1..ethN), as the annotation names them."""
    return [interface for interface, _ in gpu_interfaces(count)]


def interfaces_annotation(count: int) -> str:
    """`networking.gke.io/interfaces`: eth0 on the default network, ethI on vpcI."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}]
    interfaces += [{"interfaceName": interface, "network": name} for interface, name in gpu_interfaces(count)]
    return json.dumps(interfaces, separators=(",", ":"))


def rxdm_devices_annotation(gpus: int) -> str:
    """Host devices the NRI injector adds to the RxDM sidecar: every GPU, the control devices and
    the dma-buf import helper (the sidecar claims no GPUs itself)."""
    paths = [f"/dev/nvidia{i}" for i in range(gpus)]
    paths += ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/dmabuf_import_helper"]
    return "".join(f"- path: {p}\n" for p in paths)


def pod_annotations(gpus: int, nics: int) -> tuple[tuple[str, str], ...]:
    return (
        ("networking.gke.io/default-interface", "eth0"),
        ("networking.gke.io/interfaces", interfaces_annotation(nics)),
        (f"devices.gke.io/container.{RXDM_NAME}", rxdm_devices_annotation(gpus)),
    )


def engine_env(nics: int) -> tuple[tuple[str, str], ...]:
    """NCCL settings for the TCPXO (FasTrak) plugin: data over eth1..ethN, control over eth0; and
    UCX (NIXL's KV transfers) pinned to the same eth1..ethN."""
    data_nics = ",".join(data_interfaces(nics))
    return (
        # The plugin (libnccl-net.so) and its tuner are found on the library path.
        ("LD_LIBRARY_PATH", f"{TCPXO_LIB}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"),
        ("NCCL_FASTRAK_CTRL_DEV", "eth0"),
        ("NCCL_FASTRAK_IFNAME", data_nics),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("GLOO_SOCKET_IFNAME", "eth0"),
        ("NCCL_CROSS_NIC", "0"),
        ("NCCL_NET_GDR_LEVEL", "PIX"),
        ("NCCL_FASTRAK_NUM_FLOWS", "2"),
        ("NCCL_FASTRAK_USE_SNAP", "1"),
        ("NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL", "0"),
        ("NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS", "600000"),
        ("NCCL_FASTRAK_USE_LLCM", "1"),
        ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", APERTURE_DEVICES),
        ("NCCL_TUNER_PLUGIN", "libnccl-tuner.so"),
        ("NCCL_TUNER_CONFIG_PATH", f"{TCPXO_LIB}/a3plus_tuner_config.textproto"),
        ("NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", f"{TCPXO_LIB}/a3plus_guest_config.textproto"),
        # NIXL moves KV over UCX's TCP transport: there is no RDMA on A3 Mega. TCPXO (the FasTrak
        # plugin above) accelerates NCCL only; UCX sends through the kernel TCP stack.
        ("UCX_TLS", "tcp,cuda_copy,cuda_ipc,sm,self"),
        # UCX_NET_DEVICES defaults to `all` (openucx src/ucp/core/ucp_context.c) and its TCP
        # transport ranks the default-route interface first (src/uct/tcp/tcp_iface.c
        # PREFER_DEFAULT=y): unpinned, KV could ride eth0, the pod network. Pinned to the GPU NICs.
        # Network devices only: cuda_copy, cuda_ipc, sm and self are not filtered by it.
        ("UCX_NET_DEVICES", data_nics),
    )


def pod_volumes() -> list[dict[str, Any]]:
    return [
        {"name": "tcpxo-libs", "hostPath": {"path": HOST_TCPXO_LIB, "type": "Directory"}},
        {"name": "aperture-devices", "hostPath": {"path": APERTURE_DEVICES, "type": "Directory"}},
        {"name": "nvidia-libs", "hostPath": {"path": f"{GKE_DRIVER_ROOT}/lib64", "type": "Directory"}},
        {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}},
        {"name": "host-proc-sys", "hostPath": {"path": "/proc/sys", "type": "Directory"}},
    ]


def engine_volume_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "tcpxo-libs", "mountPath": TCPXO_LIB, "readOnly": True},
        {"name": "aperture-devices", "mountPath": APERTURE_DEVICES},
    ]


def rxdm_sidecar() -> dict[str, Any]:
    """The receive-datapath manager as a native sidecar: it runs before and beside the engine and
    owns the TCPXO receive queues of the GPU NICs."""
    resources = {"cpu": "4", "memory": "8Gi"}
    return {
        "name": RXDM_NAME,
        "image": versions().image("tcpxo-rxdm").ref,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c"],
        "args": [f"chmod 755 {_RXDM_ENTRY} && exec {_RXDM_ENTRY} --num_hops=2"],
        "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
        # Requests equal limits so the serving pod keeps Guaranteed QoS.
        "resources": {"requests": dict(resources), "limits": resources},
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "volumeMounts": [
            {"name": "nvidia-libs", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True},
            {"name": "host-sys", "mountPath": "/hostsysfs"},
            {"name": "host-proc-sys", "mountPath": "/hostprocsysfs"},
        ],
    }
