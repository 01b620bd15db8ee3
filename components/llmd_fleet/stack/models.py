"""`llmd-fleet:models`: several models behind one gateway, each with its own serving, router and
KV tier, and the per-model views every layer renders from. Pure.

A stack sets either the single-model sections (`llmd-fleet:model`, `llmd-fleet:serving`,
`llmd-fleet:router`) or `llmd-fleet:models`, a list of entries that each carry those three sections
under a `name`. The entry's `name` is the model's serving name: its DisaggregatedSet,
InferencePool, endpoint picker and the prefix of every object of that model. Every entry serves
in the same namespace (the Gateway routes to pools in its own namespace).

`model_views(config)` gives one StackConfig per model, each exactly the shape of a single-model
stack: the layers render a model from its view unchanged, which keeps the single-model output
byte-identical (its view is the config itself).
"""

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import DNS_LABEL, Pattern
from llmd_fleet.config.model import (
    DIRECT_RESPONSE_MAX_BYTES,
    ModelConfig,
    client_model_name,
    model_list,
    model_list_body,
)
from llmd_fleet.config.workload import WorkloadConfig
from llmd_fleet.core.problems import PROJECT, Problem, key
from llmd_fleet.layers.router.config import RouterConfig
from llmd_fleet.layers.serving.config import ServingConfig

# The sections a `models` entry carries, which the single-model form sets at the top level.
if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

MODEL_SECTIONS = ("model", "serving", "router")
MAX_MODELS = 8


class ModelEntryConfig(ConfigModel):
    """One model of `llmd-fleet:models`: its name and the single-model sections."""

    name: Annotated[str, Pattern(DNS_LABEL), Field(max_length=24)]
    """The model's serving name: its DisaggregatedSet, InferencePool, endpoint picker and object
    prefix (what `serving.name` is in the single-model form; `serving.name` is not set here)."""
    model: ModelConfig
    """The served model, as `llmd-fleet:model`."""
    serving: ServingConfig
    """Its roles and KV tier, as `llmd-fleet:serving`; every entry's `namespace` must be the same."""
    router: RouterConfig = Field(default_factory=RouterConfig)
    """Its endpoint picker pair, priority bands and flow control, as `llmd-fleet:router`."""
    workload: WorkloadConfig | None = None
    """The traffic this model is sized for, as `llmd-fleet:workload` (unset: the stack's): a
    sub-agent model sees shorter turns than the main model."""


ModelsConfig = Annotated[list[ModelEntryConfig], Field(min_length=1, max_length=MAX_MODELS)]
"""`llmd-fleet:models`: 1 to 8 entries, in the order the plan and the status list them."""


def entry_key(index: int, problem_key: str, own_workload: bool = False) -> str:
    """A problem found on a model's view, named at its key in the `models` list:
    `llmd-fleet:serving.roles.decode.instances` -> `llmd-fleet:models[1].serving.roles...`;
    `serving.name` is the entry's `name`; `workload` is the entry's when it sets its own."""
    for section in (*MODEL_SECTIONS, *(("workload",) if own_workload else ())):
        head = f"{PROJECT}:{section}"
        if problem_key == head or problem_key.startswith((f"{head}.", f"{head}[")):
            if section == "serving" and problem_key == f"{head}.name":
                return f"{PROJECT}:models[{index}].name"
            return f"{PROJECT}:models[{index}].{problem_key[len(PROJECT) + 1 :]}"
    return problem_key


def entry_problems(entries: list[ModelEntryConfig], raw_entries: list[object]) -> list[Problem]:
    """What no single entry can be wrong about on its own: names, served names and adapters
    unique across the stack, one namespace, `serving.name` left to the entry's `name`."""
    problems: list[Problem] = []
    seen_names: dict[str, int] = {}
    served: dict[str, str] = {}
    namespace = entries[0].serving.namespace
    for index, entry in enumerate(entries):
        at = f"{PROJECT}:models[{index}]"
        if entry.name in seen_names:
            problems.append(
                Problem(f"{at}.name", f"{entry.name!r} is already models[{seen_names[entry.name]}].name")
            )
        seen_names.setdefault(entry.name, index)
        raw = raw_entries[index]
        raw_serving = raw.get("serving") if isinstance(raw, dict) else None
        if isinstance(raw_serving, dict) and "name" in raw_serving:
            problems.append(
                Problem(
                    f"{at}.serving.name", f"not set in a models entry: models[{index}].name names the model"
                )
            )
        if entry.serving.namespace != namespace:
            problems.append(
                Problem(
                    f"{at}.serving.namespace",
                    f"must be models[0]'s namespace {namespace!r}: the Gateway routes to pools in its "
                    f"own namespace (got {entry.serving.namespace!r})",
                )
            )
        names = [(f"{at}.model.servedName", client_model_name(entry.model))] + [
            (f"{at}.model.loraAdapters[{i}].name", adapter.name)
            for i, adapter in enumerate(entry.model.lora_adapters)
        ]
        for where, name in names:
            if name in served:
                problems.append(
                    Problem(
                        where, f"{name!r} is already served as {served[name]}: each name routes to one pool"
                    )
                )
            served.setdefault(name, where)
    return problems


