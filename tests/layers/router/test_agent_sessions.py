"""Agent-aware sessions and 1.0 flow control in the EPP config (docs/llm-d-1.0.md).

Plugin types and parameter names are the pinned llm-d-router tag's: agentidentity/agent_identity.go,
dataproducer/sessionid/producer.go, scorer/sessionaffinity, fairness/program-aware/plugin.go,
admitter/probabilisticadmitter/plugin.go.
"""

import math
import re

import pytest

from devtools.metrics_catalogue.catalogue import catalogue
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.router.component import epp_args
from llmd_fleet.layers.router.epp_config import (
    EndpointPickerConfig,
    build_epp_config,
    needs_experimental_plugins,
)
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import all_stacks, stack_raw_config

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
    assert fairness.parameters == {
        "strategy": "las",
        "lasHalfLifeSeconds": 60,
        "evictionTtlSeconds": 300,
        "evictionSweepSeconds": 60,
    }
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


def _upstream_shed(params, kv_fractions):
    """The admitter at the pinned router tag (probabilisticadmitter/plugin.go lines 136-161),
    restated from its source: the mean over endpoints of max(queue/qd, kv/kvThreshold) with empty queues, then
    p = min(saturation^power * k, 1)."""
    qd, kv_threshold = params["queueDepthThreshold"], params["kvCacheUtilThreshold"]
    saturation = sum(max(0 / qd, kv / kv_threshold) for kv in kv_fractions) / len(kv_fractions)
    return min(saturation ** params["power"] * params["k"], 1.0)


@pytest.mark.parametrize("stack", all_stacks())
def test_admission_sheds_no_batch_at_nominal_load_and_all_at_the_gate(stack):
    # Nominal load: one typical prompt resident in every rank's KV cache, no queue. The curve the
    # stack renders must shed (almost) nothing there, and everything only at flow control's own
    # gate (saturation 1.0); k 300, power 5 shed everything from ~0.32, i.e. at nominal load.
    config = parse_config(stack_raw_config(stack))
    plan = plan_fleet(config)
    params = build_epp_config(config, plan, TOKENIZER).plugin("probabilistic-admitter").parameters
    assert params is not None
    prompt = config.router.prompt_tokens(config.workload.input_tokens_p50)
    nominal = [
        min(min(prompt, getattr(config.serving.roles, role.name).max_model_len) / role.memory.kv_tokens, 1.0)
        for role in plan.roles
        for _ in range(role.instances * role.data_parallel)
    ]
    assert _upstream_shed(params, nominal) <= 0.001
    # 1.5x nominal: what `llmd-fleet plan` shows, and still short of shedding everything.
    overload = _upstream_shed(params, [1.5 * kv for kv in nominal])
    assert plan.router.admission is not None
    assert overload == pytest.approx(plan.router.admission.shed_overload) and overload < 1
    # At the gate (every endpoint at the KV threshold) everything sheddable is shed; just below
    # it, not everything.
    gate = params["kvCacheUtilThreshold"]
    assert _upstream_shed(params, [gate] * len(nominal)) == pytest.approx(1.0)
    assert _upstream_shed(params, [0.95 * gate] * len(nominal)) < 1


def test_the_plan_shows_the_shed_probability_at_nominal_and_overload(raw_config):
    from llmd_fleet.cli.render import _tables

    plan = plan_fleet(parse_config(raw_config))
    admission = plan.router.admission
    assert admission is not None
    text = _tables([("", "prefill", "decode")], plan)
    assert f"shed {admission.shed_nominal:.2%} at nominal load" in text
    assert f"{admission.shed_overload:.2%} at 1.5x" in text


@pytest.mark.parametrize("stack", all_stacks())
def test_program_state_per_agent_session_is_bounded(stack):
    # Every agent session is a program with its own queue and series. At v0.10.0
    # (fairness/program-aware/README.md) lasDecayFactor decays per Pick, i.e. with the pick rate;
    # lasHalfLifeSeconds decays on the wall clock. The state must decay on the wall clock, be
    # forgotten a few tool-loop gaps after the session's last completion (not after a session
    # TTL of half an hour), and its per-program series must not reach Prometheus.
    config = parse_config(stack_raw_config(stack))
    plan = plan_fleet(config)
    params = build_epp_config(config, plan, TOKENIZER).plugin("program-aware-fairness").parameters
    assert params is not None
    gap = config.router.agent_tool_gap_seconds
    assert params["lasHalfLifeSeconds"] > 0 and "lasDecayFactor" not in params
    # A program idle for one tool call keeps half its service; evicted once it is below 1/32.
    assert params["lasHalfLifeSeconds"] == gap
    assert 0.5 ** (params["evictionTtlSeconds"] / params["lasHalfLifeSeconds"]) <= 1 / 32
    assert params["evictionTtlSeconds"] <= 10 * gap < config.router.session_affinity.ttl_seconds
    assert 0 < params["evictionSweepSeconds"] <= gap
    # The programs the EPP can hold at the expected rate, even if every request were a new one.
    rate = config.router.expected_requests_per_second
    bound = rate * (params["evictionTtlSeconds"] + params["evictionSweepSeconds"])
    assert plan.router.fairness is not None and plan.router.fairness.max_programs == math.ceil(bound)
    assert plan.router.fairness.max_programs < 50_000


def test_per_program_series_are_dropped_at_scrape(raw_config):
    from llmd_fleet.layers.observability.component import pod_monitoring_specs, service_monitor_spec
    from llmd_fleet.plan.observability import plan_observability

    config = parse_config(raw_config)
    (endpoint,) = service_monitor_spec(config)["endpoints"]
    gmp = pod_monitoring_specs(config, plan_observability(config, plan_fleet(config)))["epp"]
    for rules in (endpoint["metricRelabelings"], gmp["endpoints"][0]["metricRelabeling"]):
        (drop,) = rules
        assert drop["action"] == "drop" and drop["sourceLabels"] == ["__name__"]
        pattern = re.compile(f"^(?:{drop['regex']})$")
        for name in (
            "llm_d_epp_program_aware_avg_wait_time_milliseconds",
            "llm_d_epp_program_aware_attained_service_tokens",
        ):
            assert pattern.match(name) and name in catalogue().exposed
        # The fleet-wide index and every other series stay.
        assert not pattern.match("llm_d_epp_program_aware_jains_fairness_index")
        assert not pattern.match("llm_d_epp_inflight_tokens")


def test_the_tool_gap_is_bounded():
    raw = stack_raw_config()
    raw["router"] = {"agentToolGapSeconds": 0}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    ((where, message),) = caught.value.problems
    assert where == "llmd-fleet:router.agentToolGapSeconds" and ">= 5" in message


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
