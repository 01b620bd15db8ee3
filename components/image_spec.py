"""What the serving image is, without building it: variants, the `images` stack config, build
arguments and tag, all from the version matrix.

Kept free of cloud SDK imports so that the config layer and the policy pack can read it;
components/images.py holds the component that builds and pushes the image.
"""

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from components.config_base import ConfigModel
from components.versions import VersionMatrix, versions

Variant = Literal["ib", "efa"]
"""Variant of the built image. `ib`: verbs/mlx5 NICs (InfiniBand, RoCE), and fabrics whose RDMA
does not go through the pod's verbs (GKE TCPXO: NCCL's plugin comes from the node). `efa`: AWS
Elastic Fabric Adapter (libfabric)."""
VARIANTS: tuple[Variant, ...] = ("ib", "efa")
TargetKind = Literal["onprem", "gke", "eks"]
"""Where the fleet runs (the stack's target.kind)."""

IMAGE_NAME = "vllm-wide-ep"
"""Repository name of the built image under the registry path."""
DEFAULT_REPOSITORY = "llmd-fleet"
"""Artifact Registry repository id (gke), ECR repository prefix (eks), path under the registry
(onprem)."""
DOCKERFILE = "Dockerfile.wide-ep"
SERVING_TARGET = "serving"
"""Final stage of the Dockerfile."""
BUILT_IMAGE_USER = 2000
"""UID the built image's serving stage runs as (`USER 2000:0` in the Dockerfile)."""

_CHECKOUT_IMAGES = Path(__file__).resolve().parent.parent / "images"


def images_dir() -> Path:
    """The build context: images/ of the checkout (the Dockerfile is not part of the wheel)."""
    if not (_CHECKOUT_IMAGES / DOCKERFILE).is_file():
        raise FileNotFoundError(
            f"{_CHECKOUT_IMAGES / DOCKERFILE} not found: building the serving image needs a checkout"
        )
    return _CHECKOUT_IMAGES


# ----------------------------------------------------------------------------------------------
# Which variant each target needs, and the stack config that asks for a build.
# ----------------------------------------------------------------------------------------------


def variant_for(fabric_name: str) -> Variant:
    """The image variant a fabric (components/fabric.py `Fabric.name`) needs."""
    return "efa" if fabric_name == "efa" else "ib"


def default_variant(target_kind: TargetKind) -> Variant:
    """EKS GPU nodes talk over EFA; every other target over InfiniBand/RoCE/TCPXO."""
    return "efa" if target_kind == "eks" else "ib"


def variant_problem(target_kind: TargetKind, variant: Variant) -> str | None:
    """Why image variant `variant` cannot serve on `target_kind`, or None when it can."""
    if variant == "efa" and target_kind != "eks":
        return f"the efa image serves only on the eks target (target is {target_kind})"
    if target_kind == "eks" and variant != "efa":
        return "eks GPU nodes talk over EFA: the image variant must be efa"
    return None


