"""Throughput and cost of the fleet: a step-time model calibrated on published runs. Pure.

Every constant the figures depend on is in `CALIBRATION`, with its source and, for the fitted
ones, the published figure it is fitted to; GPU datasheet figures are in `GPUS`.
docs/fleet-scale.md "Throughput and cost" derives each formula. tests/test_throughput.py
reproduces every published figure of `PUBLISHED` from its configuration within +-25%.

Model (per rank, DP attention + wide EP):
- decode step time = (weights read + KV read of the step's sequences) / (HBM bandwidth x
  decode_hbm_efficiency); a step emits mtp_tokens_per_step tokens per sequence; the sequences
  per rank are the KV tokens per rank / tokens per context (at most maxNumSeqs).
- prefill: FP8 dense FLOPs x prefill_flops_efficiency / (2 x active parameters) computed tokens
  per second; a prompt computes only its uncached share (1 - cache-hit rate).
- ceilings from the fabric: the EP all-to-all (dispatch fp8 + combine bf16 hidden states to the
  top-k experts' ranks on other nodes, every MoE layer) and the prefill-to-decode KV transfer
  (the prompt's KV bytes over NIXL), both at nicGbps x nicsPerNode x nic_efficiency per node.
- the fleet's output is the least of: decode, prefill (as output: input rate x output / input
  per turn), KV transfer and all-to-all; the binding one is the limiting resource.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.plan.memory import GIB, KvBytesPerToken, param_counts, total_params
from llmd_fleet.plan.model_card import ModelDescription

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import FleetPlan


@dataclass(frozen=True)
class Constant:
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Gpu:
    hbm_bytes_per_s: float
    hbm_gb: float
    fp8_dense_flops: float
    source: str


GPUS: dict[str, Gpu] = {
    "H100-80GB": Gpu(
        3.35e12,
        80,
        1979e12,
        "NVIDIA H100 datasheet, SXM column: GPU memory 80 GB, bandwidth 3.35 TB/s, FP8 Tensor Core "
        "3,958 teraFLOPS marked 'with sparsity'; dense is half, 1,979",
    ),
    "H200-141GB": Gpu(
        4.8e12,
        141,
        1979e12,
        "NVIDIA H200 datasheet, SXM column: 141 GB, 4.8 TB/s, FP8 Tensor Core 3,958 teraFLOPS "
        "'with sparsity' (dense 1,979, the same Hopper tensor cores as H100)",
    ),
}

_STUDY = "llm-d's 64 x H200 GLM-5.2 study"
_RUN = "llm-d's 544 x H100 GLM-5.2 run"

CALIBRATION: dict[str, Constant] = {
    "decode_step_seconds": Constant(
        0.0191,
        "s per decode step (published, not fitted)",
        f"{_STUDY}, 3P1D: ITL p50 19.1 ms, read as one decode step carrying every accepted MTP "
        "token (an assumption); the fit target of decode_hbm_efficiency",
    ),
    "mtp_tokens_per_step": Constant(
        2.95,
        "tokens per decode step per sequence (published)",
        f"{_STUDY}: MTP acceptance ~2.95 tokens per step (3 speculative tokens)",
    ),
    "decode_hbm_efficiency": Constant(
        0.80,
        "share of datasheet HBM bandwidth a decode step achieves",
        f"fitted: the step-time model gives the ITL p50 19.1 ms of {_STUDY} 3P1D (DEP16 decode on "
        "H200 at the trace's mean context): 20.0 ms, +5%",
    ),
    "prefill_flops_efficiency": Constant(
        0.08,
        "share of FP8 dense FLOPs a prefill rank achieves on computed tokens",
        f"fitted (with prefill_cache_hit): {_STUDY} 3P2D 7,598 output tok/s (prefill binds there) "
        "and 3P1D ~431k input tok/s; the share is low because the FLOPs counted leave out the "
        "chunking, all-to-all waits and cache loads of a prefill step",
    ),
    "prefill_cache_hit": Constant(
        0.90,
        "share of prompt tokens served from the prefix cache in the published runs",
        "assumed with the prefill efficiency (only their product is fitted): the published runs "
        "give no hit rate; the trace's 99.6% median reuse bounds it from above",
    ),
    "nic_efficiency": Constant(
        0.80,
        "share of NIC line rate a transfer achieves",
        "the preflight probe's default minimum efficiency (serving.preflight.minEfficiency); not fitted",
    ),
}


@dataclass(frozen=True)
class RoleShape:
    """What the model needs of one role (prefill or decode)."""

    instances: int
    ranks_per_instance: int
    gpus_per_node: int
    nics_per_node: int
    nic_gbps: float
    gpu: Gpu
    expert_parallel: int
    weights_read_gib: float
    """Weights a step reads per rank: all but the embeddings (gathered, not streamed)."""
    kv_tokens: int
    max_num_seqs: int | None
    mtp_draft: int = 3
    """Speculative tokens per step (mtpTokens): a decode step runs 1 + mtp_draft positions."""

    @property
    def ranks(self) -> int:
        return self.instances * self.ranks_per_instance

    @property
    def nodes(self) -> float:
        return self.ranks / self.gpus_per_node


@dataclass(frozen=True)
class Turn:
    context_tokens: int
    """Tokens a decoding sequence holds (mean input + answer)."""
    input_tokens: int
    output_tokens: int
    cache_hit: float


def attended_tokens(m: ModelDescription, context: int) -> int:
    """Cached tokens one query position's MLA reads: the indexer's top-k (index_topk) with DSA,
    the whole context without it (dense MLA)."""
    return min(context, m.index_topk) if m.sparse_attention else context


def kv_read_bytes(kv: KvBytesPerToken, m: ModelDescription, context: int) -> float:
    """KV bytes one sequence's decode step reads: with DSA the indexer scores every cached token
    on every indexer layer and sparse MLA reads the top-k; dense MLA reads every cached token on
    every layer."""
    indexer = context * kv.indexer_per_layer * kv.indexer_layers if m.sparse_attention else 0
    return indexer + attended_tokens(m, context) * kv.mla_per_layer * kv.mla_layers


def active_params(m: ModelDescription) -> float:
    """Parameters one token runs through: all but the routed experts it is not routed to."""
    p = param_counts(m)
    unrouted = (
        m.moe_layers * p.routed_experts_per_moe_layer * (1 - m.num_experts_per_tok / m.n_routed_experts)
    )
    return total_params(m) - p.embeddings - unrouted


def _c(name: str, calibration: dict[str, Constant] | None) -> float:
    return (calibration or CALIBRATION)[name].value


def tokens_per_step(role: RoleShape, cal: dict[str, Constant] | None = None) -> float:
    """Tokens a decode step emits per sequence: the published MTP acceptance with speculative
    tokens on (the study ran 3), one without."""
    return _c("mtp_tokens_per_step", cal) if role.mtp_draft else 1.0


def decode_step(
    role: RoleShape,
    kv: KvBytesPerToken,
    m: ModelDescription,
    turn: Turn,
    cal: dict[str, Constant] | None = None,
) -> tuple[float, float]:
    """(sequences per rank, step seconds)."""
    seqs = role.kv_tokens / turn.context_tokens
    if role.max_num_seqs:
        seqs = min(seqs, role.max_num_seqs)
    read = role.weights_read_gib * GIB + seqs * kv_read_bytes(kv, m, turn.context_tokens)
    return seqs, read / (role.gpu.hbm_bytes_per_s * _c("decode_hbm_efficiency", cal))


def decode_tokens_per_s(
    role: RoleShape,
    kv: KvBytesPerToken,
    m: ModelDescription,
    turn: Turn,
    cal: dict[str, Constant] | None = None,
) -> float:
    """Output tokens per second of one decode rank: sequences x MTP tokens per step / step time."""
    seqs, step = decode_step(role, kv, m, turn, cal)
    return seqs * tokens_per_step(role, cal) / step


def prefill_flops_per_token(m: ModelDescription, context: int) -> float:
    """FLOPs of one computed prompt token at position ~context: 2 x active parameters, plus the
    DSA indexer scoring every earlier token (2 x index_n_heads x index_head_dim per token, on
    the model's indexer layers), and absorbed MLA over the attended tokens (the top-k with DSA,
    the context without: 2 x heads x (kv_lora_rank + qk_rope_head_dim + kv_lora_rank) per key,
    every layer)."""
    indexer = 2 * m.index_n_heads * m.index_head_dim * context * m.indexer_layers
    mla_dims = 2 * m.kv_lora_rank + m.qk_rope_head_dim
    mla = 2 * m.num_attention_heads * mla_dims * attended_tokens(m, context) * m.num_hidden_layers
    return 2 * active_params(m) + indexer + mla


def prefill_tokens_per_s(
    role: RoleShape, m: ModelDescription, turn: Turn, cal: dict[str, Constant] | None = None
) -> float:
    """Input (prompt) tokens per second of one prefill rank: FP8 dense FLOPs x efficiency / FLOPs
    per computed token, over the uncached share of the prompt (1 - cache-hit rate)."""
    flops = role.gpu.fp8_dense_flops * _c("prefill_flops_efficiency", cal)
    computed = flops / prefill_flops_per_token(m, turn.context_tokens)
    return computed / max(1e-6, 1 - turn.cache_hit)


def nic_bytes_per_s_per_gpu(role: RoleShape, cal: dict[str, Constant] | None = None) -> float:
    return role.nics_per_node * role.nic_gbps * 1e9 / 8 * _c("nic_efficiency", cal) / role.gpus_per_node


def all_to_all_tokens_per_s(
    role: RoleShape, m: ModelDescription, cal: dict[str, Constant] | None = None
) -> float:
    """Tokens per second one rank can route through the EP all-to-all over its share of the NICs:
    per token and MoE layer, fp8 hidden state (+ one float32 scale per 128) out to the top-k
    experts and bf16 back, the share on other nodes (1 - gpusPerNode / EP) crossing the NIC."""
    remote = max(0.0, 1 - role.gpus_per_node / role.expert_parallel)
    if remote == 0:
        return float("inf")
    per_token = m.num_experts_per_tok * (m.hidden_size * (1 + 4 / 128) + 2 * m.hidden_size) * m.moe_layers
    return nic_bytes_per_s_per_gpu(role, cal) / (per_token * remote)


@dataclass(frozen=True)
class Throughput:
    """The fleet's tokens per second by resource, as output tokens per second."""

    decode_per_rank: float
    decode_seqs_per_rank: float
    decode_tokens_per_step: float
    decode_step_s: float
    prefill_per_rank: float
    ceilings: tuple[tuple[str, float], ...]
    """(resource, output tok/s the fleet could reach were it the only limit)."""
    output_per_input: float

    @property
    def limit(self) -> str:
        return min(self.ceilings, key=lambda c: c[1])[0]

    @property
    def output_per_s(self) -> float:
        return min(v for _, v in self.ceilings)

    @property
    def input_per_s(self) -> float:
        return self.output_per_s / self.output_per_input


