"""The canary revision (`serving.canary`): a second whole model server beside the stable one,
derived from the stack config. Pure.

The canary is the stable stack config with three things changed: the serving name
(`<name>-canary`, so its DisaggregatedSet, endpoint picker, InferencePool, pod labels and
NetworkPolicies are all its own), the instances of each role (`serving.canary.instances`), and
the revision (`serving.canary.modelRevision` and/or `imageTag`). Everything that selects by the
serving name (the pool's selector, the rollout screener's scope, the policies' pod selectors)
then selects the canary's pods only, and the stable revision's objects are not touched when a
canary comes or goes. Only the HTTPRoute knows both, as two weighted `backendRefs`
(layers/gateway/component.py `backend_refs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.layers.serving.config import CanaryConfig, canary_name
from llmd_fleet.layers.serving.rules import engine_image_key, pinned_tags
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def canary_config(config: StackConfig) -> StackConfig | None:
    """The canary's whole stack config, or None without `serving.canary`. No preflight Job (the
    fabric is the stable revision's, already checked), no autoscaling (the canary runs its
    fixed instances), and `routerReplicas` endpoint-picker replicas when set."""
    canary = config.serving.canary
    if canary is None:
        return None
    roles = config.serving.roles
    serving = config.serving.model_copy(
        update={
            "name": canary_name(config.serving),
            "roles": roles.model_copy(
                update={
                    "prefill": roles.prefill.model_copy(update={"instances": canary.instances.prefill}),
                    "decode": roles.decode.model_copy(update={"instances": canary.instances.decode}),
                }
            ),
            "autoscaling": None,
            "preflight": config.serving.preflight.model_copy(
                update={"enabled": False, "gate_serving": False}
            ),
            "canary": None,
        }
    )
    model = config.model
    if canary.model_revision is not None:
        model = model.model_copy(update={"revision": canary.model_revision})
    router = config.router
    if canary.router_replicas is not None:
        router = router.model_copy(update={"replicas": canary.router_replicas})
    return config.model_copy(update={"serving": serving, "model": model, "router": router})


def canary_image(config: StackConfig) -> str | None:
    """The canary's engine image with `imageTag`: the pinned entry of that repository and tag
    (digest included where pinned), or None without `imageTag`. Every image a stack runs is
    pinned once in images/versions.toml (the policy pack's image-pinned rule), so a canary's tag
    is one pinned there (canary_problems refuses any other)."""
    canary = config.serving.canary
    if canary is None or canary.image_tag is None:
        return None
    return pinned_tags(config)[canary.image_tag].ref


def revision_summary(config: StackConfig, canary: CanaryConfig) -> str:
    """What the canary changes, e.g. `model.revision main -> abc123, image tag v1 -> v2`."""
    changes = []
    if canary.model_revision is not None and canary.model_revision != config.model.revision:
        changes.append(f"model.revision {config.model.revision} -> {canary.model_revision}")
    if canary.image_tag is not None:
        stable = "built" if config.images.build else versions().image(engine_image_key(config)).tag
        if canary.image_tag != stable:
            changes.append(f"image tag {stable} -> {canary.image_tag}")
    return ", ".join(changes) or "the stable revision (nothing changed)"
