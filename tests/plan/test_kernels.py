"""MoE kernels follow the weights' quantization on the model card (plan/kernels.py)."""

import dataclasses

import pytest

from llmd_fleet.layers.serving.vllm import engine_env, vllm_serve_argv
from llmd_fleet.models import WeightQuantization
from llmd_fleet.models.deepseek_v2 import DEEPSEEK_V2_LITE_CHAT
from llmd_fleet.models.glm5 import GLM_5_2_FP8
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.kernels import (
    FP8_MOE_BACKENDS,
    UNQUANTIZED_MOE_BACKENDS,
    MoeKernels,
    backend_problems,
    moe_kernels,
)
from llmd_fleet.stack.parse import parse_config
from tests.support import STACKS_DIR


def test_deep_gemm_runs_block_fp8_only():
    assert "deep_gemm" in FP8_MOE_BACKENDS and "deep_gemm" not in UNQUANTIZED_MOE_BACKENDS
    assert moe_kernels(DEEPSEEK_V2_LITE_CHAT, mtp=False) == MoeKernels()
    assert moe_kernels(None, mtp=True) == MoeKernels()
    fp8 = moe_kernels(GLM_5_2_FP8, mtp=False)
    assert fp8 == MoeKernels(backend="deep_gemm", drafter_backend=None, deep_gemm=True)
    # A per-tensor FP8 checkpoint is not DeepGEMM's 128 x 128 blocks: left to vLLM.
    per_tensor = dataclasses.replace(GLM_5_2_FP8, quantization=WeightQuantization(method="fp8"))
    assert moe_kernels(per_tensor, mtp=False) == MoeKernels()


def test_the_drafter_gets_a_kernel_for_its_own_weights():
    # The card cannot read GLM-5.2-FP8's unconverted modules: the drafter may be either.
    assert moe_kernels(GLM_5_2_FP8, mtp=True).drafter_backend == "triton"
    quantized = dataclasses.replace(
        GLM_5_2_FP8, quantization=WeightQuantization("fp8", (128, 128), not_converted=("lm_head",))
    )
    assert moe_kernels(quantized, mtp=True).drafter_backend is None
    skipped = dataclasses.replace(
        GLM_5_2_FP8, quantization=WeightQuantization("fp8", (128, 128), not_converted=("model.layers.78",))
    )
    assert moe_kernels(skipped, mtp=True).drafter_backend == "triton"


def test_backend_problems_name_the_refused_pairs():
    assert backend_problems(GLM_5_2_FP8, "deep_gemm", "triton", mtp=True) == []
    assert backend_problems(DEEPSEEK_V2_LITE_CHAT, None, None, mtp=False) == []
    assert backend_problems(DEEPSEEK_V2_LITE_CHAT, "deep_gemm", None, mtp=False) == [
        "--moe-backend deep_gemm is not a kernel vLLM runs unquantized MoE layers with "
        "(DeepSeek-V2-Lite-Chat); it accepts aiter, auto, batched_triton, flashinfer_cutlass, "
        "flashinfer_trtllm, humming, marlin, triton"
    ]
    (drafter,) = backend_problems(GLM_5_2_FP8, "deep_gemm", None, mtp=True)
    assert drafter.startswith(
        "the MTP drafter's experts (model.layers.78.mlp.experts) may be unquantized and vLLM runs them "
        "with moe_backend deep_gemm"
    )


@pytest.mark.parametrize(
    ("stack", "backend", "deep_gemm"), [("quickstart-h100", None, None), ("onprem-h100", "deep_gemm", "1")]
)
def test_rendered_flags_follow_the_card(stack, backend, deep_gemm):
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    config = stack_config(read_stack_file(STACKS_DIR, stack))
    plan = plan_fleet(config)
    for name in ("prefill", "decode"):
        role = getattr(config.serving.roles, name)
        argv = vllm_serve_argv(config.model, role, plan.role(name), config.serving.kv_tier)
        assert (argv[argv.index("--moe-backend") + 1] if "--moe-backend" in argv else None) == backend
        env = {e["name"]: e.get("value") for e in engine_env(role, plan.role(name), 45, None)}
        assert env.get("VLLM_USE_DEEP_GEMM") == deep_gemm


def test_a_model_without_a_card_leaves_the_kernel_to_vllm(raw_config):
    raw_config["model"]["id"] = "example-org/Some-MoE-FP8"
    config = parse_config(raw_config)
    plan = plan_fleet(config)
    assert plan.role("decode").moe == MoeKernels()
    assert "--moe-backend" not in vllm_serve_argv(
        config.model, config.serving.roles.decode, plan.role("decode")
    )
