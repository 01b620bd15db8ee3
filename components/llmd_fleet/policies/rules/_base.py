"""Plumbing shared by every rule: plain values, config with schema defaults, resource views and
the two policy builders.

Rules receive props in engine format (camelCase, numbers as floats, secrets unwrapped) wrapped in
pulumi_policy's unknown-checking proxies. `plain()` turns them into dicts and lists; reading a
value that is unknown during preview raises the SDK's UnknownValueError, which the analyzer
reports as an advisory "can't run policy during preview" note instead of a violation.
"""

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

HELM_RELEASE_TYPES = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"})


def plain(value: Any) -> Any:
    """Proxies (and anything Mapping/Sequence-like) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(key): plain(value[key]) for key in value}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Sequence):
        return [plain(item) for item in value]
    return value


def as_int(value: Any) -> int | None:
    """An integral number (the wire format carries every number as a double), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def dig(value: Any, *path: str | int) -> Any:
    """value[path[0]][path[1]]..., or None as soon as a step is missing."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(step)
    return value


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity ("392Gi", "1.5T", "500m", 8) as a number, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = re.fullmatch(
        r"\s*([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)(?:[eE]([+-]?\d+))?([KMGTPE]i|[mkMGTPE]?)\s*", value
    )
    if not match:
        return None
    number = float(match.group(1)) * (10 ** int(match.group(2)) if match.group(2) else 1)
    suffix = match.group(3)
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def gib(num_bytes: float) -> str:
    """Bytes as a short GiB figure for messages."""
    value = num_bytes / 2**30
    return f"{value:.0f}" if math.isclose(value, round(value)) else f"{value:.1f}"


@dataclass(frozen=True)
class Resource:
    """One resource as the rules see it: type token, logical name, URN and plain props."""

    type: str
    name: str
    urn: str
    props: dict[str, Any] = field(repr=False)

    @property
    def is_kubernetes_object(self) -> bool:
        return (
            self.type.startswith("kubernetes:")
            and self.type not in HELM_RELEASE_TYPES
            and not self.type.startswith("kubernetes:yaml")
        )

    @property
    def kind(self) -> str:
        """Kubernetes kind (from the object, else the last part of the type token)."""
        kind = self.props.get("kind")
        return kind if isinstance(kind, str) and kind else self.type.rsplit(":", 1)[-1]

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.props.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def object_name(self) -> str:
        name = self.metadata.get("name")
        return name if isinstance(name, str) and name else self.name

    @property
    def namespace(self) -> str:
        namespace = self.metadata.get("namespace")
        return namespace if isinstance(namespace, str) and namespace else "default"

    @property
    def labels(self) -> dict[str, str]:
        labels = self.metadata.get("labels")
        return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}

    def ref(self) -> str:
        """How messages name the resource: `Kind namespace/name` or `type name`."""
        if self.is_kubernetes_object:
            return f"{self.kind} {self.namespace}/{self.object_name}"
        if self.type in HELM_RELEASE_TYPES:
            namespace = self.props.get("namespace") or "default"
            return f"Helm release {namespace}/{self.props.get('name') or self.name}"
        return f"{self.type} {self.name}"


def type_matches(resource_type: str, patterns: Sequence[str]) -> bool:
    """Exact type tokens, or `:Kind` suffixes for Kubernetes kinds of any group/version."""
    return any(
        resource_type == p
        or (p.startswith(":") and resource_type.startswith("kubernetes:") and resource_type.endswith(p))
        for p in patterns
    )


def schema(properties: dict[str, dict[str, Any]]) -> PolicyConfigSchema:
    """A config schema; every property must carry a default and a description."""
    for name, spec in properties.items():
        if "default" not in spec or "description" not in spec:
            raise ValueError(f"config property {name!r} needs a default and a description")
    return PolicyConfigSchema(properties=properties)


def settings(config: Mapping[str, Any] | None, config_schema: PolicyConfigSchema | None) -> dict[str, Any]:
    """Schema defaults overlaid with the configured values (as the CLI reconciles them);
    integral floats from the wire become ints where the schema says integer."""
    values: dict[str, Any] = {}
    properties = config_schema.properties if config_schema is not None else {}
    for name, spec in properties.items():
        values[name] = plain(spec.get("default"))
    values.update(plain(config or {}))
    for name, spec in properties.items():
        if spec.get("type") == "integer" and isinstance(values.get(name), float):
            values[name] = as_int(values[name])
        if spec.get("type") == "object" and isinstance(values.get(name), dict):
            inner = spec.get("additionalProperties") or {}
            if inner.get("type") == "integer":
                values[name] = {k: as_int(v) for k, v in values[name].items()}
    return values


Report = Callable[[str, Resource | None], None]
ResourceCheck = Callable[[Resource, dict[str, Any], Callable[[str], None]], None]
StackCheck = Callable[[list[Resource], dict[str, Any], Report], None]


def _policy_fields(
    name: str,
    description: str,
    remediation: str,
    level: EnforcementLevel,
    severity: Severity,
    config: PolicyConfigSchema | None,
    tags: Sequence[str],
) -> dict[str, Any]:
    """What every rule declares, as the pulumi_policy constructors name it."""
    return {
        "name": name,
        "description": description,
        "enforcement_level": level,
        "config_schema": config,
        "severity": severity,
        "remediation_steps": remediation,
        "tags": list(tags),
    }


def resource_rule(
    *,
    name: str,
    description: str,
    remediation: str,
    level: EnforcementLevel,
    severity: Severity,
    types: Sequence[str],
    check: ResourceCheck,
    config: PolicyConfigSchema | None = None,
    tags: Sequence[str] = (),
) -> ResourceValidationPolicy:
    """A ResourceValidationPolicy that runs `check` on resources whose type matches `types`."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not type_matches(args.resource_type, types):
            return
        resource = Resource(args.resource_type, args.name, args.urn, plain(args.props))
        check(resource, settings(args.get_config(), config), lambda message: report_violation(message, None))

    return ResourceValidationPolicy(
        validate=validate, **_policy_fields(name, description, remediation, level, severity, config, tags)
    )


RULE_PACKAGES = frozenset({"kubernetes", "gcp", "aws"})
"""The Pulumi packages whose resources the rules read."""


def stack_rule(
    *,
    name: str,
    description: str,
    remediation: str,
    level: EnforcementLevel,
    severity: Severity,
    check: StackCheck,
    config: PolicyConfigSchema | None = None,
    tags: Sequence[str] = (),
) -> StackValidationPolicy:
    """A StackValidationPolicy that runs `check` over every resource of the stack."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        # Rules read only the resources of RULE_PACKAGES. The others (the stack, whose properties
        # are the program's outputs; components, whose properties are their registered outputs;
        # providers) may hold values unknown in a preview, and reading them would stop every stack
        # rule from running there.
        resources = [
            Resource(r.resource_type, r.name, r.urn, plain(r.props))
            for r in args.resources
            if r.resource_type.split(":", 1)[0] in RULE_PACKAGES
        ]

        def report(message: str, resource: Resource | None) -> None:
            report_violation(message, resource.urn if resource is not None else None)

        check(resources, settings(args.get_config(), config), report)

    return StackValidationPolicy(
        validate=validate, **_policy_fields(name, description, remediation, level, severity, config, tags)
    )
