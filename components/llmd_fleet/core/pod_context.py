"""Security facts several builders share: Pod Security admission labels, checkov skip annotations
and the reasons behind every privilege the fleet keeps (pure, no Pulumi).

Every check that checkov (the pinned release in images/versions.toml [tools]) still fails on a
rendered object carries a skip annotation on that object, `checkov.io/skip<n>: <check>=<reason>`,
numbered from 1. The reasons live here, next to each other, so docs/security.md and the objects
say the same thing; `make checkov` fails on any failure without one (infra/checkov_scan).
"""

import re
from collections.abc import Sequence
from typing import Literal, NamedTuple

from llmd_fleet.versions import versions

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
_PSA = "pod-security.kubernetes.io"


def pod_security_labels(level: PodSecurityLevel) -> dict[str, str]:
    """Namespace labels that make Pod Security admission enforce `level`, pinned to the policy
    version of the fleet's minimum Kubernetes minor (a cluster upgrade never tightens it
    silently). A namespace below `restricted` also audits against `restricted`, so the audit log
    names what would still have to change; a `baseline` namespace warns as well."""
    version = f"v{versions().kubernetes.minimum}"
    labels = {f"{_PSA}/enforce": level, f"{_PSA}/enforce-version": version}
    if level != "restricted":
        labels |= {f"{_PSA}/audit": "restricted", f"{_PSA}/audit-version": version}
    if level == "baseline":
        labels |= {f"{_PSA}/warn": "restricted", f"{_PSA}/warn-version": version}
    return labels


class Skip(NamedTuple):
    """One checkov check an object fails on purpose, and the constraint that makes it so."""

    check: str
    reason: str


_CHECK_ID = re.compile(r"CKV2?_K8S_[0-9]+")
SKIP_PREFIX = "checkov.io/skip"


def skip_annotations(skips: Sequence[Skip]) -> dict[str, str]:
    """`checkov.io/skip1`, `skip2`, ... in the given order. checkov splits the value at `=` into
    check and reason (checkov/kubernetes/kubernetes_utils.py get_skipped_checks), so a reason
    must not contain one; each check appears once."""
    seen: set[str] = set()
    annotations: dict[str, str] = {}
    for number, skip in enumerate(skips, 1):
        if not _CHECK_ID.fullmatch(skip.check):
            raise ValueError(f"not a checkov Kubernetes check id: {skip.check!r}")
        if skip.check in seen:
            raise ValueError(f"{skip.check} is skipped twice")
        if "=" in skip.reason or not skip.reason.strip() or "\n" in skip.reason:
            raise ValueError(f"{skip.check}: a reason is one line without '=' (got {skip.reason!r})")
        seen.add(skip.check)
        annotations[f"{SKIP_PREFIX}{number}"] = f"{skip.check}={skip.reason}"
    return annotations


# --- Reasons shared by several objects ------------------------------------------------------------

IMAGE_BY_TAG = Skip(
    "CKV_K8S_43",
    "images are pinned once in images/versions.toml by release tag (digest where upstream publishes "
    "one); an upstream tag's digest cannot be resolved offline and a built image gets its digest at push",
)
PULL_IF_NOT_PRESENT = Skip(
    "CKV_K8S_15",
    "IfNotPresent on a pinned release tag: with Always every pod restart would depend on the "
    "registry being reachable",
)

# --- The serving pods (prefill and decode engines) -------------------------------------------------

ENGINE_CAPABILITIES = ("IPC_LOCK", "SYS_RAWIO")
"""All the engine adds after dropping ALL: IPC_LOCK lets NIXL/UCX and NVSHMEM pin (mlock and
register) their transfer buffers beyond the memlock limit; SYS_RAWIO lets NVSHMEM's IBGDA and
GDRCopy map the NIC and GPU BARs."""


def engine_security_context() -> dict[str, object]:
    """The security context of a container that registers fabric memory (the engines, the fabric
    preflight probe). Added capabilities take effect only for UID 0 (Kubernetes sets no ambient
    capabilities) and the built wide-EP image defaults to a non-root user, so it runs as root
    explicitly, whichever image it is: root with only ENGINE_CAPABILITIES, no privilege escalation
    and a read-only root file system."""
    return {
        "runAsUser": 0,
        "runAsGroup": 0,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": list(ENGINE_CAPABILITIES)},
    }


_ENGINE_ROOT = (
    "vLLM runs as UID 0 because IPC_LOCK and SYS_RAWIO take effect only for root: Kubernetes "
    "grants no ambient capabilities to a non-root process"
)
ENGINE_SKIPS = (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip("CKV_K8S_23", _ENGINE_ROOT),
    Skip("CKV_K8S_40", _ENGINE_ROOT),
)
"""What every serving pod keeps, on every target (its capabilities: `capability_skips`)."""

_ENGINE_CAPABILITY_REASON = (
    "vllm drops ALL and adds IPC_LOCK (NIXL/UCX and NVSHMEM pin their transfer buffers) and "
    "SYS_RAWIO (NVSHMEM IBGDA and GDRCopy map NIC and GPU BARs)"
)


def capability_skips(sidecar_reason: str = "") -> tuple[Skip, ...]:
    """Added capabilities (CKV_K8S_25); the reason names every container that adds some (the
    fabric's sidecars give theirs: `Fabric.sidecar_capability_reason`)."""
    reason = _ENGINE_CAPABILITY_REASON + (f"; {sidecar_reason}" if sidecar_reason else "")
    return (Skip("CKV_K8S_25", reason),)


# --- The router ------------------------------------------------------------------------------------

EPP_SKIPS = (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip(
        "CKV_K8S_38",
        "the endpoint picker watches pods, its InferencePool and objectives and holds its leader "
        "lease through the API server",
    ),
)
TOKENIZER_SKIPS = (IMAGE_BY_TAG, PULL_IF_NOT_PRESENT)

# --- Container security contexts ---------------------------------------------------------------------

RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}
NON_ROOT_UID = 65532
"""The UID the router's containers run as (distroless `nonroot`; no passwd entry needed)."""


def restricted_pod_context(uid: int = NON_ROOT_UID) -> dict[str, object]:
    """The pod-level security context of the fleet's non-root pods (router, tokenizer, agentic
    API): non-root `uid`, RuntimeDefault seccomp."""
    return {"runAsNonRoot": True, "runAsUser": uid, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}


def restricted_container_context(uid: int = NON_ROOT_UID) -> dict[str, object]:
    """A container security context Pod Security `restricted` admits: non-root, no privilege
    escalation, every capability dropped, read-only root, RuntimeDefault seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }
