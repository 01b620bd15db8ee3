"""The router's rules. Pure."""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import Problem, key


def router_problems(config: StackConfig) -> list[Problem]:
    """Router modes that hold fleet-wide, distinct priority classes."""
    problems: list[Problem] = []
    router = config.router
    if router.mode == "active-active" and router.prefix_routing != "precise":
        problems.append(
            Problem(
                key(config, "router", "mode"),
                "active-active needs prefixRouting precise: with approximate prefix routing each "
                "replica guesses cache contents from the traffic it saw, so replicas disagree "
                "(llm-d-router #1290); use active-passive",
            )
        )
    if router.mode == "active-active" and router.flow_control:
        problems.append(
            Problem(
                key(config, "router", "mode"),
                "active-active keeps a flow-control queue per replica, so priorities and limits "
                "no longer hold fleet-wide; use active-passive or set flowControl false",
            )
        )
    names = [c.name for c in router.priority_classes]
    if len(set(names)) != len(names):
        problems.append(
            Problem(key(config, "router", "priority_classes"), f"names must be unique (got {names})")
        )
    priorities = [c.priority for c in router.priority_classes]
    if router.probabilistic_admission and not any(p < 0 for p in priorities):
        problems.append(
            Problem(
                key(config, "router", "probabilistic_admission"),
                "sheds only negative-priority requests, and no priority class is negative; add a "
                "sheddable class or set probabilisticAdmission false",
            )
        )
    if len(set(priorities)) != len(priorities):
        problems.append(
            Problem(
                key(config, "router", "priority_classes"),
                f"each class needs its own priority (got {priorities})",
            )
        )
    return problems
