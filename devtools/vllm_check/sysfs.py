"""A fake /sys of an HGX H100 node for the launch script's NIC pinning: `gpus` NVIDIA GPUs and one
RDMA NIC per GPU, each pair alone under its own PCIe root (host bridge), as sysfs lays them out:
`devices/pci<root>/<root port>/<device>` with `vendor` and `class` files, `bus/pci/devices/<bdf>`
and `class/infiniband/<name>/device` as symlinks to the device directories. Standard library only.
"""

import os
from dataclasses import dataclass
from pathlib import Path

NVIDIA, H100_CLASS = "0x10de", "0x030200"
MELLANOX, INFINIBAND_CLASS = "0x15b3", "0x020700"


@dataclass(frozen=True)
class Pair:
    """One PCIe root with its GPU and (unless left out) its NIC."""

    root: str
    gpu: str
    nic: str
    nic_name: str


def pairs(count: int = 8) -> list[Pair]:
    """Root i holds GPU i and NIC i (buses 0x18, 0x28, ... as on HGX boards)."""
    out = []
    for i in range(count):
        bus = 0x18 + 0x10 * i
        out.append(
            Pair(
                root=f"pci0000:{bus:02x}",
                gpu=f"0000:{bus + 1:02x}:00.0",
                nic=f"0000:{bus + 2:02x}:00.0",
                nic_name=f"mlx5_{i}",
            )
        )
    return out


def _device(sysfs: Path, root: str, bdf: str, vendor: str, pci_class: str) -> Path:
    port = f"{root.removeprefix('pci')}:01.0"
    directory = sysfs / "devices" / root / port / bdf
    directory.mkdir(parents=True)
    (directory / "vendor").write_text(vendor + "\n")
    (directory / "class").write_text(pci_class + "\n")
    bus = sysfs / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    (bus / bdf).symlink_to(os.path.relpath(directory, bus))
    return directory


def fake_sysfs(sysfs: Path, count: int = 8, missing_nic: int | None = None) -> list[Pair]:
    """Build the tree under `sysfs`; NIC `missing_nic` is left out. Returns the pairs."""
    laid_out = pairs(count)
    infiniband = sysfs / "class" / "infiniband"
    infiniband.mkdir(parents=True)
    for i, pair in enumerate(laid_out):
        _device(sysfs, pair.root, pair.gpu, NVIDIA, H100_CLASS)
        if i == missing_nic:
            continue
        nic = _device(sysfs, pair.root, pair.nic, MELLANOX, INFINIBAND_CLASS)
        (infiniband / pair.nic_name).mkdir()
        (infiniband / pair.nic_name / "device").symlink_to(os.path.relpath(nic, infiniband / pair.nic_name))
    return laid_out


def expected_mapping(laid_out: list[Pair]) -> str:
    """VLLM_GPU_NIC_PCIE_MAPPING for the tree: GPU i -> NIC i, in GPU PCI order."""
    return ",".join(f"{p.gpu}={p.nic}" for p in laid_out)
