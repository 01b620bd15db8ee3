"""The endpoint picker's config file (EndpointPickerConfig, llm-d.ai/v1alpha1), built from the plan.

Field and plugin names are those of llm-d-router at the tag pinned in images/versions.toml
(apix/config/v1alpha1/endpointpickerconfig_types.go and the plugin packages); the EPP decodes
the file and every plugin's parameters strictly, so an unknown key stops it at start-up. The
typed model below mirrors that top level, so a config we build always parses back into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llmd_fleet.config.model import client_model_name
from llmd_fleet.layers.router.config import RouterConfig
from llmd_fleet.layers.router.specs import INFLIGHT_PRODUCER
from llmd_fleet.plan.admission import KV_CACHE_UTIL_THRESHOLD, QUEUE_DEPTH_THRESHOLD
from llmd_fleet.plan.epp import epp_cpus_for
from llmd_fleet.plan.fleet import KV_EVENTS_PORT, FleetPlan

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Plugin(_Strict):
    """One entry of `plugins`: a plugin instance (`type`) under the `name` profiles refer to, and its
    parameters."""

    name: str
    type: str
    parameters: dict[str, Any] | None = None


class PluginRef(_Strict):
    """A scheduling profile's use of a plugin, by name, with its scorer weight."""

    plugin_ref: str = Field(alias="pluginRef")
    weight: float | None = None


class SchedulingProfile(_Strict):
    """One entry of `schedulingProfiles`: the plugins (filters, scorers, picker) one profile runs."""

    name: str
    plugins: list[PluginRef]


class Extractor(_Strict):
    """A data source's extractor, by plugin name."""

    plugin_ref: str = Field(alias="pluginRef")


class DataSource(_Strict):
    """One source of `dataLayer.sources`, by plugin name, and its extractors."""

    plugin_ref: str = Field(alias="pluginRef")
    extractors: list[Extractor] = []


class DataLayer(_Strict):
    """`dataLayer`: where the picker's endpoint data comes from."""

    sources: list[DataSource]


class PriorityBand(_Strict):
    """One band of `flowControl.priorityBands`: a priority's queue limits and its policies."""

    priority: int
    max_requests: int | None = Field(default=None, alias="maxRequests")
    max_bytes: str | None = Field(default=None, alias="maxBytes")
    """A Kubernetes quantity (resource.Quantity in the router's types): bytes, as digits."""
    fairness_policy_ref: str | None = Field(default=None, alias="fairnessPolicyRef")
    ordering_policy_ref: str | None = Field(default=None, alias="orderingPolicyRef")


class SaturationDetectorRef(_Strict):
    """`flowControl.saturationDetector`: the plugin that says when the pool is saturated."""

    plugin_ref: str = Field(alias="pluginRef")


class FlowControl(_Strict):
    """`flowControl`: the admission queue's limits, its priority bands and its saturation detector."""

    max_bytes: str | None = Field(default=None, alias="maxBytes")
    max_requests: int | None = Field(default=None, alias="maxRequests")
    default_request_ttl: str | None = Field(default=None, alias="defaultRequestTTL")
    priority_bands: list[PriorityBand] = Field(alias="priorityBands")
    saturation_detector: SaturationDetectorRef = Field(alias="saturationDetector")


