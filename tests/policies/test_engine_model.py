"""The policy pack: the MoE kernel fits the weights, remote code only from a pinned commit."""

from tests.policies.helpers import DSET, edit_script, edited, one, violations

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_the_moe_backend_must_fit_the_weights(reference):
    assert violations("moe-backend-fits-weights", reference) == []
    dset = one(reference, DSET)
    # The same command line serving the bf16 quickstart model: DeepGEMM is FP8-only.
    bf16 = edited(
        reference,
        dset,
        edit_script(
            "decode", "vllm serve zai-org/GLM-5.2-FP8", "vllm serve deepseek-ai/DeepSeek-V2-Lite-Chat"
        ),
    )
    assert violations("moe-backend-fits-weights", bf16) == [
        "DisaggregatedSet llm-d/glm52 role decode: --moe-backend deep_gemm is not a kernel vLLM runs "
        "unquantized MoE layers with (DeepSeek-V2-Lite-Chat); it accepts aiter, auto, batched_triton, "
        "flashinfer_cutlass, flashinfer_trtllm, humming, marlin, triton; every rank stops at model "
        "construction"
    ]
    # The drafter inheriting deep_gemm while its experts may be unquantized.
    drafter = edited(reference, dset, edit_script("prefill", ',"moe_backend":"triton"', ""))
    (found,) = violations("moe-backend-fits-weights", drafter)
    assert found.startswith(
        "DisaggregatedSet llm-d/glm52 role prefill: the MTP drafter's experts (model.layers.78.mlp.experts) "
        "may be unquantized and vLLM runs them with moe_backend deep_gemm"
    )


def test_remote_code_needs_a_pinned_commit(reference):
    assert violations("remote-code-pinned", reference) == []
    dset = one(reference, DSET)
    remote = edited(
        reference,
        dset,
        edit_script("decode", "--shutdown-timeout", "--trust-remote-code \\\n  --shutdown-timeout"),
    )
    assert violations("remote-code-pinned", remote) == [
        "DisaggregatedSet llm-d/glm52 role decode: vllm serve zai-org/GLM-5.2-FP8 runs the repository's own "
        "Python (--trust-remote-code) from revision main, which can change under that name; pin a 40-hex "
        "commit (model.revision) or drop trustRemoteCode"
    ]

    def pinned(inputs):
        edit_script("decode", "--shutdown-timeout", "--trust-remote-code \\\n  --shutdown-timeout")(inputs)
        edit_script("decode", "--revision main", f"--revision {COMMIT}")(inputs)

    assert violations("remote-code-pinned", edited(reference, dset, pinned)) == []
