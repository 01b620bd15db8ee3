"""Throughput and cost of the fleet: step times from the hardware and the model. Pure.

A decode step and a prefilled token each cost the sum of their parts (docs/fleet-scale.md
"Throughput and cost" derives every term):

- decode step (one rank, B sequences, 1 + k positions each with k = mtpTokens):
  compute (B (1 + k) x FLOPs per position / (dense peak x flops_efficiency))
  + HBM reads (weights touched + B x KV read per sequence, / (HBM bandwidth x hbm_efficiency))
  + the EP all-to-all (B (1 + k) x k_top copies of each token's hidden state out and back, the
  share on other nodes over the NIC, the share on other GPUs of the node over NVLink) x (1 - the
  overlap its backend achieves). The step emits 1 + a + ... + a^k tokens per sequence, `a` the
  family's published MTP acceptance (`MTP_ACCEPTANCE`).
- prefill (one rank, per prompt token): the computed share (1 - cache hit) x (FLOPs of the token
  at its mean causal position + the all-to-all, once per destination node with DeepEP's normal
  kernels, x (1 - overlap)) + the KV transfer of the token to the decode pool over the NIC.
- the fleet emits the lesser of the decode pool's output and the prefill pool's input converted
  to output (output / input per turn); the term that dominates the binding stage is the limit.

The fitted constants are in `CALIBRATION` (each with the runs it is fitted on); every other figure
is a datasheet (`GPUS`) or model-card figure. `tests/plan/test_throughput.py` reproduces every
calibration run (`tests/plan/calibration_runs.py`) within 0.75-1.33.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmd_fleet.models import FAMILIES, Acceptance, ModelDescription
from llmd_fleet.plan.memory import GIB, KvBytesPerToken, kv_bytes_per_token, param_counts, total_params

if TYPE_CHECKING:
    from llmd_fleet.plan.fleet import FleetPlan
    from llmd_fleet.stack.model import StackConfig


@dataclass(frozen=True)
class Constant:
    """A constant of the throughput model: its value, unit and source (for a fitted one, the runs
    it is fitted on)."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Gpu:
    """A GPU's datasheet figures the model reads (`GPUS`), with their source."""

    hbm_bytes_per_s: float
    hbm_gb: float
    fp8_dense_flops: float
    bf16_dense_flops: float
    nvlink_bytes_per_s: float
    """NVLink bandwidth per GPU and direction (half the datasheet's bidirectional figure)."""
    source: str


GPUS: dict[str, Gpu] = {
    "H100-80GB": Gpu(
        3.35e12,
        80,
        1979e12,
        989e12,
        450e9,
        "NVIDIA H100 datasheet, SXM column: GPU memory 80 GB, bandwidth 3.35 TB/s, FP8 Tensor Core "
        "3,958 and BF16 1,979 teraFLOPS marked 'with sparsity' (dense is half: 1,979 and 989), "
        "NVLink 900 GB/s (both directions)",
    ),
    "H200-141GB": Gpu(
        4.8e12,
        141,
        1979e12,
        989e12,
        450e9,
        "NVIDIA H200 datasheet, SXM column: 141 GB, 4.8 TB/s, FP8 Tensor Core 3,958 and BF16 1,979 "
        "teraFLOPS 'with sparsity' (dense 1,979 and 989, the same Hopper tensor cores as H100), "
        "NVLink 900 GB/s",
    ),
    "H800-80GB": Gpu(
        3.35e12,
        80,
        1979e12,
        989e12,
        200e9,
        "NVIDIA H800 SXM5 product brief: 80 GB HBM3 at 3.35 TB/s, FP8 3,958 and BF16 1,979 teraFLOPS "
        "'with sparsity' (dense 1,979 and 989), NVLink 400 GB/s (both directions; the H100's 900 "
        "GB/s cut for export)",
    ),
}

_STUDY = "llm-d's 64 x H200 GLM-5.2 study"
_RUN = "llm-d's 544 x H100 GLM-5.2 run"
_SGL = "the SGLang team's 96 x H100 DeepSeek-V3 run (lm-sys.github.io blog/2025-05-05-large-scale-ep.md)"

