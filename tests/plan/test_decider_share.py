"""The prefill the rendered P/D decider leaves on decode (router.pdDecider prefix): the share of
turns whose uncached suffix is under the threshold, charged to the decode ranks, and taken off
the prefill pool."""

import copy
import math
import random
from typing import Any

import pytest

from llmd_fleet.cli.plan_sections import throughput_section
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.throughput import local_prefill, plan_throughput
from llmd_fleet.stack.parse import parse_config
from tests.support import stack_raw_config


def _prefix(threshold: int) -> dict[str, Any]:
    raw = copy.deepcopy(stack_raw_config())
    raw.setdefault("router", {}).update(pdDecider="prefix", nonCachedTokensForRemotePrefill=threshold)
    return raw


def _figures(raw: dict[str, Any], cache_hit: float = 0.9) -> Any:
    config = parse_config(raw)
    f = plan_throughput(config, plan_fleet(config), cache_hit=cache_hit)
    assert f is not None
    return f


def test_the_always_decider_leaves_nothing_to_decode() -> None:
    f = _figures(copy.deepcopy(stack_raw_config()))
    assert f.turn.local_share == 0 and f.throughput.local_prefill_s_per_output == 0
    assert "leaves on decode" not in throughput_section(
        parse_config(stack_raw_config()), plan_fleet(parse_config(stack_raw_config()))
    )


def test_a_threshold_at_the_median_uncached_suffix_leaves_half_the_turns() -> None:
    w = stack_raw_config().get("workload", {})
    p50 = w.get("inputTokensP50", 195_000)
    share, tokens = local_prefill(p50, w.get("inputTokensP90", 521_000), 0.9, round(p50 * 0.1))
    assert share == pytest.approx(0.5, abs=1e-3)
    assert 0 < tokens < 0.5 * p50 * 0.1  # half the turns, each under the threshold


def test_the_partial_mean_matches_sampled_turns() -> None:
    p50, p90, hit, threshold = 8_000, 16_000, 0.5, 3_000
    sigma = math.log(p90 / p50) / 1.2816
    rng = random.Random(45)
    suffixes = [math.exp(rng.gauss(math.log(p50), sigma)) * (1 - hit) for _ in range(200_000)]
    local = [x for x in suffixes if x < threshold]
    share, tokens = local_prefill(p50, p90, hit, threshold)
    assert share == pytest.approx(len(local) / len(suffixes), abs=0.01)
    assert tokens == pytest.approx(sum(local) / len(suffixes), rel=0.03)


def test_the_decider_share_is_charged_to_decode_and_taken_off_prefill() -> None:
    always = _figures(copy.deepcopy(stack_raw_config()))
    prefix = _figures(_prefix(19_500))  # the median uncached suffix at 90% hits
    assert 0.45 < prefix.turn.local_share < 0.55
    ceilings, before = dict(prefix.throughput.ceilings), dict(always.throughput.ceilings)
    assert ceilings["decode"] < before["decode"]
    assert ceilings["prefill"] == pytest.approx(before["prefill"] / (1 - prefix.turn.local_share))
    # the JSON's per-node decode figure stays pure decode
    assert prefix.throughput.decode.tokens_per_s == pytest.approx(always.throughput.decode.tokens_per_s)


def test_the_plan_prints_the_share() -> None:
    config = parse_config(_prefix(19_500))
    text = throughput_section(config, plan_fleet(config))
    assert "prefill the P/D decider leaves on decode" in text
    assert "(uncached suffix under 19500 tokens)" in text
