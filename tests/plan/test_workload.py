"""The declared workload against the plan (plan/workload.py): context window, decode contexts,
CPU tier and router memory."""

import copy
import math

import pytest

from llmd_fleet.config.workload import Percentile, WorkloadConfig
from llmd_fleet.layers.router.config import RouterConfig
from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.plan.throughput import plan_throughput
from llmd_fleet.plan.workload import plan_workload, refused_share, workload_problems
from llmd_fleet.stack.parse import parse_config


def _plan(raw):
    config = parse_config(raw)
    return config, plan_fleet(config)


def test_defaults_are_the_published_trace():
    w = WorkloadConfig()
    assert (w.agents, w.input_tokens_p50, w.input_tokens_p90, w.input_tokens_p99) == (
        3000,
        195_000,
        521_000,
        849_000,
    )
    assert (w.output_tokens, w.growth_tokens_per_turn, w.prefix_reuse) == (317, 632, 0.996)
    # 7,612 req/min at 2,500 agents (the 544 x H100 run).
    assert w.requests_per_agent_minute == pytest.approx(7612 / 2500, rel=1e-3)
    assert RouterConfig().expected_requests_per_second == pytest.approx(7612 / 60, abs=0.5)


def test_reference_stack_declares_the_refused_percentile(raw_config):
    config, plan = _plan(raw_config)
    wp = plan_workload(config, plan)
    assert wp is not None
    assert wp.served_window == 202_752
    assert wp.first_refused == "p90" == config.workload.refused_percentile
    # Just above the median: about half the turns are refused (issue #31).
    assert 0.45 < wp.refused_share < 0.5


def test_reference_decode_contexts_follow_littles_law(raw_config):
    config, plan = _plan(raw_config)
    wp = plan_workload(config, plan)
    assert wp is not None
    f = plan_throughput(config, plan)
    assert f is not None
    decode_s = 317 / f.throughput.decode_tokens_per_step * f.throughput.decode_step_s
    assert wp.decode_seconds == pytest.approx(decode_s)
    assert wp.decode_contexts_needed == pytest.approx(3000 * decode_s / (decode_s + 2.0))
    # issue #31: ~1,500 needed at the benchmark's tool gap.
    assert wp.decode_contexts_needed == pytest.approx(1500, rel=0.05)
    decode = plan.role("decode")
    held = decode.instances * decode.data_parallel * decode.memory.kv_tokens / (195_000 + 317)
    assert wp.decode_contexts_held == pytest.approx(held)
    assert 700 < held < 1050
    # The CPU tier holds every agent's context, so the plan warns instead of refusing.
    assert wp.cpu_tier_tokens_needed == 3000 * 195_317 <= wp.cpu_tier_tokens_held
    refusals, warnings = workload_problems(config, plan)
    assert refusals == []
    assert any("1,485 concurrent decode contexts" in w and "session affinity" in w for w in warnings)


def test_a_window_below_p90_without_a_declaration_is_refused(raw_config):
    raw = copy.deepcopy(raw_config)
    raw.pop("workload", None)
    with pytest.raises(PlanError, match=r"workload\.refusedPercentile.*declared p90.*48% of turns"):
        plan_fleet(parse_config(raw))


def test_a_declared_percentile_the_window_serves_is_refused(raw_config):
    raw = copy.deepcopy(raw_config)
    raw["workload"] = {
        "refusedPercentile": "p90",
        "inputTokensP50": 20_000,
        "inputTokensP90": 60_000,
        "inputTokensP99": 150_000,
    }
    with pytest.raises(PlanError, match=r"refusedPercentile: is p90 but the served window 202,752 covers"):
        plan_fleet(parse_config(raw))
    del raw["workload"]["refusedPercentile"]
    config, plan = _plan(raw)
    assert workload_problems(config, plan)[0] == []


def test_decode_overflow_without_a_cpu_tier_is_refused(raw_config):
    raw = copy.deepcopy(raw_config)
    raw["serving"]["kvTier"] = {"cpuOffload": False, "peerToPeer": False}
    with pytest.raises(PlanError, match=r"workload\.agents: 3,000 agents need 1,485 .*preempted"):
        plan_fleet(parse_config(raw))
    raw["workload"]["agents"] = 1000
    config, plan = _plan(raw)
    refusals, warnings = workload_problems(config, plan)
    assert refusals == []
    # and the modelled capacity (1.58M tok/min) covers the declared 0.97M tok/min: no warning
    assert warnings == []


def test_a_cpu_tier_too_small_for_the_agents_is_refused(raw_config):
    raw = copy.deepcopy(raw_config)
    raw["workload"]["agents"] = 6000
    with pytest.raises(PlanError, match=r"hostMemoryFraction: the decode ranks' CPU tier holds"):
        plan_fleet(parse_config(raw))


def test_router_memory_must_cover_the_workload_rate(raw_config):
    raw = copy.deepcopy(raw_config)
    raw.setdefault("router", {})["expectedRequestsPerSecond"] = 60
    with pytest.raises(PlanError, match=r"router\.expectedRequestsPerSecond: 60 req/s sizes the EPP"):
        plan_fleet(parse_config(raw))
    raw["workload"]["agents"] = 1000
    config, plan = _plan(raw)
    wp = plan_workload(config, plan)
    assert wp is not None and wp.requests_per_second == pytest.approx(1000 * 3.045 / 60)


def test_refused_share_interpolates_in_log_tokens():
    pct: tuple[tuple[Percentile, int], ...] = (("p50", 100), ("p90", 1000), ("p99", 10_000))
    assert refused_share(50, 0, pct) == pytest.approx(0.5)
    assert refused_share(100 * math.sqrt(10), 0, pct) == pytest.approx(0.3)
    assert refused_share(20_000, 0, pct) == pytest.approx(0.01)


def test_the_simulator_is_not_sized_against_the_workload():
    from tests.support import stack_raw_config

    config, plan = _plan(stack_raw_config("local-sim"))
    assert plan_workload(config, plan) is None