# The fitted constants: at most one per kind the model cannot read off a datasheet. Fitted by
# least squares of log(model / published) over the calibration runs only
# (`tests/plan/calibration_runs.py` lists them, `tests/plan/test_throughput.py` asserts every
# ratio); `docs/fleet-scale.md` prints the residuals.
CALIBRATION: dict[str, Constant] = {
    "flops_efficiency": Constant(
        0.53,
        "share of dense tensor-core peak a GEMM or attention kernel achieves",
        f"fitted on {_SGL} prefill (cold random prompts: the only runs whose computed tokens are "
        f"known), with {_STUDY} and {_RUN}; decode compute uses the same share. Attention terms "
        "count against the BF16 peak, GEMMs against the FP8 peak",
    ),
    "hbm_efficiency": Constant(
        0.83,
        "share of datasheet HBM bandwidth a decode step's reads achieve",
        f"fitted on {_STUDY} 3P1D ITL p50 19.1 ms and {_SGL} decode",
    ),
    "nic_efficiency": Constant(
        0.80,
        "share of NIC line rate an all-to-all or KV transfer achieves",
        "the preflight probe's default minimum efficiency (serving.preflight.minEfficiency); kept, "
        "not fitted: the fit moves it together with the overlaps, which it cannot tell apart",
    ),
    "overlap_deepep_low_latency": Constant(
        0.43,
        "share of the decode all-to-all hidden behind compute (DeepEP low-latency kernels)",
        f"fitted on {_SGL} decode (two-batch overlap) and {_RUN} decode",
    ),
    "overlap_deepep_high_throughput": Constant(
        0.39,
        "share of the prefill all-to-all hidden behind compute (DeepEP normal kernels)",
        f"fitted on {_SGL} prefill (two-batch overlap)",
    ),
}

# Backends without a fitted overlap run their all-to-all as a blocking collective: nothing hidden.
OVERLAP_OF_BACKEND: dict[str, str] = {
    "deepep_low_latency": "overlap_deepep_low_latency",
    "deepep_high_throughput": "overlap_deepep_high_throughput",
}

# The prefix-cache hit rate the plan assumes when `--cache-hit` is not given: an assumption, not
# a fitted constant. The GLM-5.2 runs publish no hit rate; fitted with the constants above they
# imply about 58% (tests/plan/calibration_runs.py GLM_RUNS_CACHE_HIT, docs/fleet-scale.md).
ASSUMED_CACHE_HIT = Constant(
    0.90,
    "share of prompt tokens served from the prefix cache",
    "assumed (the plan's earlier default, kept): the agentic trace's 99.6% median prefix reuse bounds "
    "it from above, the GLM-5.2 runs' fit (about 58%) from below; `llmd-fleet plan --cache-hit` "
    "replaces it with a measured one",
)


# Each family's published acceptance (components/llmd_fleet/models/<family>), keyed by card name.
MTP_ACCEPTANCE: dict[str, Acceptance] = {
    card.description.name: family.mtp_acceptance
    for family in FAMILIES
    if family.mtp_acceptance is not None
    for card in family.cards
}


def mtp_acceptance(m: ModelDescription) -> Acceptance | None:
    """The family's published acceptance, None when the plan has none (no MTP gain)."""
    return MTP_ACCEPTANCE.get(m.name)


def tokens_per_step_of(m: ModelDescription, k: int) -> float:
    """Accepted tokens per decode step: 1 + a + ... + a^k; 1 without speculative tokens or
    without a published acceptance for the family."""
    acc = mtp_acceptance(m)
    if k <= 0 or acc is None:
        return 1.0
    return sum(acc.a**i for i in range(k + 1))


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
    mtp_draft: int = 0
    """Speculative tokens per step (mtpTokens): a decode step runs 1 + mtp_draft positions."""
    all2all_backend: str = "deepep_low_latency"

    @property
    def ranks(self) -> int:
        return self.instances * self.ranks_per_instance

    @property
    def nodes(self) -> float:
        return self.ranks / self.gpus_per_node