def fleet_throughput(
    prefill: RoleShape,
    decode: RoleShape,
    kv: KvBytesPerToken,
    m: ModelDescription,
    turn: Turn,
    cal: dict[str, Constant] | None = None,
) -> Throughput:
    ratio = turn.output_tokens / turn.input_tokens
    seqs, step = decode_step(decode, kv, m, turn, cal)
    d = decode_tokens_per_s(decode, kv, m, turn, cal)
    p = prefill_tokens_per_s(prefill, m, turn, cal)
    mtp = tokens_per_step(decode, cal)
    # The KV transfer: every prompt token's KV leaves the prefill node and enters a decode node.
    kv_in = min(
        prefill.ranks * nic_bytes_per_s_per_gpu(prefill, cal),
        decode.ranks * nic_bytes_per_s_per_gpu(decode, cal),
    )
    kv_input = kv_in / kv.total
    # Decode runs (1 + draft) positions per step for mtp tokens accepted: all-to-all per output token.
    a2a_decode = decode.ranks * all_to_all_tokens_per_s(decode, m, cal) * mtp / (1 + decode.mtp_draft)
    a2a_prefill = prefill.ranks * all_to_all_tokens_per_s(prefill, m, cal) / max(1e-6, 1 - turn.cache_hit)
    ceilings: tuple[tuple[str, float], ...] = (
        ("decode HBM", decode.ranks * d),
        ("prefill FLOPs", prefill.ranks * p * ratio),
        ("KV transfer (NIC)", kv_input * ratio),
        ("decode EP all-to-all (NIC)", a2a_decode),
        ("prefill EP all-to-all (NIC)", a2a_prefill * ratio),
    )
    # An all-to-all within one node crosses no NIC (EP <= GPUs per node): no ceiling from it here.
    ceilings = tuple((name, value) for name, value in ceilings if math.isfinite(value))
    return Throughput(d, seqs, mtp, step, p, ceilings, ratio)


