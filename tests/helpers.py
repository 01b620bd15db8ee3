"""Helpers shared by test modules (no test module imports another)."""

import re
import tomllib
from typing import Any

from tests.support import REPO

MATRIX = REPO / "images" / "versions.toml"
NOT_VERSIONS = {"chart", "repository", "url", "base_repository", "cuda_arch"}
VERSION_SHAPE = re.compile(r"^(v?\d+(\.\d+)+([-+.~][0-9A-Za-z.]+)*|[0-9a-f]{7,64}|sha256:[0-9a-f]{64})$")
# Capabilities `baseline` lets a container add (Pod Security Standards, "Capabilities").
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", ()), *spec["containers"]]


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    found = [f"host namespace {k}" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    found += [f"hostPath volume {v['name']}" for v in spec.get("volumes", ()) if "hostPath" in v]
    for c in _containers(spec):
        context = c.get("securityContext") or {}
        if context.get("privileged"):
            found.append(f"{c['name']} privileged")
        added = set((context.get("capabilities") or {}).get("add") or ())
        found += [f"{c['name']} adds {cap}" for cap in sorted(added - BASELINE_CAPABILITIES)]
        found += [f"{c['name']} hostPort" for p in c.get("ports", ()) if p.get("hostPort")]
    return found


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    found = baseline_violations(spec)
    pod = spec.get("securityContext") or {}
    found += [
        f"volume {v['name']}" for v in spec.get("volumes", ()) if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    for c in _containers(spec):
        context = c.get("securityContext") or {}
        name = c["name"]
        if not context.get("runAsNonRoot", pod.get("runAsNonRoot")):
            found.append(f"{name} may run as root")
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            found.append(f"{name} runs as UID 0")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name} allows privilege escalation")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or ()):
            found.append(f"{name} does not drop ALL")
        if set(capabilities.get("add") or ()) - {"NET_BIND_SERVICE"}:
            found.append(f"{name} adds capabilities")
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name} has no seccomp profile")
    return found


def matrix_raw() -> dict[str, Any]:
    return tomllib.loads(MATRIX.read_text())


def matrix_versions(raw: dict[str, Any]) -> dict[str, list[str]]:
    """Every version string of the matrix -> the keys that pin it."""
    found: dict[str, list[str]] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, str) and path[-1] not in NOT_VERSIONS and VERSION_SHAPE.match(node):
            found.setdefault(node, []).append(".".join(path))

    walk(raw, ())
    return found


def version_pattern(version: str) -> re.Pattern[str]:
    """`version` as a whole token: 9.87 matches in "9.87 or newer" and "k8s-9.87", never inside
    9.87.2, 19.87 or v9.87 (v9.87 is a version of its own and listed separately if pinned)."""
    return re.compile(r"(?<![0-9A-Za-z_.])" + re.escape(version) + r"(?![0-9A-Za-z_]|\.[0-9A-Za-z])")