class ImagesConfig(ConfigModel):
    """Stack config `llmd-fleet:images`: which serving image the engine runs.

    The on-prem registry password is the secret config key `registryPassword`."""

    build: bool = False
    """Build the wide-EP image (images/Dockerfile.wide-ep) for the target's fabric and push it to
    the target's registry; false runs the pinned upstream vLLM image. The eks target needs true
    (EFA)."""
    registry: Annotated[str, Field(pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$")] | None = None
    """onprem: registry host[:port][/path] to push to; required there when build is true.
    gke pushes to Artifact Registry and eks to ECR, created by the build."""
    registry_username: Annotated[str, Field(pattern=r"^[A-Za-z0-9._@+-]{1,255}$")] | None = None
    """onprem: registry user, when the registry needs a login (its password: `registryPassword`)."""
    repository: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")] = DEFAULT_REPOSITORY
    """Artifact Registry repository id (gke), ECR repository prefix (eks), or path segment under
    `registry` (onprem)."""


def images_config_problems(
    target_kind: TargetKind,
    config: ImagesConfig,
    has_registry_password: bool = False,
    prefix: str = "llmd-fleet:images",
) -> list[tuple[str, str]]:
    """Key paths and messages for an `images` config that cannot work on `target_kind`."""
    problems: list[tuple[str, str]] = []
    if default_variant(target_kind) == "efa" and not config.build:
        problems.append(
            (
                f"{prefix}.build",
                f"must be true on {target_kind}: EFA needs the built image, the upstream vLLM image "
                "has no EFA user space (libfabric)",
            )
        )
    own_registry = target_kind == "onprem"
    if config.build and own_registry and config.registry is None:
        problems.append((f"{prefix}.registry", f"required when build is true on the {target_kind} target"))
    if not own_registry and (config.registry is not None or config.registry_username is not None):
        problems.append(
            (
                f"{prefix}.registry",
                f"not used on {target_kind}: the build pushes to "
                + ("Artifact Registry" if target_kind == "gke" else "ECR"),
            )
        )
    root = prefix.rsplit(":", 1)[0]
    if has_registry_password and (not own_registry or config.registry_username is None):
        problems.append(
            (
                f"{root}:registryPassword",
                "only used with images.registryUsername on the onprem target (the registry login)",
            )
        )
    if own_registry and config.registry_username is not None and not has_registry_password:
        problems.append(
            (
                f"{root}:registryPassword",
                "required with images.registryUsername: pulumi config set --secret registryPassword <value>",
            )
        )
    return problems


# ----------------------------------------------------------------------------------------------
# Build arguments and tag, from the version matrix.
# ----------------------------------------------------------------------------------------------


def build_args(variant: Variant, matrix: VersionMatrix | None = None) -> dict[str, str]:
    """Every ARG of images/Dockerfile.wide-ep for `variant`, from the version matrix."""
    m = matrix or versions()
    b = m.build
    args = {
        "BASE_IMAGE": b.base_image,
        "FABRIC": variant,
        "CUDA_VERSION": b.cuda,
        "PYTHON_VERSION": b.python,
        "TORCH_VERSION": b.torch,
        "VLLM_VERSION": m.vllm.version,
        "NIXL_VERSION": b.nixl,
        "NVSHMEM_VERSION": b.nvshmem,
        "DEEPEP_COMMIT": b.deepep,
        "GDRCOPY_VERSION": b.gdrcopy,
        "TORCH_CUDA_ARCH_LIST": b.cuda_arch,
        # CMake spells the same architectures without the dot (9.0 -> 90).
        "CUDA_ARCHITECTURES": ";".join(a.replace(".", "") for a in b.cuda_arch.replace(";", " ").split()),
    }
    if variant == "efa":
        # Only the EFA stages read it; keeping it out of ib keeps ib's tag stable across EFA bumps.
        args["EFA_INSTALLER_VERSION"] = b.efa_installer
    return args


def image_tag(variant: Variant, matrix: VersionMatrix | None = None, dockerfile: bytes | None = None) -> str:
    """v<vllm>-<variant>-<12 hex of sha256(Dockerfile, build args)>: a new tag for every change."""
    m = matrix or versions()
    content = dockerfile if dockerfile is not None else (images_dir() / DOCKERFILE).read_bytes()
    digest = hashlib.sha256(content + json.dumps(build_args(variant, m), sort_keys=True).encode()).hexdigest()
    return f"v{m.vllm.version}-{variant}-{digest[:12]}"


def image_labels(variant: Variant, matrix: VersionMatrix | None = None) -> dict[str, str]:
    m = matrix or versions()
    return {
        "org.opencontainers.image.title": IMAGE_NAME,
        "org.opencontainers.image.description": f"llmd-fleet wide-EP vLLM serving image ({variant})",
        "org.opencontainers.image.version": m.vllm.version,
    }


def is_built_image(ref: str) -> bool:
    """Whether `ref` names this checkout's build of the wide-EP image: `<registry path>/vllm-wide-ep`
    at the tag the current Dockerfile and matrix produce (a digest may follow). A stale tag, or
    any other image under that name, is not."""
    name = ref.partition("@")[0]
    repository, _, tag = name.rpartition(":")
    if not repository or "/" in tag or not repository.endswith(f"/{IMAGE_NAME}"):
        return False
    return tag in {image_tag(v) for v in VARIANTS}
