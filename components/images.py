"""The serving image: which image the vLLM engine runs, and the component that builds it.

Every engine container of the fleet (prefill and decode, every role) runs one image, and that
reference comes from one place, `serving_image()`:

- no build (the default): the pinned upstream vLLM image, `versions().image("vllm")`;
- a build (`ImageBuild`): the wide-EP image from images/Dockerfile.wide-ep, built with BuildKit
  (pulumi-docker-build), pushed to the target's registry (Artifact Registry on GKE, ECR on EKS,
  a configured registry on-prem), and referenced by digest.

The built image has a variant per kind of fabric (`Variant`): `ib` for InfiniBand or RoCE
(NVSHMEM over IBGDA, NIXL over UCX) and `efa` for AWS EFA (libfabric). The variant follows from the
target's fabric (components/fabric.py). The upstream image has no EFA user space, so EFA always
needs the build. All versions come from the [build] table of images/versions.toml, passed
as build arguments; the image tag hashes the Dockerfile and those arguments, so a version bump
is a new tag.

`python -m components.images build-args ib` prints the build arguments, `... tag ib` the tag
(README "Images" shows the manual `docker buildx build`).
"""

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, NotRequired, TypedDict, get_args

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp
from pydantic import Field

from components.config_base import ConfigModel
from components.fabric import Fabric
from components.versions import VersionMatrix, versions

Variant = Literal["ib", "efa"]
"""Variant of the built image. `ib`: verbs/mlx5 NICs (InfiniBand, RoCE), and fabrics whose RDMA
does not go through the pod's verbs (GKE TCPXO: NCCL's plugin comes from the node). `efa`: AWS
Elastic Fabric Adapter (libfabric)."""
TargetKind = Literal["onprem", "gke", "eks", "kind"]
"""Where the fleet runs (the stack's target.kind)."""

IMAGE_NAME = "vllm-wide-ep"
"""Repository name of the built image under the registry path."""
DEFAULT_REPOSITORY = "llmd-fleet"
"""Artifact Registry repository id (gke), ECR repository prefix (eks), path under the registry
(onprem, kind)."""
DOCKERFILE = "Dockerfile.wide-ep"
SERVING_TARGET = "serving"
"""Final stage of the Dockerfile."""
PLATFORM = docker_build.Platform.LINUX_AMD64
"""H100 nodes are x86_64."""
GCP_REGISTRY_USER = "oauth2accesstoken"
"""Artifact Registry accepts an OAuth access token as the password of this user."""

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


def variant_for(fabric: Fabric | str) -> Variant:
    """The image variant a fabric (components/fabric.py, or its name) needs."""
    name = fabric if isinstance(fabric, str) else fabric.name
    return "efa" if name == "efa" else "ib"


