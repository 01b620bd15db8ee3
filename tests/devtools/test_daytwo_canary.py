"""The day-two replay's canary (docs/day-two.md, "Canary under traffic"): the stack file with
`serving.canary`, what rolling it back deletes, and the canary's figures, line and goals. The
replay itself is `make day-two`."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.daytwo import canary_phase, figures
from devtools.daytwo.kubelet import Endpoint
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.plan.fleet import plan_fleet
from tests.support import STACKS_DIR

ENDPOINTS = {
    "10.244.0.10": Endpoint("glm52-p", "prefill", "stable1"),
    "10.244.0.11": Endpoint("glm52-d", "decode", "stable1"),
    "10.244.0.30": Endpoint("glm52-canary-p", "prefill", "canary1"),
    "10.244.0.31": Endpoint("glm52-canary-d", "decode", "canary1"),
}


def _served(start_ms: float, decode: str, pool: str, outcome: str = "served") -> dict[str, Any]:
    return {
        "outcome": outcome,
        "start_ms": start_ms,
        "destination": f"{decode}:8000",
        "prefill": "",
        "pool": pool,
        "pick_ms": 1.0,
        "total_ms": 500.0,
    }


def _window(by_canary: int, total: int) -> list[dict[str, Any]]:
    return [
        _served(float(i), "10.244.0.31", "glm52-canary")
        if i < by_canary
        else _served(float(i), "10.244.0.11", "glm52")
        for i in range(total)
    ]


def test_the_canary_stack_file_adds_serving_canary_and_changes_nothing_else(tmp_path: Path) -> None:
    text = (STACKS_DIR / "Pulumi.day-two.yaml").read_text()
    changed = yaml.safe_load(canary_phase.canary_variant(text, 20))
    assert changed["config"]["llmd-fleet:serving"].pop("canary") == {
        "weight": 20,
        "modelRevision": canary_phase.CANARY_REVISION,
        "instances": {"prefill": 1, "decode": 1},
    }
    assert changed == yaml.safe_load(text)
    # The day-two stack has the canary's nodes to spare: the plan accepts it, with the weight.
    (tmp_path / "Pulumi.day-two.yaml").write_text(canary_phase.canary_variant(text, 20))
    plan = plan_fleet(stack_config(read_stack_file(tmp_path, "day-two")))
    assert plan.canary is not None and plan.canary.weight == 20


def test_a_rollback_deletes_what_the_rendering_without_the_canary_no_longer_has() -> None:
    def obj(kind: str, name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "llm-d"}}

    stable = [obj("Service", "glm52-epp"), obj("ConfigMap", "glm52-epp")]
    with_canary = [
        stable[0],
        obj("Service", "glm52-canary-epp"),
        stable[1],
        obj("ConfigMap", "glm52-canary-epp"),
    ]
    assert canary_phase.pruned(with_canary, stable) == [with_canary[1], with_canary[3]]
    assert canary_phase.pruned(stable, stable) == []


def test_the_canary_line_and_figures() -> None:
    shifted = _window(81, 400)
    shifted.append(_served(500.0, "10.244.0.31", "glm52-canary", "failed"))
    rollback = [_served(0.0, "10.244.0.11", "glm52"), _served(1.0, "10.244.0.11", "glm52", "unrouted")]
    c = figures.canary("day-two", 20, "canary1", "stable1", "glm52-canary", shifted, rollback, ENDPOINTS)
    assert (c.requests, c.by_canary, c.failed, c.crossed, c.unknown) == (400, 81, 1, 0, 0)
    assert (c.rollback_failed, c.rollback_requests) == (1, 2)
    assert figures.canary_line(c) == (
        "canary: day-two 20% to revision canary1: 20.2% of requests served by canary1; "
        "rollback: 1 failed of 2"
    )
    assert figures.canary_detail(c, 61.04, 33.96) == (
        "day-two: canary: 81 of 400 requests served by canary1 (stable stable1), tolerance +-8.0 points "
        "(4 standard deviations); 1 failed while shifted; canary Ready in 61.0 s, gone 34.0 s after the "
        "rollback began; 0 stable pods replaced"
    )
    assert figures.canary_failures(c) == [
        "canary: 1 requests failed while the canary had its weight",
        "canary: 1 of 2 requests failed during the rollback",
    ]


def test_the_tolerance_is_four_standard_deviations_of_the_binomial() -> None:
    # sqrt(0.2 x 0.8 / 400) = 0.02; four of them: 8 points.
    assert figures.canary_tolerance(20, 400) == pytest.approx(0.08)
    assert figures.canary_tolerance(50, 100) == pytest.approx(0.2)
    assert figures.canary_tolerance(0, 400) == 0.0 and figures.canary_tolerance(100, 400) == 0.0

    def problems(by_canary: int, total: int, weight: int = 20) -> list[str]:
        c = figures.canary(
            "s", weight, "canary1", "stable1", "glm52-canary", _window(by_canary, total), [], ENDPOINTS
        )
        return figures.canary_failures(c)

    assert problems(111, 400) == []  # 27.75%: 7.75 points off, inside 8
    assert problems(49, 400) == []  # 12.25%
    assert problems(113, 400) == [
        "canary: 28.2% of 400 requests served by canary1, more than 8.0 points (4 standard deviations) "
        "from the route's 20%"
    ]
    assert problems(47, 400) != []
    # Weight 0 is never: one request to the canary fails the run.
    assert problems(0, 400, weight=0) == [] and problems(1, 400, weight=0) != []
    assert problems(0, 0) == ["canary: no request was served while the canary had its weight"]


def test_a_request_served_by_the_other_pools_revision_or_an_unknown_address_fails() -> None:
    shifted = [
        _served(0.0, "10.244.0.11", "glm52-canary"),  # the canary's pool, a stable pod
        _served(1.0, "10.244.0.31", "glm52"),  # the stable pool, a canary pod
        _served(2.0, "10.244.0.99", "glm52"),  # no pod had it
        _served(3.0, "10.244.0.31", "glm52-canary"),
    ]
    c = figures.canary("s", 50, "canary1", "stable1", "glm52-canary", shifted, [], ENDPOINTS)
    assert (c.crossed, c.unknown, c.by_canary) == (2, 1, 2)
    found = figures.canary_failures(c)
    assert "canary: 2 requests were served by the other pool's revision" in found
    assert "canary: 1 requests served by an address no pod had" in found
    same = figures.canary("s", 50, "stable1", "stable1", "glm52-canary", shifted[3:], [], ENDPOINTS)
    assert "canary: the canary's revision stable1 is the stable one's" in figures.canary_failures(same)


def test_the_rollback_counts_every_request_running_in_its_window() -> None:
    results = [
        {"start_ms": 100.0, "pick_ms": 1.0, "total_ms": 50.0},  # done before
        {"start_ms": 900.0, "pick_ms": 1.0, "total_ms": 500.0},  # still running at 1000
        {"start_ms": 1500.0, "pick_ms": 1.0, "total_ms": 10.0},  # started inside
        {"start_ms": 2500.0, "pick_ms": 1.0, "total_ms": 10.0},  # after
    ]
    assert figures.in_flight(results, 1000.0, 2000.0) == results[1:3]


def test_a_stable_pod_replaced_while_the_canary_came_and_went_fails() -> None:
    def run(after: set[str]) -> figures.Canary:
        window = _window(80, 400)
        return figures.canary(
            "s", 20, "canary1", "stable1", "glm52-canary", window, [], ENDPOINTS, {"u1", "u2"}, after
        )

    assert run({"u1", "u2"}).stable_replaced == 0 and figures.canary_failures(run({"u1", "u2"})) == []
    replaced = run({"u1", "u3"})
    assert replaced.stable_replaced == 1
    assert figures.canary_failures(replaced) == [
        "canary: 1 stable pods were replaced while the canary came and went"
    ]
