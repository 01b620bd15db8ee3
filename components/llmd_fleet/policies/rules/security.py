"""Workload security: no privileged or host-network pods outside the node drivers, secrets only by
reference, non-root router and sidecar, requests and limits on every container."""

import fnmatch
import re
from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import (
    HELM_RELEASE_TYPES,
    Resource,
    dig,
    parse_quantity,
    resource_rule,
    schema,
)
from llmd_fleet.policies.rules._k8s import (
    ROUTER_CONTAINER,
    SIDECAR_CONTAINER,
    WORKLOAD_TYPES,
    PodTemplate,
    containers,
    is_router,
    iter_strings,
    pod_templates,
)
from llmd_fleet.policies.rules._serve import parse_flags


def _exempt(template: PodTemplate, cfg: dict[str, Any]) -> bool:
    workload = template.workload
    if workload.namespace in cfg["allowedNamespaces"]:
        return True
    ident = f"{workload.kind}/{workload.namespace}/{workload.object_name}"
    return any(fnmatch.fnmatchcase(ident, pattern) for pattern in cfg["allowedWorkloads"])


def _check_privileged(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    forbidden_caps = set(cfg["forbiddenCapabilities"])
    for template in pod_templates(resource):
        if _exempt(template, cfg):
            continue
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if template.spec.get(field) is True:
                report(
                    f"{template.where()}: {field} is true; only allow-listed node drivers share the "
                    "host's namespaces"
                )
        for c in containers(template.spec):
            context = c.spec.get("securityContext") or {}
            if context.get("privileged") is True:
                report(f"{template.where()}: container {c.name} is privileged")
            added = {
                str(cap).upper().removeprefix("CAP_") for cap in dig(context, "capabilities", "add") or []
            }
            if added & forbidden_caps:
                report(
                    f"{template.where()}: container {c.name} adds {', '.join(sorted(added & forbidden_caps))}"
                )


no_privileged_or_host_network = resource_rule(
    name="no-privileged-or-host-network",
    description="No container runs privileged and no pod joins the host's network, PID or IPC "
    "namespace, except allow-listed node drivers.",
    remediation="Drop `privileged`, `hostNetwork`, `hostPID`, `hostIPC` and broad capabilities "
    "(grant narrow ones such as IPC_LOCK instead); if the workload is a node driver, run it in a "
    "driver namespace or add `Kind/namespace/name` to `allowedWorkloads` in the stack's policy config.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    types=WORKLOAD_TYPES,
    check=_check_privileged,
    config=schema(
        {
            "allowedNamespaces": {
                "type": "array",
                "items": {"type": "string"},
                "default": [
                    "kube-system",
                    "nvidia-dra-driver-gpu",
                    "gpu-operator",
                    "nvidia-network-operator",
                ],
                "description": "Namespaces of node drivers that may run privileged or on the host network.",
            },
            "allowedWorkloads": {
                "type": "array",
                "items": {"type": "string"},
                "default": [
                    "DaemonSet/*/dranet",
                    "DaemonSet/*/nvidia-driver-installer",
                    "DaemonSet/*/nccl-tcpx-installer",
                    "DaemonSet/*/nccl-tcpxo-installer",
                    "DaemonSet/*/nri-device-injector",
                    "DaemonSet/*/*dra-driver-nvidia-gpu*",
                ],
                "description": "`Kind/namespace/name` patterns (fnmatch) of further allowed driver "
                "workloads.",
            },
            "forbiddenCapabilities": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["SYS_ADMIN", "ALL"],
                "description": "Capabilities that amount to a privileged container.",
            },
        }
    ),
    tags=["security"],
)

# Shapes of well-known credentials (Hugging Face, GitHub, AWS, Slack, Google API, private keys).
_TOKEN_PATTERNS = [
    re.compile(p)
    for p in (
        r"\bhf_[A-Za-z0-9]{30,}\b",
        r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"\bAIza[0-9A-Za-z_-]{35}\b",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    )
]
_SENSITIVE_NAME = re.compile(
    r"(^|[_.-])(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|SECRET_?KEY|PRIVATE_?KEY|CREDENTIALS?)($|[_.-])",
    re.IGNORECASE,
)
_SENSITIVE_FLAGS = ("--hf-token", "--api-key", "--token")


def _sensitive(name: str) -> bool:
    """A credential-like key or env name (HF_TOKEN, apiToken, db.password)."""
    return bool(_SENSITIVE_NAME.search(re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)))


def _looks_like_token(text: str) -> bool:
    return any(p.search(text) for p in _TOKEN_PATTERNS)


def _literal(text: str) -> bool:
    """A non-empty value that is not just a `$(VAR)`/`${VAR}` reference."""
    return bool(re.sub(r"\$\(\w+\)|\$\{\w+\}|\$\w+", "", text).strip().strip("\"'"))


