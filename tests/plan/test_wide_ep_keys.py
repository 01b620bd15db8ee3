"""`serving.roles.<role>.redundantExperts` and `dualBatchOverlap`: vLLM 0.33's expert-parallel
load balancing and dual-batch overlap, accepted where the layout allows them, refused naming the
key otherwise, rendered as the engine's flags and counted in the role's HBM."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.layers.serving.vllm import vllm_serve_argv
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.memory import sparse_prefill_workspace_gib
from llmd_fleet.plan.throughput import plan_throughput
from llmd_fleet.stack.parse import parse_config
from tests.support import REFERENCE_STACK, problems_by_key, stack_raw_config

KEY = "llmd-fleet:serving.roles.decode"


def _decode(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["roles"]["decode"].update(changes)
    return raw


def _nine_node_decode(**changes: Any) -> dict[str, Any]:
    """The reference stack with decode at EP72 (9 nodes, the SGLang DeepSeek-V3 layout): 256
    experts do not split over 72 ranks."""
    # 7 x 4 prefill + 4 x 9 decode nodes: 64 of the reference stack's 68.
    return _decode(nodesPerInstance=9, dataParallel=72, expertParallel=72, instances=4, **changes)


def _argv(raw: dict[str, Any]) -> list[str]:
    config = parse_config(raw)
    return vllm_serve_argv(config.model, config.serving.roles.decode, plan_fleet(config).role("decode"))


def test_unset_keys_render_no_new_flag() -> None:
    argv = _argv(_decode())
    assert not {"--enable-eplb", "--eplb-config", "--enable-dbo"} & set(argv)


@pytest.mark.parametrize("redundant", [0, 64])
def test_redundant_experts_render_eplb_with_the_count(redundant: int) -> None:
    argv = _argv(_decode(redundantExperts=redundant))
    assert "--enable-eplb" in argv
    assert json.loads(argv[argv.index("--eplb-config") + 1]) == {"num_redundant_experts": redundant}


def test_dual_batch_overlap_renders_enable_dbo() -> None:
    assert "--enable-dbo" in _argv(_decode(dualBatchOverlap=True))
    assert "--enable-dbo" not in _argv(_decode(dualBatchOverlap=False))


def test_an_ep_size_that_does_not_divide_the_experts_is_refused_with_the_redundant_counts_that_fit() -> None:
    problems = problems_by_key(_nine_node_decode())
    message = problems[f"{KEY}.expertParallel"]
    assert "must divide the model's 256 experts; got 72" in message
    assert "redundantExperts: allowed: 32, 104, 176" in message


def test_ep72_with_32_redundant_experts_is_accepted_and_rendered() -> None:
    raw = _nine_node_decode(redundantExperts=32)
    argv = _argv(raw)
    assert argv[argv.index("--eplb-config") + 1] == '{"num_redundant_experts":32}'
    assert argv[argv.index("--data-parallel-size") + 1] == "72"
    weights = plan_fleet(parse_config(raw)).role("decode").memory.weights
    assert weights is not None and weights.routed_experts > 0


@pytest.mark.parametrize("redundant", [31, 33, 1])
def test_a_redundant_count_that_leaves_an_uneven_split_is_refused_naming_the_key(redundant: int) -> None:
    message = problems_by_key(_nine_node_decode(redundantExperts=redundant))[f"{KEY}.redundantExperts"]
    assert f"256 experts plus {redundant} redundant must divide by expertParallel (72)" in message
    assert "allowed: 32, 104, 176" in message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("redundantExperts", -1, "must be >= 0 experts (got -1)"),
        ("redundantExperts", 5000, "must be <= 4096 experts (got 5000)"),
        ("redundantExperts", "many", "integer"),
        ("dualBatchOverlap", "sometimes", "bool"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: object, words: str) -> None:
    message = problems_by_key(_decode(**{key: value}))[f"{KEY}.{key}"]
    assert words in message, message


def test_a_bad_value_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _nine_node_decode(redundantExperts=31)
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    document = {"config": {f"llmd-fleet:{k}": v for k, v in raw.items()}}
    (stacks / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(yaml.safe_dump(document))
    assert run(["--stacks-dir", str(stacks), "plan", REFERENCE_STACK]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert f"{KEY}.redundantExperts: the model's 256 experts plus 31 redundant" in captured.err


def test_the_simulator_refuses_both_keys() -> None:
    raw = copy.deepcopy(stack_raw_config("local-sim"))
    raw["serving"]["roles"]["decode"].update(redundantExperts=0, dualBatchOverlap=True)
    problems = problems_by_key(raw)
    assert "no experts to balance" in problems[f"{KEY}.redundantExperts"]
    assert "no all-to-all to overlap" in problems[f"{KEY}.dualBatchOverlap"]


def test_redundant_experts_are_counted_in_hbm_and_in_the_decode_step() -> None:
    base = plan_fleet(parse_config(_decode()))
    raw = _decode(redundantExperts=64)
    config = parse_config(raw)
    more = plan_fleet(config)
    before, after = base.role("decode").memory, more.role("decode").memory
    assert before.weights is not None and after.weights is not None
    # 256 + 64 physical experts over 64 ranks: 5 per rank instead of 4.
    assert after.weights.routed_experts == pytest.approx(before.weights.routed_experts * 320 / 256)
    assert after.weights.mtp > before.weights.mtp  # the MTP layer's experts are balanced too
    assert after.kv_tokens < before.kv_tokens
    slow = plan_throughput(config, more)
    fast = plan_throughput(parse_config(_decode()), base)
    assert slow is not None and fast is not None
    assert slow.throughput.decode.hbm_s > fast.throughput.decode.hbm_s


def test_dual_batch_overlap_counts_a_second_workspace() -> None:
    base = plan_fleet(parse_config(_decode())).role("decode").memory
    dbo = plan_fleet(parse_config(_decode(dualBatchOverlap=True))).role("decode").memory
    assert base.reserves is not None and dbo.reserves is not None
    max_model_len = stack_raw_config()["serving"]["roles"]["decode"]["maxModelLen"]
    assert dbo.reserves.sparse_workspace == pytest.approx(2 * sparse_prefill_workspace_gib(max_model_len))
    assert dbo.reserve_gib - base.reserve_gib == pytest.approx(sparse_prefill_workspace_gib(max_model_len))
    assert dbo.kv_tokens < base.kv_tokens


def test_the_memory_section_names_the_spares_and_the_second_workspace() -> None:
    from llmd_fleet.cli.plan_sections import memory_section

    config = parse_config(_nine_node_decode(redundantExperts=32, dualBatchOverlap=True))
    text = memory_section(config, plan_fleet(config))
    assert "decode (EP 72, 32 redundant experts)" in text and "prefill (EP 32)" in text
    assert "sparse-MLA prefill workspace (maxModelLen, one per micro-batch with dualBatchOverlap)" in text
    plain = parse_config(_decode())
    assert "redundant" not in memory_section(plain, plan_fleet(plain))
    assert "micro-batch" not in memory_section(plain, plan_fleet(plain))


def test_a_hand_entered_model_without_a_card_gets_one_line_naming_what_it_lacks() -> None:
    from llmd_fleet.cli.plan_sections import throughput_section

    raw = copy.deepcopy(stack_raw_config())
    raw["model"]["id"] = "example-org/Hand-Entered-MoE"
    config = parse_config(raw)
    text = throughput_section(config, plan_fleet(config))
    assert text == (
        "throughput: not modelled: model.id example-org/Hand-Entered-MoE has no model card "
        "(components/llmd_fleet/models/): the step times need its architecture (hidden size, heads, "
        "MLA ranks, experts per layer), which totalParamsB and kvBytesPerToken do not give"
    )
    reference = parse_config(stack_raw_config())
    assert throughput_section(reference, plan_fleet(reference)).startswith("## Throughput and cost")


def test_the_routers_prompt_length_defaults_to_the_workloads_median_input() -> None:
    raw = copy.deepcopy(stack_raw_config("quickstart-h100"))
    assert raw["router"].pop("expectedPromptTokens") == raw["workload"]["inputTokensP50"] == 8000
    config = parse_config(raw)
    explicit = parse_config(stack_raw_config("quickstart-h100"))
    assert config.router.expected_prompt_tokens is None
    # the same router sizing as the stack that spells 8000 out
    assert plan_fleet(config).router == plan_fleet(explicit).router
    raw["workload"]["inputTokensP50"] = 16_000
    raw["workload"]["inputTokensP90"] = 24_000
    raw["workload"]["inputTokensP99"] = 30_000
    bigger = plan_fleet(parse_config(raw)).router
    assert bigger.queue_max_bytes > plan_fleet(explicit).router.queue_max_bytes
