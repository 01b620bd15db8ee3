"""The MoE kernels a served model runs with, from its weights' quantization on the model card. Pure.

vLLM picks a MoE kernel per MoE layer by that layer's quantization, and `--moe-backend` names one
kernel family for every layer. vLLM 0.33 maps the name per quantization and raises `ValueError` at
model construction, after the weights are loaded, for a name outside the layer's map
(`model_executor/layers/fused_moe/oracle/unquantized.py` map_unquantized_backend,
`oracle/fp8.py` map_fp8_backend). `deep_gemm` is in the FP8 map only (`config/kernel.py`: DeepGEMM
runs block-FP8 weights): on a bf16 checkpoint it stops every rank. The choice therefore follows
the checkpoint:

- block-FP8 (128 x 128) weights: `--moe-backend deep_gemm` and `VLLM_USE_DEEP_GEMM=1`, as llm-d's
  wide-EP guide runs GLM/DeepSeek FP8 checkpoints on H100 (`auto` may pick another kernel family);
- unquantized weights, another quantization, or a model without a card: no `--moe-backend` and no
  DeepGEMM variable (vLLM's `auto` picks a kernel per layer; on SM90 the unquantized oracle puts
  Triton first);
- the MTP drafter (`SpeculativeConfig.moe_backend`, which otherwise inherits `--moe-backend`):
  its experts are the checkpoint's layer `num_hidden_layers`; when the card cannot say they are
  quantized (a `modules_to_not_convert` entry, or an unreadable list), the drafter gets `triton`,
  the one kernel family both maps accept on CUDA.
"""

from dataclasses import dataclass

from llmd_fleet.models import ModelDescription, WeightQuantization

# The names each of vLLM 0.33's MoE oracles accepts for `--moe-backend` (and a drafter's
# moe_backend): the keys of its map function, plus the names it lets fall through to `auto`.
# unquantized.py select_unquantized_moe_backend: "auto", "humming" and "marlin" fall through
# ("quantization-only; an unquantized layer ... falls through to auto instead of erroring").
UNQUANTIZED_MOE_BACKENDS = frozenset(
    {
        "auto",
        "humming",
        "marlin",
        "triton",
        "batched_triton",
        "flashinfer_trtllm",
        "flashinfer_cutlass",
        "aiter",
    }
)
# fp8.py select_fp8_moe_backend: every name but "auto" goes through map_fp8_backend.
FP8_MOE_BACKENDS = frozenset(
    {
        "auto",
        "triton",
        "deep_gemm",
        "cutlass",
        "flashinfer_trtllm",
        "flashinfer_cutlass",
        "marlin",
        "humming",
        "aiter",
        "hpc",
    }
)
_ACCEPTED: dict[str | None, frozenset[str]] = {None: UNQUANTIZED_MOE_BACKENDS, "fp8": FP8_MOE_BACKENDS}
DEEP_GEMM = "deep_gemm"
# DeepGEMM's grouped GEMM takes 128 x 128 FP8 weight blocks (vllm/utils/deep_gemm.py).
DEEP_GEMM_BLOCK = (128, 128)
# In both maps: a drafter whose experts may or may not be quantized.
EITHER_QUANTIZATION = "triton"


@dataclass(frozen=True)
class MoeKernels:
    """What the engine's command line and environment say about MoE kernels."""

    backend: str | None = None
    """`--moe-backend`; None renders no flag (vLLM's `auto`)."""
    drafter_backend: str | None = None
    """`--speculative-config` moe_backend; None: the drafter inherits `backend`."""
    deep_gemm: bool = False
    """Render `VLLM_USE_DEEP_GEMM=1`."""


def accepted_backends(method: str | None) -> frozenset[str] | None:
    """The `--moe-backend` names vLLM 0.33 accepts for MoE layers quantized with `method` (None:
    unquantized); None for a method this table does not cover."""
    return _ACCEPTED.get(method)


def drafter_module(description: ModelDescription) -> str:
    """The MTP drafter's experts: DeepSeek-style checkpoints ship the MTP layer as layer
    `num_hidden_layers` (vLLM's DeepSeekMTP loads `model.layers.<num_hidden_layers>`)."""
    return f"model.layers.{description.num_hidden_layers}.mlp.experts"


def drafter_quantization(quantization: WeightQuantization, module: str) -> tuple[str | None, ...]:
    """The quantizations the drafter's experts may have: one when the card knows, both when not."""
    known = quantization.quantized(module)
    if known is None:
        return (quantization.method, None)
    return (quantization.method,) if known else (None,)


def moe_kernels(description: ModelDescription | None, mtp: bool) -> MoeKernels:
    """The MoE kernels for a model's card (None: no card) and whether the engine runs an MTP
    drafter."""
    if description is None:
        return MoeKernels()
    quantization = description.quantization
    if quantization.method != "fp8" or quantization.weight_block_size != DEEP_GEMM_BLOCK:
        return MoeKernels()
    drafter = None
    if mtp and quantization.quantized(drafter_module(description)) is not True:
        drafter = EITHER_QUANTIZATION
    return MoeKernels(backend=DEEP_GEMM, drafter_backend=drafter, deep_gemm=True)


def backend_problems(
    description: ModelDescription, backend: str | None, drafter_backend: str | None, mtp: bool
) -> list[str]:
    """Why vLLM 0.33 would refuse these MoE backends for the card's weights (empty when it
    would not): the main layers' quantization, and with MTP every quantization the drafter's
    experts may have."""
    quantization = description.quantization
    main = backend or "auto"
    problems = []
    accepted = accepted_backends(quantization.method)
    kind = quantization.method or "unquantized"
    if accepted is not None and main not in accepted:
        problems.append(
            f"--moe-backend {main} is not a kernel vLLM runs {kind} MoE layers with "
            f"({description.name}); it accepts {', '.join(sorted(accepted))}"
        )
    if mtp:
        drafter = drafter_backend or main
        module = drafter_module(description)
        for method in drafter_quantization(quantization, module):
            accepted = accepted_backends(method)
            if accepted is None or drafter in accepted:
                continue
            if drafter == main and method == quantization.method:
                continue  # the main layers' problem, reported above
            problems.append(
                f"the MTP drafter's experts ({module}) may be {method or 'unquantized'} and vLLM runs "
                f"them with moe_backend {drafter} (the speculative config's, else --moe-backend), "
                f"which it refuses there; it accepts {', '.join(sorted(accepted))}"
            )
    return problems