def context_mean(p50: int, p90: int, window: int) -> float:
    """Mean tokens of a served context: a log-normal through the declared p50 and p90
    (sigma = ln(p90 / p50) / 1.2816), truncated at the served window (longer turns are refused).
    KV occupancy follows the mean context, not the median."""
    sigma = max(1e-9, math.log(p90 / p50) / 1.2816)
    mu = math.log(p50)

    def phi(x: float) -> float:
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    z = (math.log(window) - mu) / sigma
    return math.exp(mu + sigma**2 / 2) * phi(z - sigma) / max(1e-12, phi(z))


def _role_shape(config: StackConfig, plan: FleetPlan, name: str) -> RoleShape | None:
    r = plan.role(name)  # type: ignore[arg-type]
    group = config.fleet.node_groups[r.node_group]
    gpu = GPUS.get(str(group.accelerator))
    w = r.memory.weights
    if gpu is None or w is None or group.nic_gbps is None:
        return None
    role = getattr(config.serving.roles, name)
    return RoleShape(
        instances=r.max_instances if r.autoscaled else r.instances,
        ranks_per_instance=r.data_parallel,
        gpus_per_node=r.gpus_per_node,
        nics_per_node=group.nics_per_node,
        nic_gbps=group.nic_gbps,
        gpu=gpu,
        expert_parallel=r.expert_parallel,
        weights_read_gib=w.total - w.embeddings,
        kv_tokens=r.memory.kv_tokens,
        max_num_seqs=getattr(role, "max_num_seqs", None),
        mtp_draft=getattr(role, "mtp_tokens", None) or 0,
    )


