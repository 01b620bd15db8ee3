"""The router's rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Problem, key

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


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
    if router.pd_decider == "always" and router.non_cached_tokens_for_remote_prefill is not None:
        problems.append(
            Problem(
                key(config, "router", "non_cached_tokens_for_remote_prefill"),
                "applies only with pdDecider prefix (pdDecider always sends every request to a "
                "prefill instance); remove it or set pdDecider prefix",
            )
        )
    problems += _decode_budget_problems(config)
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


def _decode_budget_problems(config: StackConfig) -> list[Problem]:
    """An explicit decode token budget must hold a full decode step and the prompt remainder the
    prefix P/D decider leaves to decode, or DeepEP's low-latency buffers (sized from the budget)
    and the decode step disagree with the requests the router sends."""
    decode = config.serving.roles.decode
    threshold = config.router.remote_prefill_threshold()
    if threshold is None or decode.max_num_batched_tokens is None or decode.max_num_seqs is None:
        return []
    needed = decode.max_num_seqs * (1 + decode.mtp_tokens) + threshold - 1
    if decode.max_num_batched_tokens >= needed:
        return []
    return [
        Problem(
            key(config, "serving", "roles", "decode", "max_num_batched_tokens"),
            f"must be at least {needed}: maxNumSeqs {decode.max_num_seqs} x (1 + mtpTokens "
            f"{decode.mtp_tokens}) plus the {threshold - 1} prompt tokens the prefix P/D decider "
            f"(router.nonCachedTokensForRemotePrefill {threshold}) leaves to decode; raise it, "
            "unset it to derive it, or set router.pdDecider always",
        )
    ]
