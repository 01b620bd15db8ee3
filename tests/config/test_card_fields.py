"""For a model with a card (components/llmd_fleet/models/) the stack's architecture keys are
optional and come from the card; given, they must agree with it (tests/plan/test_card_contradictions.py).
A model without a card must give every one, each missing key refused by name (exit 2)."""

import copy
from pathlib import Path

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.config.model import CARD_FIELDS, card_values
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.models import CARDS
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.throughput import plan_throughput
from llmd_fleet.stack.parse import parse_config
from tests.support import STACKS_DIR, all_stacks, stack_raw_config

KEYS = {
    "total_params_b": "totalParamsB",
    "active_params_b": "activeParamsB",
    "routed_expert_params_b": "routedExpertParamsB",
    "layers": "layers",
    "experts": "experts",
    "experts_per_token": "expertsPerToken",
    "weight_dtype": "weightDtype",
    "kv_bytes_per_token": "kvBytesPerToken",
    "max_context_tokens": "maxContextTokens",
}


def _without_card_keys(raw: dict) -> dict:
    raw = copy.deepcopy(raw)
    for key in KEYS.values():
        raw["model"].pop(key, None)
    return raw


def test_the_card_keys_are_the_nine_architecture_keys():
    assert set(CARD_FIELDS) == set(KEYS)


@pytest.mark.parametrize("model_id", sorted(CARDS))
def test_every_card_supplies_every_key(model_id):
    values = card_values(model_id, "fp8")
    assert values is not None and set(values) == set(KEYS)
    assert all(v is not None for v in values.values())


@pytest.mark.parametrize("stack", [s for s in all_stacks() if "model" in stack_raw_config(s)])
def test_a_stack_without_its_architecture_keys_plans_as_with_them(stack):
    given = parse_config(stack_raw_config(stack))
    if given.model.id not in CARDS:
        pytest.skip("no card")
    omitted = parse_config(_without_card_keys(stack_raw_config(stack)))
    # the card's figures, agreeing with the hand-entered ones the plan accepts
    assert omitted.model.layers == given.model.layers
    assert omitted.model.experts == given.model.experts
    assert omitted.model.max_context_tokens == given.model.max_context_tokens
    assert omitted.model.kv_bytes_per_token <= given.model.kv_bytes_per_token
    assert omitted.model.total_params_b == pytest.approx(given.model.total_params_b, rel=0.01)
    a, b = plan_fleet(given), plan_fleet(omitted)
    assert [r.memory for r in a.roles] == [r.memory for r in b.roles]
    assert a.gpus == b.gpus
    ta, tb = plan_throughput(given, a), plan_throughput(omitted, b)
    assert (ta is None) == (tb is None)
    if ta is not None and tb is not None:
        assert ta.output_per_min == tb.output_per_min


def test_a_given_key_wins_over_the_card_and_is_checked_against_it():
    raw = _without_card_keys(stack_raw_config())
    raw["model"]["layers"] = 61
    config = parse_config(raw)
    assert config.model.layers == 61 and config.model.experts == 256
    from llmd_fleet.plan.fleet import PlanError

    with pytest.raises(PlanError) as caught:
        plan_fleet(config)
    assert "num_hidden_layers is 78; set layers: 78" in dict(caught.value.problems)["llmd-fleet:model.layers"]


def test_the_kv_bytes_follow_the_kv_cache_dtype():
    raw = _without_card_keys(stack_raw_config("quickstart-h100"))
    raw["model"]["kvCacheDtype"] = "auto"
    auto = parse_config(raw).model.kv_bytes_per_token
    raw["model"]["kvCacheDtype"] = "fp8"
    fp8 = parse_config(raw).model.kv_bytes_per_token
    assert auto == 2 * fp8 == 31_104  # DeepSeek-V2-Lite: (512 + 64) x 27 layers, bf16 vs fp8


@pytest.mark.parametrize("missing", sorted(KEYS.values()))
def test_a_model_without_a_card_is_refused_naming_each_missing_key(missing):
    raw = copy.deepcopy(stack_raw_config())
    raw["model"]["id"] = "example-org/Hand-Entered-MoE"
    raw["model"].pop(missing)
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert dict(caught.value.problems) == {f"llmd-fleet:model.{missing}": "required"}


def test_a_model_without_a_card_and_every_key_given_is_accepted():
    raw = copy.deepcopy(stack_raw_config())
    raw["model"]["id"] = "example-org/Hand-Entered-MoE"
    assert parse_config(raw).model.layers == raw["model"]["layers"]


def test_the_cli_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.onprem-h100.yaml").read_text())
    model = doc["config"]["llmd-fleet:model"]
    model["id"] = "example-org/Hand-Entered-MoE"
    del model["layers"]
    path = tmp_path / "Pulumi.hand.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert run(["plan", str(path)]) == 2
    captured = capsys.readouterr()
    assert "llmd-fleet:model.layers: required" in captured.err and "Traceback" not in captured.err


def test_the_cli_plans_a_stack_that_omits_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.quickstart-h100.yaml").read_text())
    for key in KEYS.values():
        doc["config"]["llmd-fleet:model"].pop(key, None)
    path = tmp_path / "Pulumi.omitted.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert run(["plan", str(path)]) == 0
    assert "## Throughput and cost" in capsys.readouterr().out
