"""The engine-configuration check's project side: which engines to build, the negative controls, and
the lines it prints (vLLM runs in devtools/vllm_check/checker.py and engine_config.py).

An engine is one `vllm serve` argv + env as the extraction renders it (one per role and worker
index); its model is the stack's vendored config.json (llmd_fleet/models/). An engine is accepted
when vLLM builds its configuration (engine_config.py) and vLLM's MoE oracle runs the weights with
its MoE backends (checker.py). Each negative control is a rendered engine changed in one way vLLM
must refuse, with the words its refusal must contain.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from devtools.vllm_check.lines import CommandLine, Origin
from llmd_fleet.models import VendoredConfig, vendored_config

# The model the controls that need bf16 weights and no MTP layer run with (the quickstart's), and
# the context it serves there (stacks/Pulumi.quickstart-h100.yaml maxModelLen), so that a base
# engine serving a longer window does not refuse the control for its length first.
BF16_MODEL = "deepseek-ai/DeepSeek-V2-Lite-Chat"
BF16_MODEL_LEN = "32768"
# The model the attention-backend controls run with (FP8 block weights, MLA with a DSA indexer).
FP8_MODEL = "zai-org/GLM-5.2-FP8"

# What cannot be reached without a GPU, each with its reason (docs/vllm-check.md).
NOT_CHECKED: tuple[tuple[str, str], ...] = (
    (
        "an EP size that does not divide the experts",
        "vLLM 0.33 spreads the remainder over the first ranks (expert_map_manager.determine_expert_map) "
        "and refuses an uneven split only with EPLB, inside FusedMoE's constructor, which allocates the "
        "layer on the GPU; a ParallelConfig refusal stands in as the parallel-config control",
    ),
    (
        "the MoE kernel's own support check (is_supported_config of the chosen experts class)",
        "it reads the FusedMoEConfig of a constructed layer and the device; the check stops at vLLM's "
        "oracle mapping of --moe-backend to a kernel family for the weights' quantization",
    ),
    (
        "which of FLASH_ATTN_MLA, FLASHMLA and FLASHINFER_MLA a dense-MLA engine gets",
        "their compiled kernels do not import without a GPU, so vLLM's selector passes over them here "
        "and picks the next valid backend (TRITON_MLA for the quickstart); the engine's block size and "
        "KV dtype are still checked against the backend it picks and, for FlashMLA-sparse, against the "
        "backend the pod runs",
    ),
    (
        "the reasoning parser's token ids and the tokenizer",
        "they need the checkpoint's tokenizer files, which are not vendored; the parser's name is "
        "checked against vLLM's registry by the argument check",
    ),
    (
        "memory: KV blocks, CUDA graphs, NVSHMEM/DeepEP buffers, weight loading",
        "vLLM profiles these on the GPU after the weights load",
    ),
    (
        "NIXL/UCX, NCCL and DeepEP on the fabric",
        "they need the NICs and GPUs; the fabric preflight covers them on the cluster",
    ),
)


@dataclass(frozen=True)
class Engine:
    """One engine to build: the rendered line and the vendored model it serves."""

    line: CommandLine
    model_dir: str

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line.to_json(), "model_dir": self.model_dir}


@dataclass(frozen=True)
class Control:
    """A negative control: an engine vLLM must refuse, with words its message must contain."""

    case: str
    engine: Engine
    expect: str


@dataclass(frozen=True)
class Verdict:
    """What vLLM said about one engine: None when accepted, else its message."""

    refused: str | None
    detail: dict[str, Any]


def model_of(line: CommandLine) -> str:
    return line.argv[2] if len(line.argv) > 2 else ""


def engine_for(line: CommandLine) -> Engine | None:
    vendored = vendored_config(model_of(line))
    return None if vendored is None else Engine(line, str(vendored.directory))


def with_flag(argv: Sequence[str], flag: str, value: str | None) -> tuple[str, ...]:
    """argv with `flag` set to `value` (replaced where given, else appended); None removes it."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == flag:
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            i += 2 if takes_value else 1
            continue
        out.append(argv[i])
        i += 1
    return tuple(out if value is None else [*out, flag, value])