def default_variant(target_kind: TargetKind) -> Variant:
    """EKS GPU nodes talk over EFA; every other target over InfiniBand/RoCE/TCPXO (kind: none)."""
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

    The registry password (on-prem/kind) is the secret config key `registryPassword`."""

    build: bool = False
    """Build the wide-EP image (images/Dockerfile.wide-ep) for the target's fabric and push it to
    the target's registry; false runs the pinned upstream vLLM image. The eks target needs true
    (EFA)."""
    registry: Annotated[str, Field(pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$")] | None = None
    """onprem/kind: registry host[:port][/path] to push to; required there when build is true.
    gke pushes to Artifact Registry and eks to ECR, created by the build."""
    registry_username: str | None = None
    """onprem/kind: registry user, when the registry needs a login."""
    repository: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")] = DEFAULT_REPOSITORY
    """Artifact Registry repository id (gke), ECR repository prefix (eks), or path segment under
    `registry` (onprem, kind)."""


def images_config_problems(
    target_kind: TargetKind, config: ImagesConfig, prefix: str = "llmd-fleet:images"
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
    own_registry = target_kind in ("onprem", "kind")
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


# ----------------------------------------------------------------------------------------------
# The component.
# ----------------------------------------------------------------------------------------------


class ImageBuildArgs(TypedDict):
    target_kind: TargetKind
    """Target the image is for; picks the registry (gke: Artifact Registry, eks: ECR, onprem and
    kind: `registry`)."""
    variant: Variant
    """Image variant; must suit the target (`variant_problem`, `variant_for(fabric)`)."""
    repository: NotRequired[str]
    """Artifact Registry repository id / ECR repository prefix / path under `registry`;
    default `llmd-fleet`."""
    registry: NotRequired[str | None]
    """onprem/kind: registry host[:port][/path]; required there."""
    username: NotRequired[pulumi.Input[str] | None]
    """onprem/kind: registry user; no login when unset."""
    password: NotRequired[pulumi.Input[str] | None]
    """onprem/kind: registry password (a secret; wrapped as one regardless)."""
    gcp_project: NotRequired[pulumi.Input[str] | None]
    """gke: project of the Artifact Registry repository; required there."""
    gcp_location: NotRequired[str | None]
    """gke: region of the Artifact Registry repository (e.g. us-central1); required there."""
    push: NotRequired[bool]
    """Push the image (default true); false only builds, which leaves pods nothing to pull."""
    cache: NotRequired[bool]
    """Use a registry build cache next to the image (default true): the DeepEP/NVSHMEM stages take
    most of an hour without it."""


def _registry_host(address: str) -> str:
    return address.split("/", 1)[0]


def _build_args_problem(args: ImageBuildArgs) -> str | None:
    """What makes these ImageBuild args unusable, checked before anything is registered."""
    kind = args["target_kind"]
    problem = variant_problem(kind, args["variant"])
    if problem:
        return problem
    if kind == "gke" and (args.get("gcp_project") is None or not args.get("gcp_location")):
        return "gke needs gcp_project and gcp_location (the Artifact Registry repository)"
    if kind in ("onprem", "kind") and not args.get("registry"):
        return f"the {kind} target needs a registry address"
    return None


class ImageBuild(pulumi.ComponentResource):
    """Builds images/Dockerfile.wide-ep in one variant and pushes it to the target's registry.

    Children: the registry repository (Artifact Registry on gke, ECR on eks; on-prem registries
    exist already) and the `docker-build:index:Image`. `ref` is what pods use: the pushed tag with
    its digest.
    """

    image: docker_build.Image
    ref: pulumi.Output[str]
    """repository:tag@sha256:digest once pushed (the tag alone where the provider reports no
    digest, e.g. under offline mocks)."""
    repository_url: pulumi.Output[str]
    """Registry path of the image, without tag."""
    tag: str
    variant: Variant

    def __init__(self, name: str, args: ImageBuildArgs, opts: pulumi.ResourceOptions | None = None):
        kind, variant = args["target_kind"], args["variant"]
        problem = _build_args_problem(args)
        if problem:
            raise ValueError(f"ImageBuild {name}: {problem}")
        super().__init__("llmd-fleet:images:ImageBuild", name, {}, opts)
        self.variant = variant
        repository = args.get("repository", DEFAULT_REPOSITORY)
        child = pulumi.ResourceOptions(parent=self)
        registry: docker_build.RegistryArgs | None = None
        if kind == "gke":
            project, location = args.get("gcp_project"), args.get("gcp_location")
            ar = gcp.artifactregistry.Repository(
                f"{name}-repository",
                repository_id=repository,
                location=location,
                project=project,
                format="DOCKER",
                description="llmd-fleet serving images",
                opts=child,
            )
            host = f"{location}-docker.pkg.dev"
            self.repository_url = pulumi.Output.all(ar.project, ar.repository_id).apply(
                lambda a: f"{host}/{a[0]}/{a[1]}/{IMAGE_NAME}"
            )
            token = gcp.organizations.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=self))
            registry = docker_build.RegistryArgs(
                address=host,
                username=GCP_REGISTRY_USER,
                password=pulumi.Output.secret(token.access_token),
            )
        elif kind == "eks":
            ecr = aws.ecr.Repository(
                f"{name}-repository",
                name=f"{repository}/{IMAGE_NAME}",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True
                ),
                opts=child,
            )
            self.repository_url = ecr.repository_url
            auth = aws.ecr.get_authorization_token_output(
                registry_id=ecr.registry_id, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            registry = docker_build.RegistryArgs(
                address=ecr.repository_url.apply(_registry_host),
                username=auth.user_name,
                password=pulumi.Output.secret(auth.password),
            )
        else:
            address = args.get("registry") or ""
            self.repository_url = pulumi.Output.from_input(f"{address}/{repository}/{IMAGE_NAME}")
            username, password = args.get("username"), args.get("password")
            if username is not None:
                registry = docker_build.RegistryArgs(
                    address=_registry_host(address),
                    username=username,
                    password=pulumi.Output.secret(password) if password is not None else None,
                )

        context = images_dir()
        self.tag = image_tag(variant)
        tagged = self.repository_url.apply(lambda url: f"{url}:{self.tag}")
        cache_ref = self.repository_url.apply(lambda url: f"{url}:buildcache-{variant}")
        use_cache = args.get("cache", True)
        self.image = docker_build.Image(
            f"{name}-{variant}",
            context=docker_build.BuildContextArgs(location=str(context)),
            dockerfile=docker_build.DockerfileArgs(location=str(context / DOCKERFILE)),
            target=SERVING_TARGET,
            platforms=[PLATFORM],
            build_args=build_args(variant),
            labels=image_labels(variant),
            tags=[tagged],
            push=args.get("push", True),
            registries=[registry] if registry is not None else None,
            cache_from=(
                [docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=cache_ref))]
                if use_cache
                else None
            ),
            cache_to=(
                [
                    docker_build.CacheToArgs(
                        registry=docker_build.CacheToRegistryArgs(
                            ref=cache_ref,
                            mode=docker_build.CacheMode.MAX,
                            # ECR and Artifact Registry accept the cache only as an OCI image manifest.
                            image_manifest=True,
                            oci_media_types=True,
                        )
                    )
                ]
                if use_cache
                else None
            ),
            # The build takes most of an hour; previews show the change without running it.
            build_on_preview=False,
            opts=child,
        )
        self.ref = pulumi.Output.all(self.image.ref, tagged).apply(lambda a: a[0] or a[1])
        self.register_outputs({"ref": self.ref, "tag": self.tag})


# ----------------------------------------------------------------------------------------------
# The one place the engine image comes from.
# ----------------------------------------------------------------------------------------------


def serving_image(target_kind: TargetKind, fabric: Fabric, build: ImageBuild | None) -> pulumi.Input[str]:
    """The image every engine container runs: the build's pushed ref when the stack builds, else
    the pinned matrix image the fabric names (`fabric.image`, the upstream vLLM image). Raises
    ValueError for a combination that cannot serve (EFA without a build, a build of the other
    variant, a fabric the target does not have)."""
    variant = variant_for(fabric)
    problem = variant_problem(target_kind, variant)
    if problem:
        raise ValueError(problem)
    if build is not None:
        if build.variant != variant:
            raise ValueError(
                f"the image build is the {build.variant} variant, fabric {fabric.name} needs {variant}"
            )
        return build.ref
    if variant == "efa":
        raise ValueError("fabric efa needs the built image: the upstream vLLM image has no EFA user space")
    return versions().image(fabric.image).ref


# ----------------------------------------------------------------------------------------------
# Command line: the same build arguments and tag for a manual `docker buildx build`.
# ----------------------------------------------------------------------------------------------


def _format_build_args(args: Mapping[str, str]) -> str:
    return "\n".join(f"--build-arg {key}={value}" for key, value in args.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.images",
        description="Print the build arguments or the tag of the wide-EP serving image.",
    )
    parser.add_argument("what", choices=["build-args", "tag"])
    parser.add_argument("variant", choices=get_args(Variant))
    ns = parser.parse_args(argv)
    variant: Variant = ns.variant
    print(_format_build_args(build_args(variant)) if ns.what == "build-args" else image_tag(variant))
    return 0


if __name__ == "__main__":
    sys.exit(main())
