"""Hand-entered model figures that contradict the committed model card are refused, naming the
key and the card's value: integers and the weight format exactly, parameter counts within 1%;
workload percentiles out of order are refused (docs/bad-input.md)."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmd_fleet.config.model import WeightDtype
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.models import description_for
from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.plan.memory import card_contradictions, routed_expert_params
from llmd_fleet.stack.parse import parse_config
from tests.support import all_stacks, stack_raw_config

EXACT = {
    "layers": ("layers", "num_hidden_layers"),
    "experts": ("experts", "n_routed_experts"),
    "expertsPerToken": ("experts_per_token", "num_experts_per_tok"),
}


@pytest.fixture(scope="module")
def model():
    return parse_config(stack_raw_config()).model


@pytest.mark.parametrize("stack", all_stacks())
def test_every_shipped_stack_agrees_with_its_card(stack):
    config = parse_config(stack_raw_config(stack))
    description = description_for(config.model.id)
    if description is not None:
        assert card_contradictions(config.model, description) == []


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(sorted(EXACT)), value=st.integers(min_value=1, max_value=4096))
def test_any_other_integer_is_refused_naming_the_key_and_the_card_value(model, key, value):
    field, card_field = EXACT[key]
    description = description_for(model.id)
    assert description is not None
    card = getattr(description, card_field)
    problems = dict(card_contradictions(model.model_copy(update={field: value}), description))
    if value == card:
        assert problems == {}
    else:
        message = problems[f"llmd-fleet:model.{key}"]
        assert message.startswith(f"{value} contradicts GLM-5.2-FP8's model card")
        assert f"{card_field} is {card}; set {key}: {card}" in message


def test_another_weight_format_is_refused(model):
    description = description_for(model.id)
    assert description is not None
    problems = dict(
        card_contradictions(model.model_copy(update={"weight_dtype": WeightDtype.BF16}), description)
    )
    assert "weight_dtype is fp8; set weightDtype: fp8" in problems["llmd-fleet:model.weightDtype"]


@settings(max_examples=200, deadline=None)
@given(share=st.floats(min_value=0.5, max_value=1.5))
def test_routed_expert_params_within_1_percent(model, share):
    description = description_for(model.id)
    assert description is not None
    counted = routed_expert_params(description) / 1e9
    given_b = counted * share
    problems = dict(
        card_contradictions(model.model_copy(update={"routed_expert_params_b": given_b}), description)
    )
    if abs(share - 1) <= 0.0099:
        assert problems == {}
    elif abs(share - 1) > 0.0101:
        assert (
            "more than 1% off the 724.8B routed-expert parameters"
            in problems["llmd-fleet:model.routedExpertParamsB"]
        )


def test_a_contradiction_fails_the_plan(model):
    raw = copy.deepcopy(stack_raw_config())
    raw["model"]["layers"] = 61
    with pytest.raises(PlanError) as caught:
        plan_fleet(parse_config(raw))
    assert "num_hidden_layers is 78; set layers: 78" in dict(caught.value.problems)["llmd-fleet:model.layers"]


@settings(max_examples=100, deadline=None)
@given(p50=st.integers(1, 10**6), p90=st.integers(1, 10**6), p99=st.integers(1, 10**6))
def test_workload_percentiles_out_of_order_are_refused(p50, p90, p99):
    raw = copy.deepcopy(stack_raw_config())
    raw["workload"] = {
        **raw.get("workload", {}),
        "inputTokensP50": p50,
        "inputTokensP90": p90,
        "inputTokensP99": p99,
    }
    try:
        parse_config(raw)
    except ConfigError as error:
        problems = dict(error.problems)
        assert (p50 > p90) == ("llmd-fleet:workload.inputTokensP50" in problems)
        assert (p90 > p99) == ("llmd-fleet:workload.inputTokensP90" in problems)
        if p50 > p90:
            assert problems["llmd-fleet:workload.inputTokensP50"] == (
                f"{p50} is above inputTokensP90 ({p90}): a lower percentile never exceeds a higher one"
            )
        return
    assert p50 <= p90 <= p99