@dataclass(frozen=True)
class Turn:
    """One agentic turn as the throughput model sees it: its context, input and output tokens, the
    share of its prompt already cached (`cache_hit`) and what the P/D decider leaves to decode."""

    context_tokens: int
    """Tokens a decoding sequence holds (mean input + answer)."""
    input_tokens: int
    output_tokens: int
    cache_hit: float
    local_share: float = 0.0
    """Share of turns the P/D decider leaves to decode (uncached suffix below its threshold)."""
    local_prefill_tokens: float = 0.0
    """Prompt tokens decode computes per turn, averaged over every turn (`local_prefill`)."""


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def local_prefill(p50: int, p90: int, cache_hit: float, threshold: int | None) -> tuple[float, float]:
    """(share of turns, uncached prompt tokens per turn) the prefix P/D decider leaves to decode:
    a turn whose uncached suffix is below `threshold` is prefilled by its decode pod
    (llm-d-router's prefix decider, `router.nonCachedTokensForRemotePrefill`). The input is the
    log-normal through p50 and p90 (as `context_mean`), its uncached suffix input x (1 - hit), so
    ln(suffix) ~ N(mu + ln(1 - hit), sigma): the share is Phi(z) and the tokens the partial mean
    E[X; X < T] = exp(mu' + sigma^2 / 2) Phi(z - sigma), z = (ln T - mu') / sigma. None (the
    always decider) or no uncached tokens: nothing."""
    if not threshold or cache_hit >= 1:
        return 0.0, 0.0
    sigma = max(1e-9, math.log(p90 / p50) / 1.2816)
    mu = math.log(p50) + math.log(1 - cache_hit)
    z = (math.log(threshold) - mu) / sigma
    return _phi(z), math.exp(mu + sigma**2 / 2) * _phi(z - sigma)


def attended_tokens(m: ModelDescription, context: float) -> float:
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


def overlap(backend: str, cal: dict[str, Constant] | None = None) -> float:
    """The share of the all-to-all an MoE backend hides behind compute (`OVERLAP_OF_BACKEND`); 0 for
    one with no fitted overlap."""
    name = OVERLAP_OF_BACKEND.get(backend)
    return _c(name, cal) if name else 0.0


def nic_bytes_per_s_per_gpu(role: RoleShape, cal: dict[str, Constant] | None = None) -> float:
    """What one GPU of the role can send over the fabric: the node's NIC line rate shared by its
    GPUs, times the fitted `nic_efficiency`."""
    return role.nics_per_node * role.nic_gbps * 1e9 / 8 * _c("nic_efficiency", cal) / role.gpus_per_node


def hidden_bytes(m: ModelDescription) -> float:
    """One token's trip to an expert and back: the hidden state out in fp8 with one float32 scale
    per 128 values (DeepEP dispatch) and back in bf16 (combine)."""
    return m.hidden_size * (1 + 4 / 128) + 2 * m.hidden_size


def decode_flops_per_position(m: ModelDescription, context: int) -> tuple[float, float]:
    """(fp8 GEMM FLOPs, bf16 attention FLOPs) of one decoded position: 2 x active parameters; the
    DSA indexer over the context (fp8); absorbed MLA over the attended tokens,
    2 x heads x (2 kv_lora_rank + qk_rope_head_dim) per key on every layer (bf16)."""
    indexer = 2 * m.index_n_heads * m.index_head_dim * context * m.indexer_layers
    mla = 2 * m.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return 2 * active_params(m) + indexer, mla * attended_tokens(m, context) * m.num_hidden_layers


def prefill_flops_per_token(m: ModelDescription, position: float) -> tuple[float, float]:
    """(fp8 GEMM FLOPs, bf16 attention FLOPs) of one computed prompt token at causal `position`:
    2 x active parameters; with DSA the indexer over the earlier tokens and absorbed sparse MLA
    over the top-k; without DSA, MLA's prefill path (MHA over decompressed keys and values,
    2 x heads x (qk_nope + qk_rope + v_head) per key, every layer)."""
    if m.sparse_attention:
        gemm, attention = decode_flops_per_position(m, int(position))
        return gemm, attention
    per_key = 2 * m.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    return 2 * active_params(m), per_key * position * m.num_hidden_layers


