"""Remote code from a moving revision: what `llmd-fleet check --for-deploy` refuses, and what
`plan` and `render` warn about. Pure.

`model.trustRemoteCode` makes vLLM (and the router's and benchmark's tokenizers) import the model
repository's own Python. From a branch or tag (`main`) that code can change between the review and
the next pod start; from a 40-hex commit it cannot. vLLM 0.33 and transformers 5.20 know the
architectures the shipped stacks serve (DeepseekV2ForCausalLM, GlmMoeDsaForCausalLM), so they set
`trustRemoteCode: false`."""

import re

from llmd_fleet.config.model import ModelConfig
from llmd_fleet.core.problems import PROJECT, Problem

_COMMIT = re.compile(r"[0-9a-f]{40}")


def remote_code_problem(model: ModelConfig) -> Problem | None:
    """The problem with running the model repository's code, or None (no remote code, or a commit)."""
    if not model.trust_remote_code or _COMMIT.fullmatch(model.revision):
        return None
    return Problem(
        f"{PROJECT}:model.trustRemoteCode",
        f"runs {model.id}'s own Python (vllm --trust-remote-code) from revision {model.revision!r}, a "
        "branch or tag that can change under that name; set model.trustRemoteCode false where vLLM "
        "knows the architecture, or pin model.revision to a 40-hex commit",
    )