def _control(case: str, base: CommandLine, model: str, flags: dict[str, str | None], expect: str) -> Control:
    vendored: VendoredConfig | None = vendored_config(model)
    if vendored is None:
        raise ValueError(f"no vendored config.json for {model} (llmd_fleet/models/)")
    argv: tuple[str, ...] = (*base.argv[:2], model, *base.argv[3:])
    for flag, value in flags.items():
        argv = with_flag(argv, flag, value)
    origin = Origin(
        stack=f"control: {case}", role=base.origin.role, container=base.origin.container, worker=0
    )
    line = CommandLine(origin=origin, argv=argv, env=base.env, pod_ports=base.pod_ports)
    return Control(case, Engine(line, str(vendored.directory)), expect)


def negative_controls(base: CommandLine) -> list[Control]:
    """The controls, each derived from a rendered engine (`base`, worker 0 of a stack)."""
    mtp = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    return [
        _control(
            "deep_gemm on bf16 weights",
            base,
            BF16_MODEL,
            {"--speculative-config": None, "--moe-backend": "deep_gemm", "--max-model-len": BF16_MODEL_LEN},
            "is not supported for unquantized MoE",
        ),
        _control(
            "a block size FlashMLA refuses",
            base,
            FP8_MODEL,
            {"--attention-backend": "FLASHMLA_SPARSE", "--block-size": "16"},
            "block_size not supported",
        ),
        _control(
            "MTP on a model without next-token layers",
            base,
            BF16_MODEL,
            {"--moe-backend": None, "--speculative-config": mtp, "--max-model-len": BF16_MODEL_LEN},
            "Unsupported speculative method: 'mtp'",
        ),
        _control(
            "a world size larger than the node's GPUs (stands in for the EP split, see not checked)",
            base,
            BF16_MODEL,
            {
                "--speculative-config": None,
                "--moe-backend": None,
                "--tensor-parallel-size": "16",
                "--max-model-len": BF16_MODEL_LEN,
            },
            "larger than the number of available GPUs",
        ),
        _control(
            "a KV-cache dtype the attention backend refuses",
            base,
            FP8_MODEL,
            {"--attention-backend": "FLASHMLA_SPARSE", "--kv-cache-dtype": "fp8_e5m2"},
            "kv_cache_dtype not supported",
        ),
        # What `redundantExperts` renders, less --enable-eplb: vLLM's ParallelConfig must see the
        # --eplb-config the renderer writes (config/parallel.py refuses spares without EPLB).
        _control(
            "redundant experts without expert-parallel load balancing",
            base,
            FP8_MODEL,
            {"--enable-eplb": None, "--eplb-config": '{"num_redundant_experts":32}'},
            "but EPLB is not enabled",
        ),
    ]


def verdict(config: dict[str, Any], moe: str | None) -> Verdict:
    """Combine the configuration's result (engine_config.py) and the MoE oracle's (checker.py)."""
    if "error" in config:
        return Verdict(str(config["error"]), config)
    if "refused" in config:
        return Verdict(str(config["refused"]), config)
    if moe is not None:
        return Verdict(moe, {"stage": "MoE oracle"})
    return Verdict(None, dict(config.get("accepted") or {}))


def stack_line(stack: str, version: str, verdicts: Sequence[Verdict], rebuilt: Sequence[str]) -> str:
    accepted = sum(1 for v in verdicts if v.refused is None)
    line = (
        f"engine config: {stack}: {accepted} of {len(verdicts)} engines accepted by vLLM {version}'s "
        "configuration"
    )
    if rebuilt:
        line += f" (config.json partly rebuilt: {', '.join(rebuilt)})"
    return line


def control_line(control: Control, result: Verdict) -> tuple[str, bool]:
    """The control's line and whether it came out as expected (refused, for its reason)."""
    case = f"engine config (negative control): {control.case}"
    if result.refused is None:
        return f"{case}: ACCEPTED, expected a refusal containing {control.expect!r}", False
    ok = control.expect in result.refused
    line = f"{case}: refused: {result.refused}"
    return (line if ok else f"{line} (FAILED: expected a refusal containing {control.expect!r})"), ok