def _compute_s(gpu: Gpu, flops: tuple[float, float], cal: dict[str, Constant] | None) -> float:
    eff = _c("flops_efficiency", cal)
    return flops[0] / (gpu.fp8_dense_flops * eff) + flops[1] / (gpu.bf16_dense_flops * eff)


def _local_share(role: RoleShape) -> tuple[float, float]:
    """(share of expert copies on other nodes, share on other GPUs of the same node)."""
    ep, gpn = role.expert_parallel, role.gpus_per_node
    if ep <= 1:
        return 0.0, 0.0
    on_node = min(ep, gpn)
    return max(0.0, 1 - on_node / ep), (on_node - 1) / ep


def decode_a2a_s_per_position(role: RoleShape, m: ModelDescription, cal: dict[str, Constant] | None) -> float:
    """All-to-all seconds of one decoded position, before overlap: one copy per routed expert
    (DeepEP low-latency sends per expert), every MoE layer."""
    remote, local = _local_share(role)
    copies = m.num_experts_per_tok * hidden_bytes(m) * m.moe_layers
    return copies * (remote / nic_bytes_per_s_per_gpu(role, cal) + local / role.gpu.nvlink_bytes_per_s)


def prefill_a2a_s_per_token(role: RoleShape, m: ModelDescription, cal: dict[str, Constant] | None) -> float:
    """All-to-all seconds of one computed prompt token, before overlap: DeepEP's normal kernels
    send a token once per destination node over the NIC (expected distinct other nodes among its
    top-k experts, uniform routing) and forward it to each expert's GPU over NVLink."""
    nodes = role.expert_parallel / role.gpus_per_node
    per_layer = hidden_bytes(m) * m.moe_layers
    nic = 0.0
    if nodes > 1:
        other_nodes = (nodes - 1) * (1 - (1 - 1 / nodes) ** m.num_experts_per_tok)
        nic = other_nodes * per_layer / nic_bytes_per_s_per_gpu(role, cal)
    _, local = _local_share(role)
    if role.expert_parallel > 1:
        local = 1 - 1 / role.expert_parallel  # every copy off this GPU crosses NVLink once
    return nic + m.num_experts_per_tok * local * per_layer / role.gpu.nvlink_bytes_per_s


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of a rank: the sequences it runs, the tokens it emits and the time each part
    (compute, HBM reads, all-to-all) takes."""

    seqs: float
    tokens_per_step: float
    compute_s: float
    hbm_s: float
    a2a_s: float
    """After the backend's overlap."""

    @property
    def seconds(self) -> float:
        return self.compute_s + self.hbm_s + self.a2a_s

    @property
    def tokens_per_s(self) -> float:
        return self.seqs * self.tokens_per_step / self.seconds

    @property
    def binds(self) -> str:
        terms = {
            "decode compute": self.compute_s,
            "decode HBM": self.hbm_s,
            "decode EP all-to-all": self.a2a_s,
        }
        return max(terms, key=lambda k: terms[k])


def decode_step(
    role: RoleShape,
    kv: KvBytesPerToken,
    m: ModelDescription,
    turn: Turn,
    cal: dict[str, Constant] | None = None,
) -> DecodeStep:
    """One decode step of one rank at the sequences whose KV fits at the mean context (at most
    maxNumSeqs)."""
    seqs = role.kv_tokens / turn.context_tokens
    if role.max_num_seqs:
        seqs = min(seqs, role.max_num_seqs)
    positions = seqs * (1 + role.mtp_draft)
    compute = positions * _compute_s(role.gpu, decode_flops_per_position(m, turn.context_tokens), cal)
    read = role.weights_read_gib * GIB + seqs * kv_read_bytes(kv, m, turn.context_tokens)
    hbm = read / (role.gpu.hbm_bytes_per_s * _c("hbm_efficiency", cal))
    a2a = positions * decode_a2a_s_per_position(role, m, cal) * (1 - overlap(role.all2all_backend, cal))
    return DecodeStep(seqs, tokens_per_step_of(m, role.mtp_draft), compute, hbm, a2a)


