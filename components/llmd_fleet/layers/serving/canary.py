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

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.serving.config import CanaryConfig
from llmd_fleet.targets.specs import fabric_for
from llmd_fleet.versions import Image, versions

CANARY_SUFFIX = "-canary"
# ServingConfig.name's own bound: pod names derived from the DisaggregatedSet name stay within
# Kubernetes' limits (docs/twin.md, `<name>-<slice>-<revision:8>-prefill-prv`).
MAX_SERVING_NAME = 24
# Gateway implementations whose handling of weighted InferencePool backendRefs was read in their
# pinned source: agentgateway v1.2.1 copies each backendRef's `weight` into the route backend
# whatever its kind (controller/pkg/agentgateway/translator/conversion.go buildAgwDestination,
# the InferencePool resolved through ctx.References.RouteBackend) and the proxy picks a route
# backend with `choose_weighted` over those weights (crates/agentgateway/src/proxy/httpproxy.rs
# select_backend). Istio 1.29.2 and GKE's managed gateway are not verified here: refused.
WEIGHTED_POOL_IMPLEMENTATIONS = frozenset({"agentgateway"})


def canary_name(config: StackConfig) -> str:
    """The canary's serving name: its DisaggregatedSet, InferencePool and object name prefix."""
    return f"{config.serving.name}{CANARY_SUFFIX}"


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
            "name": canary_name(config),
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


def engine_image_key(config: StackConfig) -> str:
    """The `[images.*]` entry of images/versions.toml the engine runs without an image build: the
    simulator's, or the one the target's fabric names (program.py `_engine_image`)."""
    if config.serving.engine == "simulator":
        return "inference-sim"
    return fabric_for(config.target.kind, config.images.build).image


def pinned_tags(config: StackConfig) -> dict[str, Image]:
    """Tag -> pinned image, of every `[images.*]` entry with the engine image's repository."""
    repository = versions().image(engine_image_key(config)).repository
    return {image.tag: image for image in versions().images.values() if image.repository == repository}


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


def canary_problems(config: StackConfig) -> list[Problem]:
    """What a canary cannot be deployed with."""
    canary = config.serving.canary
    if canary is None:
        return []
    path = key(config, "serving", "canary")
    problems = []
    if len(canary_name(config)) > MAX_SERVING_NAME:
        problems.append(
            Problem(
                path,
                f"needs serving.name of at most {MAX_SERVING_NAME - len(CANARY_SUFFIX)} characters: "
                f"the canary's DisaggregatedSet is <name>{CANARY_SUFFIX}, at most {MAX_SERVING_NAME} "
                f"(got {len(config.serving.name)})",
            )
        )
    implementation = config.gateway.implementation
    if implementation not in WEIGHTED_POOL_IMPLEMENTATIONS:
        problems.append(
            Problem(
                path,
                f"needs gateway.implementation agentgateway (got {implementation}): weighted "
                "InferencePool backendRefs are verified in the pinned agentgateway only "
                "(docs/day-two.md)",
            )
        )
    if canary.image_tag is not None:
        if config.images.build:
            problems.append(
                Problem(
                    path.at("image_tag"),
                    "needs images.build false: a built image has the one tag of its build; "
                    "canary a new build by pinning it as a version",
                )
            )
        elif canary.image_tag not in (tags := pinned_tags(config)):
            repository = versions().image(engine_image_key(config)).repository
            problems.append(
                Problem(
                    path.at("image_tag"),
                    f"must be a tag of {repository} pinned in images/versions.toml (every image a "
                    f"stack runs is pinned there; allowed: {', '.join(sorted(tags))}; got "
                    f"{canary.image_tag!r})",
                )
            )
    if config.serving.weight_loading == "modelexpress":
        problems.append(
            Problem(
                path,
                "needs serving.weightLoading hub: a canary beside a ModelExpress server is not "
                "supported (its pods would look for a server of their own)",
            )
        )
    return problems
