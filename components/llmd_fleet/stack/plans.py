"""The plan of a stack with several models (`llmd-fleet:models`): the node groups shared out
between the models, then each model planned as a single-model stack on its share. Pure.

Each model's roles take `instances x nodesPerInstance` nodes of their node group; together they
must fit the group's `count`, else the stack is refused naming the node group and every model's
need. A model is then planned (plan/fleet.py plan_fleet) on the nodes the other models leave it,
so its rollout surge room is what is really free, and its problems are named at its entry.
"""

from collections import defaultdict
from dataclasses import dataclass

from llmd_fleet.config.model import client_model_name
from llmd_fleet.core.problems import PROJECT, Problem
from llmd_fleet.models import description_for
from llmd_fleet.plan.epp import epp_cpus_for
from llmd_fleet.plan.fleet import FleetPlan, PlanError, plan_fleet
from llmd_fleet.plan.system_nodes import picker_pairs_problems
from llmd_fleet.stack.model import StackConfig, model_views
from llmd_fleet.stack.models import entry_key


@dataclass(frozen=True)
class ModelPlan:
    """One model's share of the stack and its plan."""

    name: str
    """The model's serving name (`models[i].name`)."""
    client_name: str
    """The name clients send in `model`."""
    adapters: tuple[str, ...]
    """Its LoRA adapters' served names."""
    plan: FleetPlan


def _nodes_by_group(view: StackConfig) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for role in (view.serving.roles.prefill, view.serving.roles.decode):
        used[role.node_group] += role.instances * role.nodes_per_instance
    return dict(used)


def fit_problems(config: StackConfig) -> list[Problem]:
    """Whether the models' roles together fit each node group (only with `llmd-fleet:models`)."""
    views = model_views(config)
    if len(views) < 2:
        return []
    problems = []
    needs = [(view.serving.name, _nodes_by_group(view)) for view in views]
    for group_name, group in sorted(config.fleet.node_groups.items()):
        parts = [(name, used[group_name]) for name, used in needs if used.get(group_name)]
        total = sum(n for _, n in parts)
        if total > group.count:
            short = ", ".join(f"{name} {n}" for name, n in parts)
            missing = total - group.count
            problems.append(
                Problem(
                    f"{PROJECT}:fleet.nodeGroups.{group_name}.count",
                    f"the models need {total} nodes of node group {group_name} ({short}) but it has "
                    f"{group.count}: add {missing} node{'s' if missing > 1 else ''} or "
                    "shrink a model's roles",
                )
            )
    return problems


def plan_models(config: StackConfig) -> tuple[FleetPlan, ...]:
    """One FleetPlan per model, in stack order (the single-model form: its one plan). Raises
    PlanError naming every model and node group that does not fit."""
    return tuple(p.plan for p in plan_model_shares(config))


def adapter_problems(view: StackConfig) -> list[Problem]:
    """LoRA adapters only on a model the plan describes: their HBM is sized from its layer shapes
    (plan/lora.py)."""
    if not view.model.lora_adapters or description_for(view.model.id) is not None:
        return []
    return [
        Problem(
            f"{PROJECT}:model.loraAdapters",
            f"only for a model with a card (components/llmd_fleet/models/): the adapters' HBM is sized from "
            f"its layer shapes (plan/lora.py), and {view.model.id!r} has no description",
        )
    ]


def plan_model_shares(config: StackConfig) -> tuple[ModelPlan, ...]:
    """`plan_models` with each model's names and adapters."""
    views = model_views(config)
    if len(views) == 1 and not config.models:
        view = views[0]
        if problems := adapter_problems(view):
            raise PlanError(problems)
        return (_share(view, plan_fleet(view)),)
    if problems := fit_problems(config):
        raise PlanError(problems)
    needs = [_nodes_by_group(view) for view in views]
    shares: list[ModelPlan] = []
    errors: list[Problem] = []
    for index, view in enumerate(views):
        groups = {
            name: group.model_copy(
                update={"count": group.count - sum(n.get(name, 0) for j, n in enumerate(needs) if j != index)}
            )
            for name, group in view.fleet.node_groups.items()
        }
        own = view.model_copy(update={"fleet": view.fleet.model_copy(update={"node_groups": groups})})
        errors += [Problem(entry_key(index, p.key), p.message) for p in adapter_problems(view)]
        try:
            shares.append(_share(view, plan_fleet(own)))
        except PlanError as exc:
            own_workload = config.models[index].workload is not None
            errors += [
                Problem(entry_key(index, p.key, own_workload), f"model {view.serving.name}: {p.message}")
                for p in exc.problems
            ]
    if errors:
        raise PlanError(errors)
    # Every model's HA picker pair shares the stack's CPU pool (gke, eks).
    pickers = [
        (
            share.name,
            view.router.replicas,
            epp_cpus_for(
                sum(r.max_instances * r.lws_size for r in share.plan.roles),
                view.router.expected_requests_per_second,
            ),
            share.plan.router.memory_gib,
        )
        for share, view in zip(shares, views, strict=True)
    ]
    if problems := picker_pairs_problems(config, pickers):
        raise PlanError(problems)
    return tuple(shares)


def _share(view: StackConfig, plan: FleetPlan) -> ModelPlan:
    return ModelPlan(
        name=view.serving.name,
        client_name=client_model_name(view.model),
        adapters=tuple(a.name for a in view.model.lora_adapters),
        plan=plan,
    )