# vLLM 0.33 runs LoRA on an expert-parallel MoE layer only with this all-to-all
# (vllm/lora/layers/fused_moe.py FusedMoEWithLoRA._ep_check).
LORA_EP_ALL2ALL = "allgather_reducescatter"


def lora_problems(config: "StackConfig") -> list[Problem]:
    """A model with LoRA adapters: every expert-parallel role (all of them here: the engines run
    with --enable-expert-parallel) names the all-to-all vLLM 0.33 accepts for MoE LoRA."""
    if not config.model.lora_adapters:
        return []
    problems = []
    for role_name in ("prefill", "decode"):
        role = getattr(config.serving.roles, role_name)
        if role.expert_parallel > 1 and role.all2all_backend != LORA_EP_ALL2ALL:
            problems.append(
                Problem(
                    key(config, "serving", "roles", role_name, "all2all_backend"),
                    f"must be {LORA_EP_ALL2ALL} with model.loraAdapters on an expert-parallel role: "
                    "vLLM 0.33 runs MoE LoRA only with that all-to-all (vllm/lora/layers/fused_moe.py) "
                    f"(got {role.all2all_backend or 'the role default, DeepEP'})",
                )
            )
    return problems


def shared_problems(config: "StackConfig") -> list[Problem]:
    """What several models in one namespace cannot share yet (with `llmd-fleet:models`): one KEDA,
    one Prometheus install and one ModelExpress server per stack, and a route per model that only
    an in-cluster gateway calls the body-based router for; and a model list (every served name
    and adapter, which the gateway sends for `GET /v1/models`) that fits a direct response."""
    if not config.models:
        return []
    problems = []
    if config.observability.prometheus == "install":
        problems.append(
            Problem(
                f"{PROJECT}:observability.prometheus",
                f"must not be install with {PROJECT}:models (use existing or none; got 'install')",
            )
        )
    served = tuple(entry.model for entry in config.models)
    size = len(model_list_body(served).encode())
    if size > DIRECT_RESPONSE_MAX_BYTES:
        names = len(model_list(served)["data"])
        problems.append(
            Problem(
                f"{PROJECT}:models",
                f"its {names} served names and adapters make a {size}-byte model list; the gateway "
                f"answers GET /v1/models with at most {DIRECT_RESPONSE_MAX_BYTES} bytes (agentgateway's "
                "directResponse body): serve fewer adapters or shorter names",
            )
        )
    if config.gateway.implementation != "agentgateway":
        problems.append(
            Problem(
                f"{PROJECT}:gateway.implementation",
                f"must be agentgateway with {PROJECT}:models: its pre-routing ext_proc policy is what "
                f"calls the body-based router (got {config.gateway.implementation!r})",
            )
        )
    for index, entry in enumerate(config.models):
        if entry.serving.autoscaling is not None:
            problems.append(
                Problem(
                    f"{PROJECT}:models[{index}].serving.autoscaling",
                    "not yet with several models: leave it out",
                )
            )
        if entry.serving.canary is not None:
            # The canary weighs two pools on the one HTTPRoute of a single-model stack; with
            # several models each model's route matches the body-based router's header instead.
            problems.append(
                Problem(
                    f"{PROJECT}:models[{index}].serving.canary",
                    "not yet with several models: leave it out (a canary is a single-model stack's)",
                )
            )
        if entry.serving.weight_loading != "hub":
            problems.append(
                Problem(
                    f"{PROJECT}:models[{index}].serving.weightLoading",
                    f"must be hub with several models (got {entry.serving.weight_loading!r})",
                )
            )
    return problems
