"""plan/split.py: the P:D split as a computed recommendation, and the throughput model's edges
(dense MLA, no MTP, an all-to-all within one node) that the split table relies on."""

import copy
import json
import math

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.models.deepseek_v2 import DEEPSEEK_V2_LITE_CHAT
from llmd_fleet.models.glm5 import GLM_5_2_FP8
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.memory import kv_bytes_per_token
from llmd_fleet.plan.split import DECODE_KV, plan_splits, splits, stack_best_range
from llmd_fleet.plan.throughput import kv_read_bytes, plan_throughput
from llmd_fleet.plan.workload import DECODE_KV_HEADROOM, plan_workload, workload_problems
from llmd_fleet.stack.parse import parse_config
from tests.support import stack_raw_config


def _plan(raw):
    config = parse_config(raw)
    return config, plan_fleet(config)


def test_splits_fill_the_nodes_with_whole_instances() -> None:
    # 68 nodes, 4 per prefill and 8 per decode instance: every split leaves fewer than 4 spare.
    found = splits(68, 4, 8)
    assert (7, 5) in found and (5, 6) in found and (15, 1) in found
    assert all(p >= 1 and d >= 1 and 68 - 4 * p - 8 * d in range(4) for p, d in found)
    assert (6, 5) not in found  # 4 nodes spare: one more prefill instance fits
    assert splits(3, 4, 8) == []  # not even one instance of each fits


def test_reference_split_figures_follow_the_workload_formulas(raw_config) -> None:
    config, plan = _plan(raw_config)
    sp = plan_splits(config, plan)
    wp = plan_workload(config, plan)
    assert sp is not None and wp is not None
    assert (sp.stack.prefill, sp.stack.decode, sp.nodes) == (7, 5, 68)
    # decode HBM: the workload check's contexts held, per decode instance, through Little's law
    turn = wp.decode_seconds + config.workload.tool_gap_seconds
    per_instance = wp.decode_contexts_held / 5 * DECODE_KV_HEADROOM * turn / wp.decode_seconds
    assert sp.stack.agents_by_decode_kv == pytest.approx(5 * per_instance)
    one_decode = next(s for s in sp.ranked if s.decode == 1)
    assert one_decode.agents_by_decode_kv == pytest.approx(per_instance)
    # agents by output: capacity over each agent's output demand
    w = config.workload
    f = plan_throughput(config, plan)
    assert f is not None
    assert sp.stack.agents_by_throughput == pytest.approx(
        f.output_per_min / (w.requests_per_agent_minute * w.output_tokens)
    )
    assert sp.best.agents == max(s.agents for s in sp.ranked)
    assert sp.stack.agents <= sp.best.agents


def test_more_prefix_hits_move_the_best_split_towards_decode(raw_config) -> None:
    config, plan = _plan(raw_config)
    low, high = plan_splits(config, plan, 0.50), plan_splits(config, plan, 0.99)
    assert low is not None and high is not None
    # at 50% hits the prefill FLOPs bind, at 99% the decode HBM does
    assert low.stack.binds == "prefill FLOPs" and high.stack.binds == DECODE_KV
    assert high.best.decode > low.best.decode and high.best.prefill < low.best.prefill


def test_the_reference_split_is_best_in_a_band_of_hit_rates(raw_config) -> None:
    config, plan = _plan(raw_config)
    band = stack_best_range(config, plan)
    assert band is not None
    lo, hi = band
    assert 0.5 < lo < hi < 0.99
    inside = plan_splits(config, plan, round((lo + hi) / 2, 3))
    outside = plan_splits(config, plan, 0.99)
    assert inside is not None and outside is not None
    assert inside.best.agents == inside.stack.agents
    assert outside.best.agents > outside.stack.agents


def test_roles_on_different_node_groups_get_no_split(raw_config) -> None:
    raw = copy.deepcopy(raw_config)
    groups = raw["fleet"]["nodeGroups"]
    (name,) = groups
    groups["h100b"] = copy.deepcopy(groups[name])
    raw["serving"]["roles"]["decode"]["nodeGroup"] = "h100b"
    raw["serving"].setdefault("preflight", {})["enabled"] = False  # it pairs nodes of one group
    config, plan = _plan(raw)
    assert plan_throughput(config, plan) is not None
    assert plan_splits(config, plan) is None


