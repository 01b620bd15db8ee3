"""The serving image: which image the vLLM engine runs, and the component that builds it.

Every engine container of the fleet (prefill and decode, every role) runs one image, and that
reference comes from one place, `serving_image()`:

- no build (the default): the pinned upstream vLLM image, `versions().image("vllm")`;
- a build (`ImageBuild`): the wide-EP image from images/Dockerfile.wide-ep, built with BuildKit
  (pulumi-docker-build), pushed to the target's registry (`ImageRegistry`: the target's Pulumi
  half creates it, llmd_fleet/targets/<kind>/build.py `image_registry`, or `own_registry` names
  the stack's), and referenced by digest.

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
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict, get_args

import pulumi

from llmd_fleet.core.fabric import Fabric
from llmd_fleet.images.spec import (
    DEFAULT_REPOSITORY,
    DOCKERFILE,
    IMAGE_NAME,
    SERVING_TARGET,
    Variant,
    build_args,
    image_labels,
    image_tag,
    images_dir,
    variant_for,
)
from llmd_fleet.versions import versions

# The build SDK is imported where a build is declared, a cloud's by the target's registry: a stack
# that builds no image never pays for their import (docs/performance.md).

PLATFORM = "linux/amd64"
"""H100 nodes are x86_64 (docker_build.Platform.LINUX_AMD64)."""
CACHE_TAG_PREFIX = "buildcache-"
"""Tag prefix of the registry build cache next to the image (one tag per variant)."""


# ----------------------------------------------------------------------------------------------
# The component.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryPush:
    """Where a build pushes: the image's repository URL and the registry login, if any."""

    repository_url: pulumi.Output[str]
    """Registry path of the image, without tag."""
    address: pulumi.Input[str] | None = None
    """The registry host the login is for; None: no login (an open registry)."""
    username: pulumi.Input[str] | None = None
    password: pulumi.Input[str] | None = None
    """Sent as a secret whatever it is."""


class ImageRegistry(Protocol):
    """The registry a build pushes to, declared as the build's child: a target's Pulumi half gives
    its own (llmd_fleet/targets/<kind>/build.py `image_registry`: Artifact Registry, ECR), or the
    stack names one (`own_registry`)."""

    def __call__(self, name: str, repository: str, parent: pulumi.Resource) -> RegistryPush:
        """Declare what the registry needs under `parent` (children named `<name>-...`) and say
        where repository `repository` is."""
        ...


def registry_host(address: str) -> str:
    """The host[:port] of a registry address (host[:port][/path])."""
    return address.split("/", 1)[0]


def own_registry(
    address: str | None,
    username: pulumi.Input[str] | None = None,
    password: pulumi.Input[str] | None = None,
) -> ImageRegistry:
    """A registry that exists already at `address` (host[:port][/path]), with a login when
    `username` is set. Raises ValueError without an address."""
    if not address:
        raise ValueError("the image build needs a registry address (images.registry)")
    where = address

    def declare(name: str, repository: str, parent: pulumi.Resource) -> RegistryPush:
        url = pulumi.Output.from_input(f"{where}/{repository}/{IMAGE_NAME}")
        if username is None:
            return RegistryPush(url)
        return RegistryPush(url, registry_host(where), username, password)

    return declare


class ImageBuildArgs(TypedDict):
    """Arguments of `ImageBuild`."""

    variant: Variant
    """`ib` or `efa`: the variant the target's fabric needs (`variant_for(fabric)`)."""
    registry: ImageRegistry
    """Where the image goes: the target's registry (its Pulumi half's `image_registry`) or the
    stack's own (`own_registry`)."""
    repository: NotRequired[str]
    """Repository id or prefix in the target's registry, or path under the stack's own (default
    `"llmd-fleet"`, `DEFAULT_REPOSITORY`)."""
    push: NotRequired[bool]
    """Push the image (default `True`); False only builds, which leaves pods nothing to pull."""
    cache: NotRequired[bool]
    """Read and write a registry build cache next to the image (default `True`): the DeepEP/NVSHMEM
    stages take most of an hour without it."""


class ImageBuild(pulumi.ComponentResource):
    """Builds images/Dockerfile.wide-ep in one variant and pushes it to the target's registry.

    Children: what the registry needs (a repository in the registry a target creates; a stack's
    own registry exists already) and the `docker-build:index:Image`. `ref` is what pods use: the
    pushed tag with its digest.
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
        variant = args["variant"]
        if variant not in get_args(Variant):
            raise ValueError(
                f"ImageBuild {name}: variant must be one of {', '.join(get_args(Variant))} (got {variant!r})"
            )
        super().__init__("llmd-fleet:images:ImageBuild", name, {}, opts)
        import pulumi_docker_build as docker_build

        self.variant = variant
        repository = args.get("repository", DEFAULT_REPOSITORY)
        child = pulumi.ResourceOptions(parent=self)
        push = args["registry"](name, repository, self)
        self.repository_url = push.repository_url
        registry: docker_build.RegistryArgs | None = None
        if push.address is not None:
            registry = docker_build.RegistryArgs(
                address=push.address,
                username=push.username,
                password=pulumi.Output.secret(push.password) if push.password is not None else None,
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


def serving_image(fabric: Fabric, build: ImageBuild | None) -> pulumi.Input[str]:
    """The image every engine container runs: the build's pushed ref when the stack builds, else
    the pinned matrix image the fabric names (`fabric.image`, the upstream vLLM image). Raises
    ValueError for a combination that cannot serve (EFA without a build, a build of the other
    variant). The fabric is the target's for the choice (llmd_fleet/targets/specs.py `fabric_for`:
    a kind whose fabric the upstream image cannot drive serves it over another)."""
    variant = variant_for(fabric.name)
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
