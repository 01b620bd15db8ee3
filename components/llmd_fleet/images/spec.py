"""What the serving image is, without building it: variants, the `images` stack config, build
arguments and tag, all from the version matrix.

Kept free of cloud SDK imports so that the policy pack can read it; the `images` stack config and
the variant rules live in the config layer (llmd_fleet/images/config.py) and are re-exported here;
llmd_fleet/images/build.py holds the component that builds and pushes the image.
"""

import hashlib
import json
from pathlib import Path

from llmd_fleet.images.config import DEFAULT_REPOSITORY as DEFAULT_REPOSITORY
from llmd_fleet.images.config import VARIANTS as VARIANTS
from llmd_fleet.images.config import ImagesConfig as ImagesConfig
from llmd_fleet.images.config import ImageTarget as ImageTarget
from llmd_fleet.images.config import Variant as Variant
from llmd_fleet.images.config import images_config_problems as images_config_problems
from llmd_fleet.images.config import variant_for as variant_for
from llmd_fleet.versions import VersionMatrix, versions

IMAGE_NAME = "vllm-wide-ep"
"""Repository name of the built image under the registry path."""
DOCKERFILE = "Dockerfile.wide-ep"
SERVING_TARGET = "serving"
"""Final stage of the Dockerfile."""
BUILT_IMAGE_USER = 2000
"""UID the built image's serving stage runs as (`USER 2000:0` in the Dockerfile)."""

# llmd_fleet/images/spec.py -> the repository root is three directories up.
_CHECKOUT_IMAGES = Path(__file__).resolve().parents[3] / "images"
# The wheel ships the Dockerfile here (pyproject's force-include): the same bytes, so the same tag.
_PACKAGED_CONTEXT = Path(__file__).resolve().parent / "context"


def images_dir() -> Path:
    """The build context: images/ of the checkout, or the copy of its Dockerfile the wheel ships
    (the Dockerfile copies nothing from its context)."""
    for directory in (_CHECKOUT_IMAGES, _PACKAGED_CONTEXT):
        if (directory / DOCKERFILE).is_file():
            return directory
    raise FileNotFoundError(f"{_CHECKOUT_IMAGES / DOCKERFILE} not found, nor a packaged copy")


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
        "MODELEXPRESS_VERSION": b.modelexpress,
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
