"""The `serving` section's cross-field rules: roles against node groups and the model, the KV
tiers, and what the simulator can emulate. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key
from llmd_fleet.layers.serving.config import CANARY_SUFFIX, RoleConfig, canary_name
from llmd_fleet.targets.specs import SPECS, fabric_for
from llmd_fleet.versions import Image, versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# The simulator's data-parallel ranks per process (llm-d-inference-sim v0.10.2
# pkg/common/config.go validate: "data parallel size must be between 1 and 8") and the block
# sizes its prefix cache accepts ("token block size should be one of ... 8, 16, 32, 64, 128").
SIMULATOR_MAX_RANKS = 8
SIMULATOR_BLOCK_SIZES = (8, 16, 32, 64, 128)
# The least `serving.modelLoadMinutes` a vLLM engine may declare: weights from the hub, the
# compile and the CUDA graphs take minutes. Only the simulator, which loads nothing, goes lower.
VLLM_MIN_LOAD_MINUTES = 5


def simulator_problems(config: StackConfig) -> list[Problem]:
    """engine simulator: what the pinned simulator can emulate (llmd_fleet/layers/serving/simulator.py)."""
    serving = config.serving
    problems: list[Problem] = []
    if serving.engine != "simulator":
        if serving.model_load_minutes < VLLM_MIN_LOAD_MINUTES:
            problems.append(
                Problem(
                    key(config, "serving", "model_load_minutes"),
                    f"must be >= {VLLM_MIN_LOAD_MINUTES} with engine {serving.engine} (a model load "
                    "and compile take minutes); only engine simulator may declare less",
                )
            )
        # On kind local the engine itself is refused already (its `TargetSpec.fleet_problems`).
        if "simulator" in serving.model_fields_set and not SPECS[config.target.kind].simulated:
            problems.append(Problem(key(config, "serving", "simulator"), "only for engine simulator"))
        return problems
    if config.router.prefix_routing == "precise":
        problems.append(
            Problem(
                key(config, "router", "prefix_routing"),
                "must be approximate with engine simulator: the simulator dials its ZMQ endpoint "
                "and names itself kv@<pod-ip>@<model> (llm-d-inference-sim "
                "pkg/common/publisher.go, pkg/kv-cache/block_cache.go), while the precise producer "
                "dials every rank and keys blocks by <pod-ip>:<rank port> (llm-d-router "
                "preciseprefixcache/extractor.go), so no event would reach the index",
            )
        )
    if serving.kv_tier.cpu_offload:
        problems.append(
            Problem(
                key(config, "serving", "kv_tier", "cpu_offload"),
                "must be false with engine simulator: the simulator has no CPU KV tier",
            )
        )
    for role_name in ("prefill", "decode"):
        role: RoleConfig = getattr(serving.roles, role_name)
        path = key(config, "serving", "roles", role_name)
        if role.tensor_parallel != 1:
            problems.append(
                Problem(
                    path.at("tensor_parallel"),
                    f"must be 1 with engine simulator: each simulated rank is a whole engine "
                    f"(got {role.tensor_parallel})",
                )
            )
        if role.data_parallel % role.nodes_per_instance:
            problems.append(
                Problem(
                    path.at("data_parallel"),
                    f"must be a multiple of nodesPerInstance ({role.nodes_per_instance}) with engine "
                    f"simulator: every pod of an instance runs the same number of ranks "
                    f"(got {role.data_parallel})",
                )
            )
        elif role.data_parallel // role.nodes_per_instance > SIMULATOR_MAX_RANKS:
            problems.append(
                Problem(
                    path.at("data_parallel"),
                    f"at most {SIMULATOR_MAX_RANKS} ranks per pod with engine simulator "
                    f"(its --data-parallel-size is 1 to 8); got {role.data_parallel} ranks over "
                    f"{role.nodes_per_instance} pods",
                )
            )
        if role.mtp_tokens:
            problems.append(
                Problem(
                    path.at("mtp_tokens"), "must be 0 with engine simulator: it has no speculative decoding"
                )
            )
        if role.redundant_experts is not None:
            problems.append(
                Problem(
                    path.at("redundant_experts"),
                    "must be unset with engine simulator: it has no experts to balance",
                )
            )
        if role.dual_batch_overlap:
            problems.append(
                Problem(
                    path.at("dual_batch_overlap"),
                    "must be false with engine simulator: it runs no all-to-all to overlap",
                )
            )
        if role.block_size not in SIMULATOR_BLOCK_SIZES:
            problems.append(
                Problem(
                    path.at("block_size"),
                    f"must be one of {list(SIMULATOR_BLOCK_SIZES)} with engine simulator "
                    f"(got {role.block_size})",
                )
            )
    return problems


def _redundant_hint(experts: int, expert_parallel: int) -> str:
    """The smallest redundant-expert counts that make `experts` split over the EP ranks."""
    first = -experts % expert_parallel
    return f"allowed: {first}, {first + expert_parallel}, {first + 2 * expert_parallel}, ..."


def role_problems(config: StackConfig) -> list[Problem]:
    """Each role fits its node group and the model; prefill and decode agree on what NIXL moves."""
    problems: list[Problem] = []
    model = config.model
    roles = config.serving.roles
    for role_name in ("prefill", "decode"):
        role: RoleConfig = getattr(roles, role_name)
        path = key(config, "serving", "roles", role_name)
        role_group = config.fleet.node_groups.get(role.node_group)
        if role_group is None:
            allowed = ", ".join(sorted(config.fleet.node_groups))
            problems.append(
                Problem(path.at("node_group"), f"no node group {role.node_group!r} (allowed: {allowed})")
            )
            continue
        group = role_group
        gpus = role.nodes_per_instance * group.gpus_per_node
        # GPU-less nodes (the simulator): ranks are processes, simulator_problems bounds them.
        if group.gpus_per_node and role.tensor_parallel * role.data_parallel != gpus:
            problems.append(
                Problem(
                    path.at("data_parallel"),
                    f"tensorParallel x dataParallel must equal the instance's GPUs "
                    f"({role.nodes_per_instance} nodes x {group.gpus_per_node} = {gpus}); "
                    f"got {role.tensor_parallel} x {role.data_parallel}",
                )
            )
        if group.gpus_per_node and (
            group.gpus_per_node % role.tensor_parallel or group.gpus_per_node // role.tensor_parallel < 2
        ):
            problems.append(
                Problem(
                    path.at("tensor_parallel"),
                    f"must divide the GPUs per node ({group.gpus_per_node}) and leave at least two "
                    "data-parallel ranks per node (vLLM's multi-port load balancing needs "
                    f"--data-parallel-size-local >= 2); got {role.tensor_parallel}",
                )
            )
        if role.expert_parallel != role.tensor_parallel * role.data_parallel:
            problems.append(
                Problem(
                    path.at("expert_parallel"),
                    f"must equal tensorParallel x dataParallel "
                    f"({role.tensor_parallel * role.data_parallel}) because vLLM shards experts "
                    f"over all ranks; got {role.expert_parallel}",
                )
            )
        if role.redundant_experts is not None:
            # vLLM 0.33 FusedMoE (fused_moe/layer.py): with EPLB the physical experts, logical
            # plus redundant, must split evenly over the EP ranks.
            physical = model.experts + role.redundant_experts
            if physical % role.expert_parallel:
                problems.append(
                    Problem(
                        path.at("redundant_experts"),
                        f"the model's {model.experts} experts plus {role.redundant_experts} redundant "
                        f"must divide by expertParallel ({role.expert_parallel}): vLLM's expert-parallel "
                        f"load balancing places the same number of experts on every rank; "
                        f"{_redundant_hint(model.experts, role.expert_parallel)}",
                    )
                )
        elif model.experts % role.expert_parallel:
            problems.append(
                Problem(
                    path.at("expert_parallel"),
                    f"must divide the model's {model.experts} experts; got {role.expert_parallel} "
                    f"(or set redundantExperts: {_redundant_hint(model.experts, role.expert_parallel)})",
                )
            )
        if role.max_model_len > model.max_context_tokens:
            problems.append(
                Problem(
                    path.at("max_model_len"),
                    f"must not exceed model.maxContextTokens ({model.max_context_tokens}); "
                    f"got {role.max_model_len}",
                )
            )
    if roles.prefill.block_size != roles.decode.block_size:
        problems.append(
            Problem(
                key(config, "serving", "roles", "decode", "block_size"),
                f"must equal prefill's ({roles.prefill.block_size}): NIXL moves KV block by block",
            )
        )
    if roles.prefill.mtp_tokens != roles.decode.mtp_tokens:
        problems.append(
            Problem(
                key(config, "serving", "roles", "decode", "mtp_tokens"),
                f"must equal prefill's ({roles.prefill.mtp_tokens}): the MTP draft layer's KV "
                "is part of what prefill hands to decode",
            )
        )
    if roles.prefill.max_model_len != roles.decode.max_model_len:
        problems.append(
            Problem(
                key(config, "serving", "roles", "decode", "max_model_len"),
                f"must equal prefill's ({roles.prefill.max_model_len}): a request prefilled on "
                "one role must fit the other",
            )
        )
    return problems


def kv_tier_problems(config: StackConfig) -> list[Problem]:
    """KV tiers below HBM build on the CPU tier."""
    problems: list[Problem] = []
    tier = config.serving.kv_tier
    if tier.peer_to_peer and not tier.cpu_offload:
        problems.append(
            Problem(
                key(config, "serving", "kv_tier", "peer_to_peer"),
                "needs cpuOffload: peers pull blocks from the CPU tier of the worker that holds them",
            )
        )
    if tier.secondary is not None and not tier.cpu_offload:
        problems.append(
            Problem(
                key(config, "serving", "kv_tier", "secondary"),
                "needs cpuOffload: blocks reach it through the CPU tier",
            )
        )
    secondary = tier.secondary
    if (
        secondary is not None
        and secondary.type == "local-nvme"
        and not secondary.path.startswith(secondary.host_root.rstrip("/") + "/")
    ):
        problems.append(
            Problem(
                key(config, "serving", "kv_tier", "secondary", "path"),
                f"must be a dedicated directory below hostRoot ({secondary.host_root}), e.g. "
                f"{secondary.host_root}/kv-cache: a pod mounts nothing else of the node",
            )
        )
    if tier.secondary is not None and tier.secondary.type == "pvc" and not tier.secondary.storage_class:
        problems.append(
            Problem(
                key(config, "serving", "kv_tier", "secondary", "storage_class"), "required when type is pvc"
            )
        )
    return problems


# --- The canary (serving.canary, layers/serving/canary.py, docs/day-two.md).

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


def canary_problems(config: StackConfig) -> list[Problem]:
    """What a canary cannot be deployed with."""
    canary = config.serving.canary
    if canary is None:
        return []
    path = key(config, "serving", "canary")
    problems = []
    if len(canary_name(config.serving)) > MAX_SERVING_NAME:
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
