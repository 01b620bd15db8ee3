"""The router against the DisaggregatedSet rollout and the P/D split: the rollout screener on every
P/D config, the decider a stack names (or implies), decode's token budget agreeing with what the
decider leaves to decode, and the served names llm-d's cost recipe joins on."""

import pytest

from llmd_fleet.config.model import served_model_names
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.labels import serving_labels
from llmd_fleet.layers.router.epp_config import DECIDER, ROLLOUT_SCREENER, build_epp_config
from llmd_fleet.layers.serving.vllm import decode_max_tokens, vllm_serve_argv
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config

TOKENIZER = "http://t:8000"


def _built(raw_config, **router):
    raw_config["router"] = {**raw_config.get("router", {}), **router}
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    return config, plan, build_epp_config(config, plan, TOKENIZER)


def test_the_screener_keeps_one_revision_of_this_set_with_every_role(raw_config):
    config, _, epp = _built(raw_config)
    screener = epp.plugin(ROLLOUT_SCREENER)
    assert screener.type == "disaggregatedset-rollout-screener"
    assert screener.parameters == {
        "scope": {"labelSelector": f"disaggregatedset.x-k8s.io/name={config.serving.name}"},
        "revisionGating": {
            "mode": "max-role",
            "requireRoles": {"values": ["decode", "prefill"]},
            "revisionLabelKey": "disaggregatedset.x-k8s.io/revision",
            "roleLabelKey": "disaggregatedset.x-k8s.io/role",
        },
    }
    # Discovered from the plugin list; never a scheduling profile's step.
    refs = {r.plugin_ref for p in epp.scheduling_profiles for r in p.plugins}
    assert ROLLOUT_SCREENER not in refs


def test_always_disaggregate_by_default(raw_config):
    raw_config.get("router", {}).pop("nonCachedTokensForRemotePrefill", None)
    config, plan, epp = _built(raw_config)
    assert epp.plugin(DECIDER).type == "always-disagg-pd-decider"
    assert epp.plugin(DECIDER).parameters is None
    decode = config.serving.roles.decode
    assert plan.role("decode").local_prefill_tokens == 0
    if decode.max_num_seqs is not None:
        assert decode_max_tokens(decode, plan.role("decode")) == decode.max_num_seqs * (1 + decode.mtp_tokens)


@pytest.mark.parametrize(
    ("router", "threshold"),
    [({"pdDecider": "prefix"}, 16), ({"nonCachedTokensForRemotePrefill": 4096}, 4096)],
)
def test_prefix_decider_grows_decode_budget_by_what_it_leaves_to_decode(raw_config, router, threshold):
    raw_config["serving"]["roles"]["decode"].pop("maxNumBatchedTokens", None)
    config, plan, epp = _built(raw_config, **router)
    assert epp.plugin(DECIDER).type == "prefix-based-pd-decider"
    assert epp.plugin(DECIDER).parameters == {"nonCachedTokens": threshold}
    decode, role_plan = config.serving.roles.decode, plan.role("decode")
    assert role_plan.local_prefill_tokens == threshold - 1
    assert plan.role("prefill").local_prefill_tokens == 0
    argv = vllm_serve_argv(config.model, decode, role_plan, config.serving.kv_tier)
    budget = int(argv[argv.index("--max-num-batched-tokens") + 1])
    assert budget == decode.max_num_seqs * (1 + decode.mtp_tokens) + threshold - 1


def test_a_threshold_with_the_always_decider_is_refused_naming_the_key(raw_config):
    raw_config["router"] = {"pdDecider": "always", "nonCachedTokensForRemotePrefill": 2048}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:router.nonCachedTokensForRemotePrefill"


def test_an_explicit_decode_budget_below_the_prefix_remainder_is_refused(raw_config):
    decode = raw_config["serving"]["roles"]["decode"]
    decode["maxNumSeqs"] = 32
    decode["maxNumBatchedTokens"] = 256
    raw_config["router"] = {"nonCachedTokensForRemotePrefill": 2048}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    key, message = caught.value.problems[0][:2]
    assert key == "llmd-fleet:serving.roles.decode.maxNumBatchedTokens"
    assert "2047 prompt tokens" in message


@pytest.mark.parametrize("threshold", [0, -1])
def test_a_threshold_below_one_is_refused(raw_config, threshold):
    raw_config["router"] = {"nonCachedTokensForRemotePrefill": threshold}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:router.nonCachedTokensForRemotePrefill"


@pytest.mark.parametrize(
    ("model_id", "served", "names"),
    [
        ("zai-org/GLM-5.2-FP8", None, ("zai-org--GLM-5.2-FP8", "zai-org/GLM-5.2-FP8")),
        ("zai-org/GLM-5.2-FP8", "glm-5.2", ("glm-5.2",)),
        ("zai-org/GLM-5.2-FP8", "team:glm", ("team--glm", "team:glm")),
    ],
)
def test_first_served_name_is_the_model_label_and_clients_keep_their_name(
    raw_config, model_id, served, names
):
    raw_config["model"]["id"] = model_id
    if served is None:
        raw_config["model"].pop("servedName", None)
    else:
        raw_config["model"]["servedName"] = served
    config = parse_config(raw_config)
    assert served_model_names(config.model) == names
    plan = plan_fleet(config)
    argv = vllm_serve_argv(config.model, config.serving.roles.decode, plan.role("decode"))
    at = argv.index("--served-model-name")
    assert tuple(argv[at + 1 : at + 1 + len(names)]) == names
    assert not argv[at + 1 + len(names)].startswith(names[-1])
    labels = serving_labels("x", "decode", names[0], "v1")
    assert labels["llm-d.ai/model"] == names[0]