class EndpointPickerConfig(_Strict):
    """The whole config file the endpoint picker reads (`build_epp_config` makes it from the plan)."""

    api_version: str = Field(default="llm-d.ai/v1alpha1", alias="apiVersion")
    kind: str = "EndpointPickerConfig"
    feature_gates: list[str] = Field(default_factory=list, alias="featureGates")
    plugins: list[Plugin]
    scheduling_profiles: list[SchedulingProfile] = Field(alias="schedulingProfiles")
    data_layer: DataLayer | None = Field(default=None, alias="dataLayer")
    flow_control: FlowControl | None = Field(default=None, alias="flowControl")

    def to_yaml(self) -> str:
        """The file's text: the aliases the picker decodes, unset fields left out, in field order."""
        return yaml.safe_dump(self.model_dump(by_alias=True, exclude_none=True), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> EndpointPickerConfig:
        return cls.model_validate(yaml.safe_load(text))

    def plugin(self, name: str) -> Plugin:
        return next(p for p in self.plugins if p.name == name)


# Plugin instance names used across the config.
PRECISE_PRODUCER = "precise-prefix-cache-producer"
APPROX_PRODUCER = "approx-prefix-cache-producer"
TOKEN_PRODUCER = "token-producer"
NOTIFICATION_SOURCE = "endpoint-notification-source"
PREFIX_SCORER = "prefix-cache-scorer"
SESSION_SCORER = "session-affinity-scorer"
SESSION_TOKEN_SCORER = "session-token-scorer"
AGENT_IDENTITY = "agent-identity"
SESSION_COOKIE_PRODUCER = "session-id-producer"
PROGRAM_FAIRNESS = "program-aware-fairness"
ADMITTER = "probabilistic-admitter"
DECIDER = "pd-decider"
ROLLOUT_SCREENER = "rollout-screener"
SATURATION = "utilization-detector"
# Plugins llm-d-router marks Alpha; the EPP loads them only with --allow-experimental-plugins.
# At v0.10.0 (cmd/epp/runner/runner.go) agent-identity is Alpha too; session-id-producer,
# program-aware-fairness and probabilistic-admitter are Beta.
# disaggregatedset-rollout-screener is Alpha there as well.
EXPERIMENTAL_TYPES = frozenset(
    {
        "session-affinity-scorer",
        "session-affinity-filter",
        "p2p-source-producer",
        "agent-identity",
        "disaggregatedset-rollout-screener",
    }
)
# The labels the DisaggregatedSet controller puts on every pod it creates (LWS v0.10.0,
# api/disaggregatedset/v1/disaggregatedset_types.go; pkg/utils/disaggregatedset/utils.go
# GenerateLabels): the set's name, the pod's role and the revision hash of all roles' templates.
DS_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
DS_ROLE_LABEL = "disaggregatedset.x-k8s.io/role"
DS_REVISION_LABEL = "disaggregatedset.x-k8s.io/revision"
# A peer pull is worth its transfer only for a long enough cached lead: llm-d's P2P guide and its
# GLM-5.2 config set minCachedTokenDelta 2048 (the plugin's default, 1, pulls one block's lead).
P2P_MIN_CACHED_TOKEN_DELTA = 2048
# The request attribute the agent-identity plugin publishes (agentidentity.AgentIdentityKey).
AGENT_IDENTITY_ATTRIBUTE = "agent-identity"
# The attribute key a session-id-producer instance writes: DataKey "SessionIDDataKey/<instance
# name>" (datalayer/attribute/session/data_types.go and interface/plugin/datakey.go at v0.10.0).
SESSION_COOKIE_ATTRIBUTE = f"SessionIDDataKey/{SESSION_COOKIE_PRODUCER}"
# The saturation thresholds flow control's detector and the probabilistic admitter share, and the
# admitter's curve, derived from the plan: llmd_fleet/layers/router/specs.py.

# Scorer weights. Prefix reuse dominates agent traffic (>=90% of each turn repeats the last), so
# the prefix scorer carries the most weight; load scorers keep one hot prefix from piling every
# agent onto one rank. Same proportions as llm-d's precise-prefix and P/D guides (3 : 2 : 2).
PREFIX_WEIGHT = 3.0
LOAD_WEIGHT = 2.0
SESSION_WEIGHT = 2.0
# The echoed endpoint token only matters when the router's own session binding is gone (another
# EPP replica after a failover, or an evicted binding): it breaks ties, it does not outvote load.
SESSION_TOKEN_WEIGHT = 1.0
NO_HIT_WEIGHT = 1.0
# Tier weights: an HBM hit is free, a CPU-tier hit costs a host-to-device copy (tens of ms for a
# long prefix) but still beats recomputing it; llm-d-router's defaults are 1.0 and 0.8.
GPU_TIER_WEIGHT = 1.0
CPU_TIER_WEIGHT = 0.8
CPU_PREFIX_WEIGHT = 2.0
# LoRA affinity (a model with `loraAdapters`): the pinned router's `lora-affinity-scorer` (beta,
# cmd/epp/runner/runner.go; pkg/epp/framework/plugins/scheduling/scorer/loraaffinity) prefers
# ranks where the request's adapter is active or waiting (vLLM's lora_requests_info). Every rank
# holds every adapter in a GPU slot (--max-loras = the model's adapters, layers/serving/vllm.py),
# so it only breaks ties, like the no-hit scorer.
LORA_SCORER = "lora-affinity-scorer"
LORA_WEIGHT = 1.0
CPU_APPROX_PRODUCER = "cpu-approx-prefix-cache-producer"
CPU_PREFIX_SCORER = "cpu-prefix-cache-scorer"
P2P_PRODUCER = "p2p-source-producer"


_FAIRNESS_TYPES = {
    "program-aware": PROGRAM_FAIRNESS,
    "round-robin": "round-robin-fairness-policy",
    "strict": "global-strict-fairness-policy",
}


def _fairness_plugin(router: RouterConfig, plan: FleetPlan) -> Plugin:
    kind = _FAIRNESS_TYPES[router.fairness]
    fairness = plan.router.fairness
    if kind != PROGRAM_FAIRNESS or fairness is None:
        return Plugin(name=kind, type=kind)
    # Least attained service per program (agent session), decayed on the wall clock (the per-Pick
    # default follows the pick rate) and forgotten a few tool-loop gaps after its last completion,
    # which bounds the programs, their queues and series (llmd_fleet/plan/admission.py).
    return Plugin(
        name=kind,
        type=kind,
        parameters={
            "strategy": "las",
            "lasHalfLifeSeconds": fairness.half_life_seconds,
            "evictionTtlSeconds": fairness.eviction_ttl_seconds,
            "evictionSweepSeconds": fairness.eviction_sweep_seconds,
        },
    )


def build_epp_config(config: StackConfig, plan: FleetPlan, tokenizer_url: str) -> EndpointPickerConfig:
    """The EPP config for a P/D wide-EP pool: producers, scorers and P/D plugins, the two
    scheduling profiles, and flow control, each built by its own function below.

    `tokenizer_url` is the vLLM API the token producer tokenizes prompts with, so the router's
    block keys are computed from the same tokens the engines hash.
    """
    producers, data_layer = _producers(config, plan, tokenizer_url)
    producers += _load_producers(config)
    screener = _rollout_screener(config, plan)
    prefill_profile, decode_profile, profile_plugins = _profiles(config, plan)
    feature_gates, flow_plugins, flow_control = _flow_control(config, plan)
    return EndpointPickerConfig(
        feature_gates=feature_gates,
        plugins=[
            *screener,
            *producers,
            *_scorers(config, plan),
            *profile_plugins,
            *_admission(config, plan),
            *flow_plugins,
        ],
        scheduling_profiles=[
            SchedulingProfile(name="prefill", plugins=prefill_profile),
            SchedulingProfile(name="decode", plugins=decode_profile),
        ],
        data_layer=data_layer,
        flow_control=flow_control,
    )


def _prefix_producer(config: StackConfig) -> str:
    """The producer whose prefix match info the scorers read."""
    return PRECISE_PRODUCER if config.router.prefix_routing == "precise" else APPROX_PRODUCER


def _tier_aware_approximate(config: StackConfig, plan: FleetPlan) -> bool:
    """Approximate routing with a CPU tier: a second producer and scorer for that tier."""
    cpu_tier = config.serving.kv_tier.cpu_offload and plan.role("decode").memory.cpu_tier_tokens > 0
    return cpu_tier and config.router.prefix_routing == "approximate"


def _producers(
    config: StackConfig, plan: FleetPlan, tokenizer_url: str
) -> tuple[list[Plugin], DataLayer | None]:
    """Token producer, prefix producers (approximate always, precise on KV events) and the data
    layer that feeds the precise one."""
    decode = plan.role("decode")
    block_size = config.serving.roles.decode.block_size
    plugins: list[Plugin] = [
        Plugin(
            name=TOKEN_PRODUCER,
            type="token-producer",
            parameters={
                "modelName": client_model_name(config.model),
                "vllm": {"url": tokenizer_url},
            },
        ),
        # The P/D decider reads the (default) approximate producer's match info, so it is always
        # present; its per-server capacity is the blocks a decode rank's HBM really holds.
        _approx_producer(APPROX_PRODUCER, block_size, decode.memory.kv_tokens, config),
    ]
    if _tier_aware_approximate(config, plan):
        # Tier-aware approximate routing: a second producer sized to the CPU tier, scored apart.
        plugins.append(
            _approx_producer(CPU_APPROX_PRODUCER, block_size, decode.memory.cpu_tier_tokens, config)
        )
    if config.router.prefix_routing != "precise":
        return plugins, None
    plugins += [
        Plugin(name=NOTIFICATION_SOURCE, type="endpoint-notification-source"),
        Plugin(
            name=PRECISE_PRODUCER,
            type="precise-prefix-cache-producer",
            parameters={
                # Must equal vLLM's --block-size, or no event block matches a request block.
                "tokenProcessorConfig": {"blockSizeTokens": block_size},
                # Engines report where each block lives (event medium gpu / cpu); a CPU hit
                # costs a host-to-device restore, so it scores below an HBM hit.
                "indexerConfig": {
                    "kvBlockIndexConfig": {
                        "inMemoryConfig": {
                            "size": _index_size(plan),
                            # Holders kept per block key (default 10): at least every rank
                            # endpoint times every tier, or popular prefixes lose holders.
                            "podCacheSize": plan.router.index_holders,
                        },
                        # The index's llm_d_router_epp_kv_cache_* metrics on the EPP's
                        # /metrics (off by default; the router dashboard reads them).
                        "enableMetrics": True,
                    },
                    "kvCacheBackendConfigs": [
                        {"name": "gpu", "weight": GPU_TIER_WEIGHT},
                        {"name": "cpu", "weight": CPU_TIER_WEIGHT},
                    ],
                },
                "speculativeIndexing": True,
                "kvEventsConfig": {
                    "topicFilter": "kv@",
                    "engineType": "vllm",
                    "concurrency": 8,
                    "discoverPods": True,
                    # The producer dials socketPort + i for the i-th pool target port (rank),
                    # which is where each pod's local rank i publishes.
                    "podDiscoveryConfig": {"socketPort": KV_EVENTS_PORT},
                },
            },
        ),
    ]
    data_layer = DataLayer(
        sources=[
            DataSource(plugin_ref=NOTIFICATION_SOURCE, extractors=[Extractor(plugin_ref=PRECISE_PRODUCER)])
        ]
    )
    return plugins, data_layer


def _load_producers(config: StackConfig) -> list[Plugin]:
    """With prefill autoscaling: the in-flight load producer, whose `llm_d_epp_inflight_tokens`
    (uncached prompt tokens in flight per endpoint) is prefill's scaling signal
    (llmd_fleet/layers/autoscaling/component.py). It discounts cached prefixes with the same producer's
    match info the scorers read (llm-d-router at the pinned tag,
    pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload: type
    `inflight-load-producer`, parameter `prefixMatchInfoProducerName`)."""
    scaling = config.serving.autoscaling
    if scaling is None or not scaling.prefill.enabled:
        return []
    return [
        Plugin(
            name=INFLIGHT_PRODUCER,
            type="inflight-load-producer",
            parameters={"prefixMatchInfoProducerName": _prefix_producer(config)},
        )
    ]


def _scorers(config: StackConfig, plan: FleetPlan) -> list[Plugin]:
    """Scorers, filters, the picker, and the P/D decider with its profile handler."""
    producer = _prefix_producer(config)
    return [
        Plugin(
            name=PREFIX_SCORER,
            type="prefix-cache-scorer",
            parameters={"prefixMatchInfoProducerName": producer},
        ),
        *(
            [
                Plugin(
                    name=CPU_PREFIX_SCORER,
                    type="prefix-cache-scorer",
                    parameters={"prefixMatchInfoProducerName": CPU_APPROX_PRODUCER},
                )
            ]
            if _tier_aware_approximate(config, plan)
            else []
        ),
        Plugin(name="kv-cache-utilization-scorer", type="kv-cache-utilization-scorer"),
        Plugin(name="queue-scorer", type="queue-scorer"),
        Plugin(name="active-request-scorer", type="active-request-scorer"),
        Plugin(
            name="no-hit-lru-scorer",
            type="no-hit-lru-scorer",
            parameters={"prefixMatchInfoProducerName": producer},
        ),
        *([Plugin(name=LORA_SCORER, type=LORA_SCORER)] if config.model.lora_adapters else []),
        Plugin(name="prefill-filter", type="prefill-filter"),
        Plugin(name="decode-filter", type="decode-filter"),
        Plugin(name="max-score-picker", type="max-score-picker"),
        _decider(config),
        Plugin(
            name="disagg-profile-handler",
            type="disagg-profile-handler",
            parameters={
                "profiles": {"decode": "decode", "prefill": "prefill"},
                "deciders": {"prefill": DECIDER},
            },
        ),
    ]


def _decider(config: StackConfig) -> Plugin:
    """The P/D decider (router.pdDecider): always-disagg sends every request through a prefill
    instance; prefix-based only those with at least nonCachedTokens uncached on decode."""
    threshold = config.router.remote_prefill_threshold()
    if config.router.decider() == "always" or threshold is None:
        return Plugin(name=DECIDER, type="always-disagg-pd-decider")
    return Plugin(name=DECIDER, type="prefix-based-pd-decider", parameters={"nonCachedTokens": threshold})


def _rollout_screener(config: StackConfig, plan: FleetPlan) -> list[Plugin]:
    """The DisaggregatedSet rollout screener (llm-d-router at the pinned tag, requestcontrol/screener/
    disaggregatedsetrollout): before any scheduling profile runs it keeps one revision whose
    every role has a Ready pod, so a request's prefill and decode pods always share a revision
    (a KV layout or transfer path may change between revisions, and decode's
    kv_load_failure_policy fail would fail the request). It fails closed (503) while no revision
    has every role Ready (docs/architecture.md#rollouts-never-pair-revisions). Weighted by
    decode, the role that holds the agents' sessions and bounds the fleet's concurrency
    (`max-role`, decode listed first so it also wins a tie)."""
    roles = [r.name for r in sorted(plan.roles, key=lambda r: r.name != "decode")]
    if len(roles) < 2:
        return []
    return [
        Plugin(
            name=ROLLOUT_SCREENER,
            type="disaggregatedset-rollout-screener",
            parameters={
                "scope": {"labelSelector": f"{DS_NAME_LABEL}={config.serving.name}"},
                "revisionGating": {
                    "mode": "max-role",
                    "requireRoles": {"values": roles},
                    "revisionLabelKey": DS_REVISION_LABEL,
                    "roleLabelKey": DS_ROLE_LABEL,
                },
            },
        )
    ]


def _profiles(config: StackConfig, plan: FleetPlan) -> tuple[list[PluginRef], list[PluginRef], list[Plugin]]:
    """The prefill and decode scheduling profiles, and the plugins only the decode profile adds
    (the p2p source producer, session affinity)."""
    router, tier = config.router, config.serving.kv_tier
    plugins: list[Plugin] = []
    decode_profile = [
        PluginRef(plugin_ref="decode-filter"),
        PluginRef(plugin_ref=PREFIX_SCORER, weight=PREFIX_WEIGHT),
        PluginRef(plugin_ref="active-request-scorer", weight=LOAD_WEIGHT),
        PluginRef(plugin_ref="kv-cache-utilization-scorer", weight=LOAD_WEIGHT),
        PluginRef(plugin_ref="no-hit-lru-scorer", weight=NO_HIT_WEIGHT),
    ]
    if _tier_aware_approximate(config, plan):
        decode_profile.append(PluginRef(plugin_ref=CPU_PREFIX_SCORER, weight=CPU_PREFIX_WEIGHT))
    if tier.cpu_offload and tier.peer_to_peer:
        # Names the worker that holds a request's prefix, so the decode sidecar pulls it from
        # that peer's CPU tier instead of recomputing it.
        plugins.append(
            Plugin(
                name=P2P_PRODUCER,
                type="p2p-source-producer",
                parameters={
                    "prefixMatchInfoProducerName": _prefix_producer(config),
                    "prefillProfileName": "prefill",
                    "minCachedTokenDelta": P2P_MIN_CACHED_TOKEN_DELTA,
                },
            )
        )
    if router.session_affinity.enabled:
        plugins += _session_plugins(router)
        decode_profile.append(PluginRef(plugin_ref=SESSION_SCORER, weight=SESSION_WEIGHT))
        if router.session_affinity.token_header is not None:
            decode_profile.append(PluginRef(plugin_ref=SESSION_TOKEN_SCORER, weight=SESSION_TOKEN_WEIGHT))
    lora = [PluginRef(plugin_ref=LORA_SCORER, weight=LORA_WEIGHT)] if config.model.lora_adapters else []
    decode_profile += [*lora, PluginRef(plugin_ref="max-score-picker")]
    prefill_profile = [
        PluginRef(plugin_ref="prefill-filter"),
        PluginRef(plugin_ref=PREFIX_SCORER, weight=PREFIX_WEIGHT),
        PluginRef(plugin_ref="queue-scorer", weight=LOAD_WEIGHT),
        PluginRef(plugin_ref="kv-cache-utilization-scorer", weight=LOAD_WEIGHT),
        *lora,
        PluginRef(plugin_ref="max-score-picker"),
    ]
    return prefill_profile, decode_profile, plugins


def session_key_sources(router: RouterConfig) -> list[dict[str, str]]:
    """Where the session key comes from, first match wins: the client's header, its cookie (via
    the session-id producer) and the coding agent's own session header (via agent-identity)."""
    session = router.session_affinity
    sources = [{"header": session.header}]
    if session.cookie is not None:
        sources.append({"attribute": SESSION_COOKIE_ATTRIBUTE})
    if session.agent_identity:
        sources.append({"attribute": AGENT_IDENTITY_ATTRIBUTE})
    return sources


def _session_plugins(router: RouterConfig) -> list[Plugin]:
    """The session-affinity scorer keyed by `session_key_sources`, the plugins that publish its
    attribute sources, and the scorer that returns an endpoint token to the client."""
    session = router.session_affinity
    plugins: list[Plugin] = []
    if session.agent_identity:
        plugins.append(
            Plugin(
                name=AGENT_IDENTITY,
                type="agent-identity",
                parameters={"additionalSessionHeaders": list(session.agent_headers)}
                if session.agent_headers
                else None,
            )
        )
    if session.cookie is not None:
        plugins.append(
            Plugin(
                name=SESSION_COOKIE_PRODUCER,
                type="session-id-producer",
                parameters={"cookieName": session.cookie},
            )
        )
    plugins.append(
        Plugin(
            name=SESSION_SCORER,
            type="session-affinity-scorer",
            parameters={
                "strategy": "session_id",
                "sessionIdConfig": {
                    "sources": session_key_sources(router),
                    "evictionTtlSeconds": session.ttl_seconds,
                },
            },
        )
    )
    if session.token_header is not None:
        plugins.append(
            Plugin(
                name=SESSION_TOKEN_SCORER,
                type="session-affinity-scorer",
                parameters={
                    "strategy": "encoded_endpoint_header",
                    "encodedEndpointHeaderConfig": {"header": session.token_header},
                },
            )
        )
    return plugins


def _admission(config: StackConfig, plan: FleetPlan) -> list[Plugin]:
    """The probabilistic admitter (an Admitter: it runs before scheduling, flow control or not),
    with the curve the plan derives: nothing shed at nominal load, everything at the gate."""
    admission = plan.router.admission
    if not config.router.probabilistic_admission or admission is None:
        return []
    return [
        Plugin(
            name=ADMITTER,
            type="probabilistic-admitter",
            parameters={
                "queueDepthThreshold": QUEUE_DEPTH_THRESHOLD,
                "kvCacheUtilThreshold": KV_CACHE_UTIL_THRESHOLD,
                "power": admission.power,
                "k": admission.k,
            },
        )
    ]


def _flow_control(config: StackConfig, plan: FleetPlan) -> tuple[list[str], list[Plugin], FlowControl | None]:
    """The flowControl feature gate, its policy plugins and the bands (none when it is off)."""
    router = config.router
    if not router.flow_control:
        return [], [], None
    fairness_plugin = _fairness_plugin(router, plan)
    fairness = fairness_plugin.name
    plugins = [
        fairness_plugin,
        Plugin(name="fcfs-ordering-policy", type="fcfs-ordering-policy"),
        # Saturated = queues building or KV caches nearly full; then bands start queueing.
        Plugin(
            name=SATURATION,
            type="utilization-detector",
            parameters={
                "queueDepthThreshold": QUEUE_DEPTH_THRESHOLD,
                "kvCacheUtilThreshold": KV_CACHE_UTIL_THRESHOLD,
            },
        ),
    ]
    band_bytes = dict(plan.router.band_max_bytes)
    flow_control = FlowControl(
        # Queued request bodies are bounded in bytes as well as in count, below the EPP's memory
        # limit (the plan sizes that limit to hold them): ~195k-token prompts make 14,000 queued
        # requests ~11 GB.
        max_bytes=str(plan.router.queue_max_bytes),
        max_requests=sum(c.max_requests for c in router.priority_classes),
        # A queued agent turn that waited this long is better failed than served.
        default_request_ttl="300s",
        priority_bands=[
            PriorityBand(
                priority=c.priority,
                max_requests=c.max_requests,
                max_bytes=str(band_bytes[c.priority]),
                fairness_policy_ref=fairness,
                ordering_policy_ref="fcfs-ordering-policy",
            )
            for c in sorted(router.priority_classes, key=lambda c: -c.priority)
        ],
        saturation_detector=SaturationDetectorRef(plugin_ref=SATURATION),
    )
    return ["flowControl"], plugins, flow_control


def _approx_producer(name: str, block_size: int, tokens_per_rank: int, config: StackConfig) -> Plugin:
    return Plugin(
        name=name,
        type="approx-prefix-cache-producer",
        parameters={
            "autoTune": False,
            "blockSizeTokens": block_size,
            "lruCapacityPerServer": max(1, tokens_per_rank // block_size),
            "maxPrefixTokensToMatch": config.serving.roles.decode.max_model_len,
        },
    )


def _index_size(plan: FleetPlan) -> int:
    """Block keys the precise index must hold: every rank's HBM and CPU-tier blocks, at the most
    instances each role can run (an autoscaled role starts at its minimum and grows)."""
    block = 64
    total = 0
    for role in plan.roles:
        ranks = role.max_instances * role.data_parallel
        total += ranks * (role.memory.kv_tokens + role.memory.cpu_tier_tokens) // block
    return max(1, total)


def needs_experimental_plugins(config: EndpointPickerConfig) -> bool:
    """Whether the config names a plugin the pinned picker registers only behind
    `--allow-experimental-plugins` (`EXPERIMENTAL_TYPES`: the ones llm-d-router marks Alpha)."""
    return any(p.type in EXPERIMENTAL_TYPES for p in config.plugins)


def epp_cpus(plan: FleetPlan, requests_per_second: float) -> int:
    """CPU per EPP replica (plan/epp.py) at the most pods the roles can run."""
    return epp_cpus_for(sum(r.max_instances * r.lws_size for r in plan.roles), requests_per_second)
