"""Memory per rank from the model description and vLLM 0.33's allocations (plan/memory.py)."""

import copy

import pytest

from llmd_fleet.models import card_for, description_for
from llmd_fleet.models.glm5 import GLM_5_2_FP8, SOURCES
from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.plan.memory import (
    FP8_DS_MLA_BYTES,
    kv_bytes_per_token,
    model_sizing,
    sparse_prefill_workspace_gib,
    topk_indices_gib,
    total_params,
    weights_per_rank,
)
from llmd_fleet.stack.parse import parse_config


def test_every_field_of_the_description_names_its_source():
    card = card_for("zai-org/GLM-5.2-FP8")
    assert card is not None and card.unsourced_fields() == []
    assert set(SOURCES) >= {"max_position_embeddings", "indexer_layers", "num_nextn_predict_layers"}
    assert description_for("zai-org/GLM-5.2-FP8") is GLM_5_2_FP8
    assert description_for("some/other-model") is None


def test_counted_parameters_match_the_model_card():
    # Z.ai's card: 744B total.
    assert total_params(GLM_5_2_FP8) / 1e9 == pytest.approx(744, rel=0.01)


@pytest.mark.parametrize(
    ("ep", "expected_gib"),
    [
        (32, 43),  # issue #31: corrected DEP32 ~43 GiB (the constant-based plan said 39.1)
        (64, 32),  # issue #31: corrected DEP64 ~32 GiB (the constant-based plan said 28.5)
        (16, 65),  # llm-d measured ~65 GiB per GPU at DEP16 (H200)
    ],
)
def test_weights_per_rank_match_the_published_figures(ep, expected_gib):
    assert weights_per_rank(GLM_5_2_FP8, 1, ep).total == pytest.approx(expected_gib, abs=1.0)


def test_weight_parts():
    w = weights_per_rank(GLM_5_2_FP8, 1, 32)
    # bf16 embeddings and LM head: 154,880 x 6,144 x 2 B each.
    assert w.embeddings == w.lm_head == pytest.approx(154880 * 6144 * 2 / 2**30)
    # Absorbed MLA: (78 + 1 MTP) x 512 x 64 x (192 + 256) x 2 B.
    assert w.absorbed_mla == pytest.approx(79 * 512 * 64 * 448 * 2 / 2**30)
    # The MTP layer carries 1/EP of one MoE layer's experts: less of it at larger EP.
    assert weights_per_rank(GLM_5_2_FP8, 1, 64).mtp < w.mtp
    # Tensor parallelism splits everything but the experts.
    assert weights_per_rank(GLM_5_2_FP8, 2, 32).non_expert == pytest.approx(w.non_expert / 2)


def test_kv_bytes_per_token_follow_vllm_layouts():
    assert FP8_DS_MLA_BYTES == 656
    kv = kv_bytes_per_token(GLM_5_2_FP8, "fp8")
    assert (kv.mla_per_layer, kv.mla_layers) == (656, 79)
    assert (kv.indexer_per_layer, kv.indexer_layers, kv.indexer_layers_expected) == (132, 79, 22)
    assert kv.total == 62_252
    assert kv.expected == 54_728
    # issue #31: allocating the indexer cache on every layer changes the figure by ~13%.
    assert kv.total / kv.expected == pytest.approx(1.137, abs=0.005)
    assert kv_bytes_per_token(GLM_5_2_FP8, "fp8", conservative=False).total == 54_728
    assert kv_bytes_per_token(GLM_5_2_FP8, "auto").mla_per_layer == (512 + 64) * 2


def test_reserves_follow_vllm_defaults():
    # Factor 5 up to 256K tokens, 2 above (VllmConfig.__post_init__).
    assert sparse_prefill_workspace_gib(202_752) == pytest.approx(5 * 202_752 * 1152 / 2**30)
    assert sparse_prefill_workspace_gib(1_048_576) == pytest.approx(2 * 1_048_576 * 1152 / 2**30)
    assert topk_indices_gib(GLM_5_2_FP8, 16384) == pytest.approx(2 * 16384 * 2048 * 4 / 2**30)
    assert topk_indices_gib(GLM_5_2_FP8, None) == topk_indices_gib(GLM_5_2_FP8, 8192)


