"""Config properties several rules share (same name, same default in every schema)."""

from typing import Any

GPU_RESOURCES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "default": ["nvidia.com/gpu"],
    "description": "Device-plugin resource names that allocate GPUs.",
}
GPU_DEVICE_CLASSES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "default": ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"],
    "description": "DRA DeviceClasses whose devices are GPUs.",
}
NIC_DEVICE_CLASSES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "default": ["mrdma.google.com", "netdev.google.com", "efa.networking.k8s.aws", "dra.net", "rdma.dra.net"],
    "description": "DRA DeviceClasses whose devices are GPU-fabric NICs (DRANET and managed variants).",
}

MAX_GPUS: dict[str, Any] = {
    "type": "integer",
    "minimum": 0,
    "default": 0,
    "description": "GPU budget of the stack (0: no budget, the policy does not apply).",
}
"""The `maxGpus` setting of the GPU-budget rules (gpu-budget, autoscaling-within-gpu-budget)."""