@dataclass(frozen=True)
class FleetFigures:
    throughput: Throughput
    turn: Turn
    gpus: int
    output_per_min: float
    input_per_min: float
    demand_output_per_min: float
    demand_input_per_min: float
    usd_per_m_output: float | None
    usd_per_m_input: float | None
    usd_per_agent_hour: float | None

    @property
    def headroom(self) -> float:
        """Capacity over the declared workload's output demand."""
        return self.output_per_min / self.demand_output_per_min


def declared_turn(config: StackConfig, plan: FleetPlan, cache_hit: float | None = None) -> Turn | None:
    """The declared workload's mean turn in the served window; the prefix-cache hit rate given
    (measured) or the calibration's assumed one. None when the plan has no model description."""
    sizing = plan.model
    if sizing is None:
        return None
    w = config.workload
    roles = config.serving.roles
    window = min(roles.prefill.max_model_len, roles.decode.max_model_len, sizing.context_window)
    context = int(context_mean(w.input_tokens_p50, w.input_tokens_p90, window)) + w.output_tokens
    hit = CALIBRATION["prefill_cache_hit"].value if cache_hit is None else cache_hit
    return Turn(context, context - w.output_tokens, w.output_tokens, hit)


def role_shapes(config: StackConfig, plan: FleetPlan) -> tuple[RoleShape, RoleShape] | None:
    """(prefill, decode) as the model needs them, or None when it cannot model the stack: the
    simulator, no model description, a GPU outside `GPUS` or a node group without its NIC rate."""
    sizing = plan.model
    if (
        config.serving.engine == "simulator"
        or sizing is None
        or sizing.description is None
        or sizing.kv is None
    ):
        return None
    prefill, decode = _role_shape(config, plan, "prefill"), _role_shape(config, plan, "decode")
    if prefill is None or decode is None:
        return None
    return prefill, decode


def plan_throughput(
    config: StackConfig,
    plan: FleetPlan,
    gpu_hour_usd: float | None = None,
    cache_hit: float | None = None,
) -> FleetFigures | None:
    """The stack's figures, or None when the model cannot size it (`role_shapes`); costs only
    with a price per GPU-hour (`llmd-fleet plan --gpu-hour-usd`), at a measured prefix-cache hit
    rate when given (`--cache-hit`), else the calibration's assumed one."""
    shapes = role_shapes(config, plan)
    turn = declared_turn(config, plan, cache_hit)
    sizing = plan.model
    if shapes is None or turn is None or sizing is None or sizing.kv is None or sizing.description is None:
        return None
    prefill, decode = shapes
    w = config.workload
    t = fleet_throughput(prefill, decode, sizing.kv, sizing.description, turn)
    gpus = (prefill.ranks + decode.ranks) if prefill.ranks + decode.ranks else plan.gpus
    requests_per_min = w.agents * w.requests_per_agent_minute
    out_min, in_min = t.output_per_s * 60, t.input_per_s * 60
    demand_out = requests_per_min * w.output_tokens
    # per agent the fleet serves: the declared agents, or fewer when it lacks the capacity
    served = min(w.agents, w.agents * out_min / demand_out)
    fleet_hour = gpus * gpu_hour_usd if gpu_hour_usd is not None else None
    return FleetFigures(
        throughput=t,
        turn=turn,
        gpus=gpus,
        output_per_min=out_min,
        input_per_min=in_min,
        demand_output_per_min=demand_out,
        demand_input_per_min=requests_per_min * turn.input_tokens,
        usd_per_m_output=None if fleet_hour is None else fleet_hour / (out_min * 60 / 1e6),
        usd_per_m_input=None if fleet_hour is None else fleet_hour / (in_min * 60 / 1e6),
        usd_per_agent_hour=None if fleet_hour is None else fleet_hour / served,
    )


def decode_answer_seconds(config: StackConfig, plan: FleetPlan) -> float:
    """Seconds to decode one answer: output tokens / tokens per step x the published step time
    (the workload checks keep the measured ITL; the step-time model above gives the capacity)."""
    del plan
    mtp = CALIBRATION["mtp_tokens_per_step"].value if config.serving.roles.decode.mtp_tokens else 1.0
    steps = config.workload.output_tokens / mtp
    return steps * CALIBRATION["decode_step_seconds"].value