def test_reference_plan_uses_the_description(raw_config):
    plan = plan_fleet(parse_config(raw_config))
    assert plan.model is not None and plan.model.source == "model card"
    assert plan.model.context_window == 1_048_576
    prefill, decode = plan.role("prefill").memory, plan.role("decode").memory
    assert prefill.weights is not None and decode.weights is not None
    assert prefill.weights.total == pytest.approx(43.1, abs=0.1)
    assert decode.weights.total == pytest.approx(32.4, abs=0.1)
    assert (prefill.kv_tokens, decode.kv_tokens) == (255_750, 476_789)
    assert prefill.kv_bytes_per_token == decode.kv_bytes_per_token == 62_252


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("kvBytesPerToken", 54912, "below what vLLM 0.33 allocates"),
        ("maxContextTokens", 202752, "context window 1048576"),
        ("totalParamsB", 760, "off the 743.4B parameters"),
        ("layers", 61, "model card (models/glm5): num_hidden_layers is 78; set layers: 78"),
        ("experts", 384, "n_routed_experts is 256; set experts: 256"),
        ("expertsPerToken", 6, "num_experts_per_tok is 8; set expertsPerToken: 8"),
        ("routedExpertParamsB", 700, "off the 724.8B routed-expert parameters"),
    ],
)
def test_stale_model_figures_are_refused(raw_config, field, value, words):
    raw = copy.deepcopy(raw_config)
    raw["model"][field] = value
    if field == "maxContextTokens":
        for role in raw["serving"]["roles"].values():
            role["maxModelLen"] = min(role["maxModelLen"], value)
    with pytest.raises(PlanError) as caught:
        plan_fleet(parse_config(raw))
    assert words in dict(caught.value.problems)[f"llmd-fleet:model.{field}"]


def test_a_model_without_description_keeps_the_stack_figures(raw_config):
    raw = copy.deepcopy(raw_config)
    raw["model"]["id"] = "example/other-moe"
    config = parse_config(raw)
    sizing, problems = model_sizing(config.model)
    assert problems == [] and sizing.description is None and sizing.source == "stack config"
    memory = plan_fleet(config).role("decode").memory
    assert memory.weights is None and memory.kv_bytes_per_token == config.model.kv_bytes_per_token


def test_plan_prints_the_memory_section(raw_config):
    from llmd_fleet.cli.plan_sections import memory_section

    config = parse_config(raw_config)
    text = memory_section(config, plan_fleet(config))
    assert "| weights total | 43.1 | 32.4 | engine log `Model loading took N GiB` |" in text
    assert "| sized with | 62,252 B |  |" in text
    assert "the config's 21 indexer layers + MTP would give 54,728 B (13.7% less)" in text
    assert "| model (max_position_embeddings) | 1,048,576 |" in text


def test_the_quickstart_model_is_described_with_sources():
    from llmd_fleet.models.deepseek_v2 import DEEPSEEK_V2_LITE_CHAT

    m = DEEPSEEK_V2_LITE_CHAT
    assert description_for("deepseek-ai/DeepSeek-V2-Lite-Chat") is m
    card = card_for("deepseek-ai/DeepSeek-V2-Lite-Chat")
    assert card is not None and card.unsourced_fields() == []
    # The DeepSeek-V2 paper: DeepSeek-V2-Lite has 15.7B parameters.
    assert total_params(m) / 1e9 == pytest.approx(15.7, rel=0.01)
    # No DSA, no MTP: bf16 latent + RoPE key on 27 layers, nothing else.
    kv = kv_bytes_per_token(m, "auto")
    assert (kv.total, kv.indexer_layers) == ((512 + 64) * 2 * 27, 0)
    # A bf16 checkpoint: 2 bytes per parameter, the routed experts split over EP 8.
    w = weights_per_rank(m, 1, 8)
    assert w.routed_experts == pytest.approx(26 * 64 * 3 * 2048 * 1408 * 2 / 8 / 2**30)
    assert w.mtp == 0