@dataclass(frozen=True)
class PrefillToken:
    """Seconds one prefill rank spends per prompt token, by part."""

    compute_s: float
    a2a_s: float
    kv_transfer_s: float

    @property
    def seconds(self) -> float:
        return self.compute_s + self.a2a_s + self.kv_transfer_s

    @property
    def tokens_per_s(self) -> float:
        return 1 / self.seconds

    @property
    def binds(self) -> str:
        terms = {
            "prefill FLOPs": self.compute_s,
            "prefill EP all-to-all": self.a2a_s,
            "KV transfer (NIC)": self.kv_transfer_s,
        }
        return max(terms, key=lambda k: terms[k])


def prefill_token(
    role: RoleShape,
    kv: KvBytesPerToken,
    m: ModelDescription,
    turn: Turn,
    cal: dict[str, Constant] | None = None,
    transfer: bool = True,
) -> PrefillToken:
    """Per prompt token of `turn.input_tokens`: the computed share (1 - cache hit) pays FLOPs at
    its mean causal position (the middle of the uncached suffix) and the all-to-all; every token's
    KV leaves for the decode pool (`transfer`)."""
    miss = 1 - turn.cache_hit
    position = turn.input_tokens * (1 + turn.cache_hit) / 2
    compute = miss * _compute_s(role.gpu, prefill_flops_per_token(m, position), cal)
    a2a = miss * prefill_a2a_s_per_token(role, m, cal) * (1 - overlap(role.all2all_backend, cal))
    kv_s = kv.total / nic_bytes_per_s_per_gpu(role, cal) if transfer else 0.0
    return PrefillToken(compute, a2a, kv_s)


@dataclass(frozen=True)
class Throughput:
    """The fleet's tokens per second by stage, as output tokens per second."""

    decode: DecodeStep
    prefill: PrefillToken
    ceilings: tuple[tuple[str, float], ...]
    """(stage, output tok/s the fleet could reach were it the only limit)."""
    output_per_input: float
    local_prefill_s_per_output: float = 0.0
    """Seconds a decode rank spends per output token on the prompt tokens the P/D decider
    leaves to decode (0 with the always decider)."""

    @property
    def decode_per_rank(self) -> float:
        return self.decode.tokens_per_s

    @property
    def decode_seqs_per_rank(self) -> float:
        return self.decode.seqs

    @property
    def decode_tokens_per_step(self) -> float:
        return self.decode.tokens_per_step

    @property
    def decode_step_s(self) -> float:
        return self.decode.seconds

    @property
    def prefill_per_rank(self) -> float:
        return self.prefill.tokens_per_s

    @property
    def stage(self) -> str:
        return min(self.ceilings, key=lambda c: c[1])[0]

    @property
    def limit(self) -> str:
        """The term that dominates the binding stage's time."""
        return self.decode.binds if self.stage == "decode" else self.prefill.binds

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
    """The fleet's token rates for one turn shape: each pool's ceiling (decode's output, prefill's
    input converted to output) with the decode step and prefilled token they come from."""
    ratio = turn.output_tokens / turn.input_tokens
    step = decode_step(decode, kv, m, turn, cal)
    token = prefill_token(prefill, kv, m, turn, cal)
    # The prompt tokens the decider leaves to decode: computed on a decode rank at the end of the
    # context (the suffix), its all-to-all with decode's backend, no KV transfer; charged per
    # output token. The prefill pool then takes only the other turns.
    local_s = 0.0
    if turn.local_prefill_tokens:
        per_token = _compute_s(decode.gpu, prefill_flops_per_token(m, turn.input_tokens), cal)
        per_token += decode_a2a_s_per_position(decode, m, cal) * (1 - overlap(decode.all2all_backend, cal))
        local_s = turn.local_prefill_tokens / turn.output_tokens * per_token
    decode_rate = 1 / (1 / step.tokens_per_s + local_s)
    remote = max(1e-9, 1 - turn.local_share)
    ceilings = (
        ("decode", decode.ranks * decode_rate),
        ("prefill", prefill.ranks * token.tokens_per_s * ratio / remote),
    )
    return Throughput(step, token, ceilings, ratio, local_s)


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
        all2all_backend=r.all2all_backend,
    )


