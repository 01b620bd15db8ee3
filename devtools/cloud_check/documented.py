"""Values the API models leave free strings, checked against the provider's documentation instead.

The models type these fields as plain strings (a machine type is any string to the GKE API; the
server looks it up), so each has a table here: the values the named page documents on the date
given. A value outside it is refused like a model's enum would refuse it; a new machine type or
tier is added here with its source.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Documented:
    values: tuple[str, ...]
    source: str
    written: str
    """The date the table was written from the source (re-read the source when it is extended)."""


_N2 = tuple(f"n2-standard-{n}" for n in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128))

DOCUMENTED: dict[str, Documented] = {
    "gke-machine-types": Documented(
        # The A3 series (H100 and H200 GPU machine types) and the N2 standard shapes the system pool uses.
        (
            "a3-highgpu-1g",
            "a3-highgpu-2g",
            "a3-highgpu-4g",
            "a3-highgpu-8g",
            "a3-megagpu-8g",
            "a3-ultragpu-8g",
            *_N2,
        ),
        "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-series ; "
        "https://cloud.google.com/compute/docs/general-purpose-machines#n2_machines",
        written="2026-12-06",
    ),
    "gke-accelerator-types": Documented(
        ("nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-h200-141gb"),
        "https://cloud.google.com/compute/docs/gpus#h100-gpus "
        "(the A3 rows: accelerator type per machine type)",
        written="2026-12-06",
    ),
    "gke-image-types": Documented(
        ("COS_CONTAINERD", "UBUNTU_CONTAINERD"),
        "https://cloud.google.com/kubernetes-engine/docs/concepts/node-images (Linux node images)",
        written="2026-12-06",
    ),
    "cloud-sql-tiers": Documented(
        tuple(f"db-perf-optimized-N-{n}" for n in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
        "https://cloud.google.com/sql/docs/postgres/instance-settings (Enterprise Plus machine types)",
        written="2026-12-06",
    ),
    "ec2-interface-types": Documented(
        ("interface", "efa", "efa-only"),
        "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/"
        "API_LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.html (InterfaceType: Valid values)",
        written="2026-12-06",
    ),
    "eks-access-entry-types": Documented(
        ("STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX"),
        "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html (type: Valid values)",
        written="2026-12-06",
    ),
}
