"""The `llmd-fleet:images` stack config and the facts it is checked against: which image
variant each target's fabric needs. Config layer: pydantic and the config base only, so that the
stack config can use it without importing the image builders (llmd_fleet/images/spec.py).
"""

from dataclasses import dataclass
from typing import Annotated, Literal

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import Pattern, Registry
from llmd_fleet.core.problems import Key, Problem

Variant = Literal["ib", "efa"]
"""Variant of the built image. `ib`: verbs/mlx5 NICs (InfiniBand, RoCE), and fabrics whose RDMA
does not go through the pod's verbs (GKE TCPXO: NCCL's plugin comes from the node). `efa`: AWS
Elastic Fabric Adapter (libfabric)."""
VARIANTS: tuple[Variant, ...] = ("ib", "efa")

DEFAULT_REPOSITORY = "llmd-fleet"
"""The repository the build pushes to: a repository id or prefix in a registry the target creates,
or a path under the stack's own registry (`images.registry`)."""


def variant_for(fabric_name: str) -> Variant:
    """The image variant a fabric (llmd_fleet/core/fabric.py `Fabric.name`) needs."""
    return "efa" if fabric_name == "efa" else "ib"


@dataclass(frozen=True)
class ImageTarget:
    """What the `images` section is checked against: the stack's target kind as its `TargetSpec`
    describes it (llmd_fleet/targets/images.py builds it from the registry)."""

    kind: str
    """The target kind, named in messages."""
    variant: Variant
    """The image variant the kind's GPU fabric needs (`variant_for` of its fabric)."""
    pushes_to: str | None
    """Where the image goes without `images.registry`, said when that key is set anyway ("the
    build pushes to ECR"); None: the stack names its own registry (`images.registry`, required
    with `images.build`, with its login)."""


class ImagesConfig(ConfigModel):
    """Stack config `llmd-fleet:images`: which serving image the engine runs.

    The on-prem registry password is the secret config key `registryPassword`."""

    build: bool = False
    """Build the wide-EP image (images/Dockerfile.wide-ep) for the target's fabric and push it to
    the target's registry; false runs the pinned upstream vLLM image. The eks target needs true
    when an instance spans nodes (EFA); with one node per instance, false serves over TCP."""
    registry: Registry | None = None
    """onprem: registry host[:port][/path] to push to; required there when build is true.
    gke pushes to Artifact Registry and eks to ECR, created by the build."""
    registry_username: Annotated[str, Pattern(r"[A-Za-z0-9._@+-]{1,255}")] | None = None
    """onprem: registry user, when the registry needs a login (its password: `registryPassword`)."""
    repository: Annotated[str, Pattern(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?")] = DEFAULT_REPOSITORY
    """Artifact Registry repository id (gke), ECR repository prefix (eks), or path segment under
    `registry` (onprem)."""


_IMAGES_KEY = Key("llmd-fleet:images", declared=ImagesConfig)


def images_config_problems(
    target: ImageTarget,
    config: ImagesConfig,
    has_registry_password: bool = False,
    prefix: Key = _IMAGES_KEY,
    instance_spans_nodes: bool = True,
) -> list[Problem]:
    """Key paths and messages for an `images` config that cannot work on `target`.
    `instance_spans_nodes`: some serving role's instance has more than one node (its MoE
    all-to-all then crosses nodes)."""
    problems: list[Problem] = []
    kind = target.kind
    if target.variant == "efa" and not config.build and instance_spans_nodes:
        problems.append(
            Problem(
                prefix.at("build"),
                f"must be true on {kind} when an instance spans nodes "
                "(serving.roles.*.nodesPerInstance > 1): EFA needs the built image, the upstream "
                "vLLM image has no EFA user space (libfabric); with one node per instance the "
                "upstream image serves, its KV moving over TCP",
            )
        )
    own_registry = target.pushes_to is None
    if config.build and own_registry and config.registry is None:
        problems.append(Problem(prefix.at("registry"), f"required when build is true on the {kind} target"))
    if target.pushes_to is not None and (config.registry is not None or config.registry_username is not None):
        problems.append(Problem(prefix.at("registry"), f"not used on {kind}: {target.pushes_to}"))
    root = prefix.rsplit(":", 1)[0]
    if has_registry_password and (not own_registry or config.registry_username is None):
        problems.append(
            Problem(
                f"{root}:registryPassword",
                "only used with images.registryUsername on a target with its own registry "
                "(images.registry: the registry login)",
            )
        )
    if own_registry and config.registry_username is not None and not has_registry_password:
        problems.append(
            Problem(
                f"{root}:registryPassword",
                "required with images.registryUsername: pulumi config set --secret registryPassword <value>",
            )
        )
    return problems
