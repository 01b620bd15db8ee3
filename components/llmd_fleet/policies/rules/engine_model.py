"""The engine and the model it serves: the MoE kernel fits the weights' quantization, and remote code
runs only from a pinned commit."""

import re
from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Resource, resource_rule
from llmd_fleet.policies.rules._k8s import WORKLOAD_TYPES
from llmd_fleet.policies.rules._serving import serving_roles

COMMIT = re.compile(r"[0-9a-f]{40}")


def _check_moe_backend(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    from llmd_fleet.models import description_for
    from llmd_fleet.plan.kernels import backend_problems

    for role in serving_roles([resource]):
        description = description_for(role.args.model or "")
        if description is None:
            continue  # no card: the pack does not know the weights (the renderer leaves `auto`)
        speculative = role.args.json_value("--speculative-config") or {}
        mtp = str(speculative.get("method") or "").endswith("mtp")
        drafter = speculative.get("moe_backend")
        for problem in backend_problems(
            description,
            role.args.value("--moe-backend"),
            drafter if isinstance(drafter, str) else None,
            mtp,
        ):
            report(f"{role.where()}: {problem}; every rank stops at model construction")


moe_backend_fits_weights = resource_rule(
    name="moe-backend-fits-weights",
    description="The vLLM MoE backend (--moe-backend, and the MTP drafter's) is one vLLM 0.33 runs the "
    "model's MoE layers with, given the weights' quantization on the model card.",
    remediation="Leave --moe-backend to the renderer (llmd_fleet/plan/kernels.py): deep_gemm only for "
    "block-FP8 weights, vLLM's auto for unquantized ones, and a drafter kernel that fits unquantized "
    "drafter experts.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_moe_backend,
    tags=["serving", "model"],
)


def moving_revision(revision: str | None) -> bool:
    """A revision that can change under the same name: a branch or tag, anything not a 40-hex commit
    (None: vLLM's default, the repository's `main`)."""
    return revision is None or not COMMIT.fullmatch(revision)


def _check_remote_code(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for role in serving_roles([resource]):
        if not role.args.bool_value("--trust-remote-code"):
            continue
        revision = role.args.value("--revision")
        code_revision = role.args.value("--code-revision") or revision
        if moving_revision(code_revision):
            report(
                f"{role.where()}: vllm serve {role.args.model} runs the repository's own Python "
                f"(--trust-remote-code) from revision {code_revision or 'main (the default)'}, which can "
                "change under that name; pin a 40-hex commit (model.revision) or drop trustRemoteCode"
            )


remote_code_pinned = resource_rule(
    name="remote-code-pinned",
    description="A vLLM engine that runs a model repository's Python (--trust-remote-code) loads it "
    "from a 40-hex commit, never from a branch or tag that can move.",
    remediation="Set `model.trustRemoteCode: false` when vLLM and transformers know the architecture, "
    "otherwise pin `model.revision` to the commit you reviewed.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_remote_code,
    tags=["serving", "supply-chain"],
)

POLICIES = [moe_backend_fits_weights, remote_code_pinned]
