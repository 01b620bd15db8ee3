"""The typed stack configuration: one strict pydantic model per Pulumi config key.

A stack file (stacks/Pulumi.<stack>.yaml) sets these keys under the `llmd-fleet:` namespace:

    llmd-fleet:target    where the fleet runs (TargetConfig)
    llmd-fleet:fleet     the GPU node groups (FleetConfig)
    llmd-fleet:model     the served model and the architecture facts sizing needs (ModelConfig)
    llmd-fleet:serving   namespace, load budget and the prefill/decode roles (ServingConfig)
    llmd-fleet:models    several models behind one gateway, each with the three sections above
                         under a `name` (ModelEntryConfig; llmd_fleet/stack/models.py), in place
                         of `model`, `serving` and `router`
    llmd-fleet:router    endpoint picker mode, prefix routing, flow control (RouterConfig, optional)
    llmd-fleet:gateway   gateway implementation and listener (GatewayConfig, optional)
    llmd-fleet:images    build the wide-EP serving image or run the upstream one (ImagesConfig,
                         optional; llmd_fleet/images/spec.py)
    llmd-fleet:observability  where metrics are scraped from (ObservabilityConfig, optional)
    llmd-fleet:workload  the agentic traffic the stack is sized for (WorkloadConfig, optional;
                         llmd_fleet/config/workload.py)
    llmd-fleet:responses  the Responses API's agentic API and its PostgreSQL (ResponsesConfig,
                         optional; llmd_fleet/layers/responses/config.py)
    llmd-fleet:hfToken   Hugging Face token, only as a Pulumi secret
    llmd-fleet:registryPassword  on-prem image registry password, only as a Pulumi secret
    llmd-fleet:kubeconfig  optional kubeconfig for the on-prem target, only as a Pulumi secret
    llmd-fleet:responsesDbPassword  the response store owner's password, only as a Pulumi secret

Every field is documented where it is declared; defaults live here and nowhere else. Field
names are camelCase in YAML (Pulumi's convention) and snake_case in Python.

Each section's model is its owner's (a layer's `config.py`, a target kind's, the config core's);
which keys there are, which are required and how each is validated on its own are derived from
the registry (llmd_fleet/stack/registry.py), which tests/test_registry.py holds against these
fields. The class stays static so the type checker sees every section. Its field docstrings
reach the component schema (tests/golden/components/schema.json) verbatim, the paths they name
included.
"""

import functools
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, TypeAdapter

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.fleet import FleetConfig
from llmd_fleet.config.model import ModelConfig
from llmd_fleet.config.workload import WorkloadConfig
from llmd_fleet.images.config import ImagesConfig
from llmd_fleet.layers.gateway.config import GatewayConfig
from llmd_fleet.layers.observability.config import ObservabilityConfig
from llmd_fleet.layers.responses.config import ResponsesConfig
from llmd_fleet.layers.router.config import RouterConfig
from llmd_fleet.layers.serving.config import ServingConfig
from llmd_fleet.stack.models import ModelEntryConfig, ModelsConfig
from llmd_fleet.targets.base import TargetBase, TargetSpec
from llmd_fleet.targets.specs import SPECS


def target_union(specs: Mapping[str, TargetSpec]) -> Any:
    """The `target` section's type: the kinds' models (`TargetSpec.config`, in registry order) as
    a union discriminated by `kind`, so an unknown kind is refused with the kinds there are."""
    return Annotated[
        functools.reduce(operator.or_, (spec.config for spec in specs.values())), Field(discriminator="kind")
    ]


if TYPE_CHECKING:
    # The type checker sees what every kind has; a kind's own section is read after narrowing
    # (`isinstance(config.target, GkeTarget)`) in that kind's folder.
    TargetConfig = TargetBase
else:
    TargetConfig = target_union(SPECS)
"""`llmd-fleet:target`: one model per kind (llmd_fleet/targets/<kind>/config.py), chosen by `kind`."""


class StackConfig(ConfigModel):
    """The whole stack configuration: one field per `llmd-fleet:` key, each section checked by its
    own model and across sections by the registry's rules (`parse_config` builds it). Layers, the
    plan and the checks all read this one frozen value, so a setting has a single source, and a
    program of one's own passes the same type a stack file gives."""

    target: TargetConfig
    """`llmd-fleet:target`."""
    fleet: FleetConfig
    """`llmd-fleet:fleet`."""
    model: ModelConfig
    """`llmd-fleet:model`."""
    serving: ServingConfig
    """`llmd-fleet:serving`."""
    router: RouterConfig = Field(default_factory=RouterConfig)
    """`llmd-fleet:router` (optional)."""
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    """`llmd-fleet:gateway` (optional)."""
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    """`llmd-fleet:images` (optional): the serving image (llmd_fleet/images/spec.py)."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """`llmd-fleet:observability` (optional): where metrics are scraped from."""
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    """`llmd-fleet:workload` (optional): the agentic traffic the plan checks the stack against
    (llmd_fleet/plan/workload.py)."""
    responses: ResponsesConfig | None = None
    """`llmd-fleet:responses` (optional; absent: off): the agentic API and its PostgreSQL
    (llmd_fleet/layers/responses/config.py)."""
    models: tuple[ModelEntryConfig, ...] = ()
    """`llmd-fleet:models` (optional; empty: the single-model form). When set, `model`, `serving`
    and `router` above are its first entry's (`serving.name` its `name`), and every layer renders
    each model from its view (llmd_fleet/stack/model.py model_views)."""
    model_scope: str | None = None
    """Not a config key: set on each model's view with `llmd-fleet:models` (its name), so the
    series its monitors scrape carry it as `MODEL_SCOPE_LABEL` and its alerts and dashboards select
    that model's series only, not every series of the shared namespace."""
    has_hf_token: bool = False
    """Whether `llmd-fleet:hfToken` is set (as a secret); the value itself is never held here."""
    has_registry_password: bool = False
    """Whether `llmd-fleet:registryPassword` is set (as a secret)."""
    has_responses_db_password: bool = False
    """Whether `llmd-fleet:responsesDbPassword` is set (as a secret)."""


# `llmd-fleet:models`, a list in place of the single-model sections (llmd_fleet/stack/models.py).
MODELS_KEY = "models"
MODELS_ADAPTER: TypeAdapter[Any] = TypeAdapter(ModelsConfig)
SECRET_KEYS = ("hfToken", "kubeconfig", "registryPassword", "responsesDbPassword")


def model_views(config: StackConfig) -> tuple[StackConfig, ...]:
    """One single-model StackConfig per served model, in stack order: the config itself without
    `llmd-fleet:models`, else each entry's model, serving (named by the entry) and router over the
    shared sections."""
    if not config.models:
        return (config,)
    return tuple(
        config.model_copy(
            update={
                "model": entry.model,
                "serving": entry.serving.model_copy(update={"name": entry.name}),
                "router": entry.router,
                "workload": entry.workload if entry.workload is not None else config.workload,
                "models": (),
                "model_scope": entry.name,
            }
        )
        for entry in config.models
    )
