"""The serving image: which image the vLLM engine runs, and the component that builds it.

Every engine container of the fleet (prefill and decode, every role) runs one image, and that
reference comes from one place, `serving_image()`:

- no build (the default): the pinned upstream vLLM image, `versions().image("vllm")`;
- a build (`ImageBuild`): the wide-EP image from images/Dockerfile.wide-ep, built with BuildKit
  (pulumi-docker-build), pushed to the target's registry (Artifact Registry on GKE, ECR on EKS,
  a configured registry on-prem), and referenced by digest.

The built image has a variant per kind of fabric (`Variant`): `ib` for InfiniBand or RoCE
(NVSHMEM over IBGDA, NIXL over UCX) and `efa` for AWS EFA (libfabric). The variant follows from the
target's fabric (llmd_fleet/targets/<kind>/fabric.py). The upstream image has no EFA user space, so EFA always
needs the build. All versions come from the [build] table of images/versions.toml, passed
as build arguments; the image tag hashes the Dockerfile and those arguments, so a version bump
is a new tag.

What the image is (variants, the `images` stack config, build arguments, tag) lives in
llmd_fleet/images/spec.py, which needs no cloud SDK; this module adds the build and the choice.

`python -m llmd_fleet.images.build build-args ib` prints the build arguments, `... tag ib` the tag
(README "Images" shows the manual `docker buildx build`).
"""

import argparse
import sys
from collections.abc import Mapping
from typing import NotRequired, TypedDict, get_args

import pulumi

from llmd_fleet.core.fabric import Fabric
from llmd_fleet.images.spec import (
    DEFAULT_REPOSITORY,
    DOCKERFILE,
    IMAGE_NAME,
    SERVING_TARGET,
    TargetKind,
    Variant,
    build_args,
    image_labels,
    image_tag,
    images_dir,
    variant_for,
    variant_problem,
)
from llmd_fleet.targets.eks.fabric import VPC_TCP
from llmd_fleet.versions import versions

# The cloud and build SDKs are imported where a build is declared: a stack that builds no image
# (or builds on another target) never pays for their import (docs/performance.md).

PLATFORM = "linux/amd64"
"""H100 nodes are x86_64 (docker_build.Platform.LINUX_AMD64)."""
GCP_REGISTRY_USER = "oauth2accesstoken"
"""Artifact Registry accepts an OAuth access token as the password of this user."""
CACHE_TAG_PREFIX = "buildcache-"
"""Tag prefix of the registry build cache next to the image (one tag per variant)."""


# ----------------------------------------------------------------------------------------------
# The component.
# ----------------------------------------------------------------------------------------------


class ImageBuildArgs(TypedDict):
    """Arguments of `ImageBuild`. Unusable combinations raise ValueError before anything is
    registered (`_build_args_problem`)."""

    target_kind: TargetKind
    """`gke`, `eks` or `onprem`: the target the image is for; picks the registry (gke: Artifact
    Registry, eks: ECR, onprem: `registry`)."""
    variant: Variant
    """`ib` or `efa`; must suit the target (`variant_problem`, `variant_for(fabric)`)."""
    repository: NotRequired[str]
    """Artifact Registry repository id, ECR repository prefix, or path under `registry` (default
    `"llmd-fleet"`, `DEFAULT_REPOSITORY`)."""
    registry: NotRequired[str | None]
    """onprem: registry host[:port][/path]; required there (default `None`)."""
    username: NotRequired[pulumi.Input[str] | None]
    """onprem: registry user; no registry login when unset (default `None`)."""
    password: NotRequired[pulumi.Input[str] | None]
    """onprem: registry password, wrapped as a secret regardless (default `None`)."""
    gcp_project: NotRequired[pulumi.Input[str] | None]
    """gke: project of the Artifact Registry repository; required there (default `None`)."""
    gcp_location: NotRequired[str | None]
    """gke: region of the Artifact Registry repository (e.g. us-central1); required there (default
    `None`)."""
    push: NotRequired[bool]
    """Push the image (default `True`); False only builds, which leaves pods nothing to pull."""
    cache: NotRequired[bool]
    """Read and write a registry build cache next to the image (default `True`): the DeepEP/NVSHMEM
    stages take most of an hour without it."""


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
    if kind == "onprem" and not args.get("registry"):
        return f"the {kind} target needs a registry address"
    return None


class ImageBuild(pulumi.ComponentResource):
    """Builds images/Dockerfile.wide-ep in one variant and pushes it to the target's registry.

    Children: the registry repository (Artifact Registry on gke, ECR on eks; on-prem registries
    exist already) and the `docker-build:index:Image`. `ref` is what pods use: the pushed tag with
    its digest.
    """

    # `image` (the docker-build Image) is set in __init__; no class annotation, since Pulumi
    # resolves these annotations at run time and the build SDK is imported only there.
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
        import pulumi_docker_build as docker_build

        self.variant = variant
        repository = args.get("repository", DEFAULT_REPOSITORY)
        child = pulumi.ResourceOptions(parent=self)
        registry: docker_build.RegistryArgs | None = None
        if kind == "gke":
            import pulumi_gcp as gcp  # its submodules load on first use: only these two

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
            import pulumi_aws as aws

            ecr = aws.ecr.Repository(
                f"{name}-repository",
                name=f"{repository}/{IMAGE_NAME}",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True
                ),
                # Image tags hash their inputs, so a tag never needs to move; only the build
                # cache tags are rewritten by every build.
                image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
                image_tag_mutability_exclusion_filters=[
                    aws.ecr.RepositoryImageTagMutabilityExclusionFilterArgs(
                        filter=f"{CACHE_TAG_PREFIX}*", filter_type="WILDCARD"
                    )
                ],
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
        cache_ref = self.repository_url.apply(lambda url: f"{url}:{CACHE_TAG_PREFIX}{variant}")
        use_cache = args.get("cache", True)
        self.image = docker_build.Image(
            f"{name}-{variant}",
            context=docker_build.BuildContextArgs(location=str(context)),
            dockerfile=docker_build.DockerfileArgs(location=str(context / DOCKERFILE)),
            target=SERVING_TARGET,
            platforms=[docker_build.Platform(PLATFORM)],
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
    variant, a fabric the target does not have). Without a build, eks serves over TCP
    (targets/eks/fabric.py VPC_TCP)."""
    variant = variant_for(fabric.name)
    # eks without a build: the upstream image over TCP (VPC_TCP), the one non-efa eks fabric.
    upstream_on_eks = target_kind == "eks" and build is None and fabric.name == VPC_TCP.name
    if not upstream_on_eks and (problem := variant_problem(target_kind, variant)):
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
        prog="python -m llmd_fleet.images.build",
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
