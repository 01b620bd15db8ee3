"""Agent-aware sessions and 1.0 flow control in the EPP config (docs/llm-d-1.0.md).

Plugin types and parameter names are the pinned llm-d-router tag's: agentidentity/agent_identity.go,
dataproducer/sessionid/producer.go, scorer/sessionaffinity, fairness/program-aware/plugin.go,
admitter/probabilisticadmitter/plugin.go.
"""

import pytest

from llmd_fleet.config.parse import parse_config
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.router.component import epp_args
from llmd_fleet.layers.router.epp_config import (
    EndpointPickerConfig,
    build_epp_config,
    needs_experimental_plugins,
)
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.plan.fleet import plan_fleet

TOKENIZER = "http://glm52-tokenizer.llm-d.svc:8000"


def _epp(raw_config, **router):
    raw_config["router"] = router
    config = parse_config(raw_config)
    return build_epp_config(config, plan_fleet(config), TOKENIZER)


def _types(epp):
    return [p.type for p in epp.plugins]


def _decode_refs(epp):
    profile = next(p for p in epp.scheduling_profiles if p.name == "decode")
    return {r.plugin_ref: r.weight for r in profile.plugins}


def test_reference_sessions_key_on_header_then_agent_identity(raw_config):
    epp = _epp(raw_config)
    assert epp.plugin("agent-identity").type == "agent-identity"
    # No extra headers: no parameters at all, so only the built-in agent headers are checked.
    assert epp.plugin("agent-identity").parameters is None
    scorer = epp.plugin("session-affinity-scorer").parameters
    assert scorer is not None and scorer["strategy"] == "session_id"
    sources = scorer["sessionIdConfig"]["sources"]
    assert sources == [{"header": "x-session-id"}, {"attribute": "agent-identity"}]
    assert scorer["sessionIdConfig"]["evictionTtlSeconds"] == 1800
    # The token scorer writes the serving endpoint back to the client on every response.
    token = epp.plugin("session-token-scorer")
    assert token.type == "session-affinity-scorer"
    assert token.parameters == {
        "strategy": "encoded_endpoint_header",
        "encodedEndpointHeaderConfig": {"header": "x-session-token"},
    }
    refs = _decode_refs(epp)
    assert refs["session-affinity-scorer"] == 2.0 and refs["session-token-scorer"] == 1.0
    # agent-identity is Alpha at the pinned router: the EPP must be started with the flag.
    assert needs_experimental_plugins(epp)


def test_cookie_and_extra_agent_headers(raw_config):
    epp = _epp(
        raw_config,
        sessionAffinity={
            "header": "x-chat-id",
            "cookie": "llmd_session",
            "agentHeaders": ["x-my-agent-session"],
        },
    )
    assert epp.plugin("session-id-producer").parameters == {"cookieName": "llmd_session"}
    assert epp.plugin("agent-identity").parameters == {"additionalSessionHeaders": ["x-my-agent-session"]}
    sources = epp.plugin("session-affinity-scorer").parameters["sessionIdConfig"]["sources"]
    # The producer named session-id-producer publishes DataKey "SessionIDDataKey/<name>".
    assert sources == [
        {"header": "x-chat-id"},
        {"attribute": "SessionIDDataKey/session-id-producer"},
        {"attribute": "agent-identity"},
    ]


def test_sessions_off_and_token_off(raw_config):
    off = _epp(raw_config, sessionAffinity={"enabled": False})
    assert not {"agent-identity", "session-affinity-scorer"} & set(_types(off))
    assert "session-affinity-scorer" not in _decode_refs(off)
    no_token = _epp(raw_config, sessionAffinity={"tokenHeader": None, "agentIdentity": False})
    assert "session-token-scorer" not in {p.name for p in no_token.plugins}
    assert "agent-identity" not in _types(no_token)
    sources = no_token.plugin("session-affinity-scorer").parameters["sessionIdConfig"]["sources"]
    assert sources == [{"header": "x-session-id"}]


@pytest.mark.parametrize(
    ("session", "key"),
    [
        ({"cookie": "a;b"}, "llmd-fleet:router.sessionAffinity.cookie"),
        ({"cookie": "x" * 65}, "llmd-fleet:router.sessionAffinity.cookie"),
        ({"agentHeaders": ["X-Upper"]}, "llmd-fleet:router.sessionAffinity.agentHeaders[0]"),
        ({"agentHeaders": ["h"] * 9}, "llmd-fleet:router.sessionAffinity.agentHeaders"),
        ({"tokenHeader": "x-token\r\nset-cookie"}, "llmd-fleet:router.sessionAffinity.tokenHeader"),
    ],
)
def test_bad_session_values_name_the_key(raw_config, session, key):
    raw_config["router"] = {"sessionAffinity": session}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == key


def test_program_aware_fairness_on_every_band(raw_config):
    epp = _epp(raw_config)
    fairness = epp.plugin("program-aware-fairness")
    assert fairness.type == "program-aware-fairness"
    assert fairness.parameters == {"strategy": "las", "evictionTtlSeconds": 1800}
    assert epp.flow_control is not None
    assert {b.fairness_policy_ref for b in epp.flow_control.priority_bands} == {"program-aware-fairness"}
    round_robin = _epp(raw_config, fairness="round-robin")
    assert round_robin.flow_control is not None
    assert {b.fairness_policy_ref for b in round_robin.flow_control.priority_bands} == {
        "round-robin-fairness-policy"
    }
    assert "program-aware-fairness" not in _types(round_robin)


def test_probabilistic_admission_shares_the_saturation_thresholds(raw_config):
    epp = _epp(raw_config)
    admitter = epp.plugin("probabilistic-admitter").parameters
    detector = epp.plugin("utilization-detector").parameters
    assert admitter is not None and detector is not None
    assert admitter["queueDepthThreshold"] == detector["queueDepthThreshold"]
    assert admitter["kvCacheUtilThreshold"] == detector["kvCacheUtilThreshold"]
    assert admitter["power"] > 0 and admitter["k"] > 0
    # An Admitter runs before scheduling: it stays with flow control off.
    no_flow = _epp(raw_config, flowControl=False)
    assert "probabilistic-admitter" in _types(no_flow) and no_flow.flow_control is None
    assert "probabilistic-admitter" not in _types(_epp(raw_config, probabilisticAdmission=False))


def test_probabilistic_admission_needs_a_sheddable_class(raw_config):
    raw_config["router"] = {"priorityClasses": [{"name": "only", "priority": 10, "maxRequests": 100}]}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:router.probabilisticAdmission"


def test_rendered_config_round_trips_and_flags(raw_config):
    epp = _epp(raw_config, sessionAffinity={"cookie": "s"})
    assert EndpointPickerConfig.from_yaml(epp.to_yaml()) == epp
    assert epp.api_version == "llm-d.ai/v1alpha1"
    config = parse_config(raw_config)
    args = epp_args(config, RouterNames(pool="glm52", namespace="llm-d"), experimental=True)
    assert "--allow-experimental-plugins" in args