def _check_secrets(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    allowed_names = set(cfg["allowedNames"])
    if resource.type in HELM_RELEASE_TYPES or (
        resource.is_kubernetes_object and resource.kind == "ConfigMap"
    ):
        body = (
            resource.props.get("values")
            if resource.type in HELM_RELEASE_TYPES
            else resource.props.get("data")
        )
        for path, text in iter_strings(body or {}):
            leaf = re.split(r"[.\[]", path)[-1]
            if _looks_like_token(text) or (_sensitive(leaf) and leaf not in allowed_names and _literal(text)):
                report(f"{resource.ref()}: {path} holds a literal credential; reference a Secret instead")
        return
    for template in pod_templates(resource):
        for c in containers(template.spec):
            for env in c.spec.get("env") or []:
                name, value = str(env.get("name") or ""), env.get("value")
                if not isinstance(value, str) or name in allowed_names:
                    continue
                if _looks_like_token(value) or (_sensitive(name) and _literal(value)):
                    report(
                        f"{template.where()}: container {c.name} env {name} is a literal value; use "
                        "valueFrom.secretKeyRef"
                    )
            words = [str(w) for w in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
            if any(_looks_like_token(w) for w in words):
                report(f"{template.where()}: container {c.name} has a credential in its command line")
            _, flags = parse_flags([w for word in words for w in word.split()])
            for flag in _SENSITIVE_FLAGS:
                for value in flags.get(flag, []):
                    if value is not None and _literal(value):
                        report(f"{template.where()}: container {c.name} passes {flag} as a literal")


secrets_by_reference = resource_rule(
    name="secrets-by-reference",
    description="Credentials reach pods only by reference to a Secret, never as literals in env, "
    "command lines, ConfigMaps or Helm values.",
    remediation="Store the credential in a Kubernetes Secret (from a Pulumi secret: `pulumi config set "
    "--secret hfToken ...`) and read it with `env[].valueFrom.secretKeyRef`.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    types=(*WORKLOAD_TYPES, ":ConfigMap", *sorted(HELM_RELEASE_TYPES)),
    check=_check_secrets,
    config=schema(
        {
            "allowedNames": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Env var names and ConfigMap/values keys that look like credentials "
                "but are not (their literal values pass).",
            }
        }
    ),
    tags=["security", "secrets"],
)


def _run_as(template: PodTemplate, c_spec: dict[str, Any], field: str) -> Any:
    value = dig(c_spec, "securityContext", field)
    return value if value is not None else dig(template.spec, "securityContext", field)


def _check_non_root(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for template in pod_templates(resource):
        targets = [c for c in containers(template.spec) if c.name == SIDECAR_CONTAINER]
        if is_router(template):
            targets += [c for c in containers(template.spec) if c.name == ROUTER_CONTAINER]
        for c in targets:
            non_root = _run_as(template, c.spec, "runAsNonRoot")
            user = _run_as(template, c.spec, "runAsUser")
            if user == 0 or (non_root is not True and not (isinstance(user, int | float) and user > 0)):
                report(
                    f"{template.where()}: container {c.name} may run as root; set runAsNonRoot: true "
                    "and a non-zero runAsUser"
                )


router_sidecar_non_root = resource_rule(
    name="router-sidecar-non-root",
    description="The endpoint picker and the routing sidecar run as a non-root user.",
    remediation="Set `securityContext: {runAsNonRoot: true, runAsUser: 65532, "
    "allowPrivilegeEscalation: false}` on the `epp` and `routing-proxy` containers (or the pod).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=WORKLOAD_TYPES,
    check=_check_non_root,
    tags=["security", "router"],
)


def _check_resources(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for template in pod_templates(resource):
        for c in containers(template.spec):
            requests = dig(c.spec, "resources", "requests") or {}
            limits = dig(c.spec, "resources", "limits") or {}
            missing = [
                f"requests.{r}" for r in cfg["requiredRequests"] if r not in requests and r not in limits
            ]
            missing += [f"limits.{r}" for r in cfg["requiredLimits"] if r not in limits]
            if missing:
                report(f"{template.where()}: container {c.name} sets no {', '.join(missing)}")
            for name in sorted(set(requests) | set(limits)):
                if "/" not in name:
                    continue
                if name not in limits:
                    report(f"{template.where()}: container {c.name} requests {name} without a limit")
                elif name in requests and parse_quantity(requests[name]) != parse_quantity(limits[name]):
                    report(f"{template.where()}: container {c.name} {name} request differs from its limit")


resources_requests_limits = resource_rule(
    name="resources-requests-limits",
    description="Every container sets CPU and memory requests and a memory limit, and extended "
    "resources (GPUs, RDMA) as equal requests and limits.",
    remediation="Give each container `resources.requests` for cpu and memory and `resources.limits` "
    "for memory (serving pods: requests equal to limits for Guaranteed QoS); set GPU and NIC "
    "resources as limits.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    types=WORKLOAD_TYPES,
    check=_check_resources,
    config=schema(
        {
            "requiredRequests": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["cpu", "memory"],
                "description": "Resources every container must request (a limit alone implies the request).",
            },
            "requiredLimits": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["memory"],
                "description": "Resources every container must limit.",
            },
        }
    ),
    tags=["security", "scheduling"],
)

POLICIES = [
    no_privileged_or_host_network,
    secrets_by_reference,
    router_sidecar_non_root,
    resources_requests_limits,
]