@dataclass(frozen=True)
class FleetFigures:
    """What `llmd-fleet plan` prints about throughput: the fleet's rates against the declared
    workload's demand, and the cost figures where a GPU-hour price is known."""

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
    (measured) or the assumed one (`ASSUMED_CACHE_HIT`). None when the plan has no model description."""
    sizing = plan.model
    if sizing is None:
        return None
    w = config.workload
    roles = config.serving.roles
    window = min(roles.prefill.max_model_len, roles.decode.max_model_len, sizing.context_window)
    context = int(context_mean(w.input_tokens_p50, w.input_tokens_p90, window)) + w.output_tokens
    hit = ASSUMED_CACHE_HIT.value if cache_hit is None else cache_hit
    share, local = local_prefill(
        w.input_tokens_p50, w.input_tokens_p90, hit, config.router.remote_prefill_threshold()
    )
    return Turn(context, context - w.output_tokens, w.output_tokens, hit, share, local)


def decode_kv(config: StackConfig, m: ModelDescription) -> KvBytesPerToken:
    """The KV a decode rank caches per token: without speculative tokens (mtpTokens 0) the MTP
    layer has none."""
    mtp = config.serving.roles.decode.mtp_tokens > 0
    return kv_bytes_per_token(m, config.model.kv_cache_dtype, mtp=mtp)


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


def why_not_modelled(config: StackConfig, plan: FleetPlan) -> str | None:
    """Why the step-time model cannot size the stack, naming the config key it lacks; None when
    it can, or for the simulator (whose timing is the simulator's own settings)."""
    if config.serving.engine == "simulator":
        return None
    sizing = plan.model
    if sizing is None or sizing.description is None or sizing.kv is None:
        return (
            f"model.id {config.model.id} has no model card (components/llmd_fleet/models/): the step times "
            "need its architecture (hidden size, heads, MLA ranks, experts per layer), which "
            "totalParamsB and kvBytesPerToken do not give"
        )
    for name in ("prefill", "decode"):
        group_name = getattr(config.serving.roles, name).node_group
        group = config.fleet.node_groups[group_name]
        if str(group.accelerator) not in GPUS:
            return (
                f"fleet.nodeGroups.{group_name}.accelerator {group.accelerator} has no datasheet "
                f"entry (plan/throughput.py GPUS: {', '.join(GPUS)})"
            )
        if group.nic_gbps is None:
            return (
                f"fleet.nodeGroups.{group_name}.nicGbps is unset: the all-to-all and the KV "
                "transfer need the NIC rate"
            )
    return None


def plan_throughput(
    config: StackConfig,
    plan: FleetPlan,
    gpu_hour_usd: float | None = None,
    cache_hit: float | None = None,
) -> FleetFigures | None:
    """The stack's figures, or None when the model cannot size it (`role_shapes`); costs only
    with a price per GPU-hour (`llmd-fleet plan --gpu-hour-usd`), at a measured prefix-cache hit
    rate when given (`--cache-hit`), else the assumed one."""
    shapes = role_shapes(config, plan)
    turn = declared_turn(config, plan, cache_hit)
    sizing = plan.model
    if shapes is None or turn is None or sizing is None or sizing.kv is None or sizing.description is None:
        return None
    prefill, decode = shapes
    w = config.workload
    t = fleet_throughput(prefill, decode, decode_kv(config, sizing.description), sizing.description, turn)
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
    """Seconds to decode one answer: output tokens / tokens per step x the modelled step time of
    the stack's own model, GPU and decode layout; without a model of the stack (`role_shapes`),
    the published 19.1 ms step of GLM-5.2 on H200 at its 2.95 tokens per step."""
    f = plan_throughput(config, plan)
    if f is None:
        mtp = 2.95 if config.serving.roles.decode.mtp_tokens else 1.0
        return config.workload.output_tokens / mtp * PUBLISHED_STEP_S
    t = f.throughput
    return config.workload.output_tokens / t.decode_tokens_per_step * t.decode_step_s


# llm-d's 64 x H200 GLM-5.2 study, 3P1D: ITL p50 19.1 ms (one step carrying every accepted token).
PUBLISHED_STEP_S = 0.0191