def test_dense_mla_reads_the_whole_context_and_dsa_the_top_k() -> None:
    dense = kv_bytes_per_token(DEEPSEEK_V2_LITE_CHAT, "auto")
    assert kv_read_bytes(dense, DEEPSEEK_V2_LITE_CHAT, 10_000) == 10_000 * dense.total
    sparse = kv_bytes_per_token(GLM_5_2_FP8, "fp8")
    ctx = 100_000
    expected = (
        ctx * sparse.indexer_per_layer * sparse.indexer_layers
        + 2048 * sparse.mla_per_layer * sparse.mla_layers
    )
    assert kv_read_bytes(sparse, GLM_5_2_FP8, ctx) == expected


def test_quickstart_without_mtp_emits_one_token_per_step_and_has_no_nic_all_to_all() -> None:
    config, plan = _plan(stack_raw_config("quickstart-h100"))
    assert not config.serving.roles.decode.mtp_tokens
    f = plan_throughput(config, plan)
    assert f is not None
    assert f.throughput.decode_tokens_per_step == 1.0
    names = {name for name, _ in f.throughput.ceilings}
    assert not any("all-to-all" in n for n in names)  # EP 8 on one 8-GPU node crosses no NIC
    assert all(math.isfinite(v) for _, v in f.throughput.ceilings)


def test_a_capacity_below_the_declared_demand_is_warned_with_the_number(raw_config) -> None:
    config, plan = _plan(raw_config)
    f = plan_throughput(config, plan)
    assert f is not None and f.headroom < 1
    _, warnings = workload_problems(config, plan)
    (warning,) = [w for w in warnings if "modelled output capacity" in w]
    assert f"about {3000 * f.headroom:,.0f} agents served" in warning
    raw = copy.deepcopy(raw_config)
    raw.setdefault("workload", {})["agents"] = 100
    config, plan = _plan(raw)
    _, warnings = workload_problems(config, plan)
    assert not [w for w in warnings if "modelled output capacity" in w]


@pytest.mark.parametrize("bad", ["1", "-0.1", "1.5", "nan", "inf", "x", "0.97\n"])
def test_cache_hit_outside_its_range_exits_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run(["plan", "onprem-h100", "--cache-hit", bad])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--cache-hit: must be a share from 0 to below 1" in err and "Traceback" not in err


@pytest.mark.parametrize("hit", ["0", "0.5"])
def test_cache_hit_from_zero_is_accepted(hit: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", "onprem-h100", "--json", "--cache-hit", hit]) == 0
    assert json.loads(capsys.readouterr().out)["throughput"]["cacheHit"] == float(hit)


def test_cache_hit_flag_reaches_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", "onprem-h100", "--json", "--cache-hit", "0.97"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out
    doc = json.loads(out)["throughput"]
    assert doc["cacheHit"] == 0.97
    best = doc["splits"][0]
    assert best["agents"] == max(s["agents"] for s in doc["splits"])
    # at 97% the decode HBM binds the 7P:5D split: splits with more decode serve more agents
    (stack,) = [s for s in doc["splits"] if s["stack"]]
    assert (stack["prefill"], stack["decode"]) == (7, 5) and stack["binds"] == "decode HBM contexts"
    assert best["decode"] > stack["decode"]


def test_the_plan_json_gives_each_stage_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", "onprem-h100", "--json", "--cache-hit", "0.97"]) == 0
    doc = json.loads(capsys.readouterr().out)["throughput"]
    roles = doc["roles"]
    prefill, decode = roles["prefill"], roles["decode"]
    assert isinstance(prefill["inputTokensPerSecondPerNode"], float)
    assert isinstance(decode["outputTokensPerSecondPerNode"], float)
    # 8 ranks per node (DP attention, TP 1): per node = 8 x per rank
    assert prefill["inputTokensPerSecondPerNode"] == pytest.approx(
        8 * doc["prefillInputTokensPerSecondPerRank"], rel=1e-4
    )
    assert decode["outputTokensPerSecondPerNode"] == pytest.approx(
        8 * doc["decodeTokensPerSecondPerRank"], rel=1e-4
    )
    limits = {
        "decode HBM",
        "decode compute",
        "decode EP all-to-all",
        "prefill FLOPs",
        "prefill EP all-to-all",
        "KV transfer (NIC)",
    }
    assert prefill["binds"] in limits and decode["binds"] in limits
    assert doc["limit"] in (prefill["binds"], decode["binds"])
