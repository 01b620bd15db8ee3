"""From raw config values to a validated StackConfig: each section's model, the target kind's
defaults, then every cross-field rule in a fixed order (`RULES`, derived from the registry,
llmd_fleet/stack/registry.py). Pure."""

import difflib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from llmd_fleet.config.errors import describe, key_path, section_loc
from llmd_fleet.core.problems import PROJECT, ConfigError, Problem
from llmd_fleet.layers.observability.config import GMP_NAMESPACE
from llmd_fleet.layers.responses.config import password_problems
from llmd_fleet.stack.model import (
    MODELS_ADAPTER,
    MODELS_KEY,
    SECRET_KEYS,
    StackConfig,
    model_views,
)
from llmd_fleet.stack.models import (
    MODEL_SECTIONS,
    ModelEntryConfig,
    entry_key,
    entry_problems,
    shared_problems,
)
from llmd_fleet.stack.registry import KNOWN_KEYS, OBJECT_KEYS, OPTIONAL_OBJECT_KEYS, RULES
from llmd_fleet.targets.specs import SECTION_KINDS, SPECS, kinds_where


def _section_problems(key: str, error: ValidationError, raw: Any) -> list[Problem]:
    problems = []
    for err in error.errors():
        loc = section_loc(err, raw)
        message = describe(err, loc)
        if key == "target" and len(loc) == 1 and loc[0] in SECTION_KINDS:
            if err["type"] == "extra_forbidden":
                message = f"only for kind {SECTION_KINDS[loc[0]]}"
            elif err["type"] == "missing":
                message = f"required for kind {loc[0]}"
        problems.append(Problem(key_path(key, loc), message))
    return problems


# Target kinds whose program reads the `kubeconfig` secret: those built by targets/onprem/build.py,
# which reaches an existing cluster (the others create theirs and its credentials).
KUBECONFIG_KINDS = kinds_where(lambda spec: not spec.creates_cluster)


def parse_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset()) -> StackConfig:
    """Validate raw config values (key without namespace -> parsed YAML/JSON value).

    `secret_keys` names the keys that were set as Pulumi secrets. Raises ConfigError naming every
    offending key path; never returns a half-valid config.
    """
    problems: list[Problem] = []
    for key in sorted(set(raw) - KNOWN_KEYS):
        allowed = ", ".join(sorted(KNOWN_KEYS))
        problems.append(Problem(f"{PROJECT}:{key}", f"unknown key (allowed: {allowed})"))
    for key in SECRET_KEYS:
        if key in raw and key not in secret_keys:
            problems.append(
                Problem(f"{PROJECT}:{key}", f"must be a secret: pulumi config set --secret {key} <value>")
            )
    multi = MODELS_KEY in raw
    entries: list[ModelEntryConfig] = []
    if multi:
        for section in MODEL_SECTIONS:
            if section in raw:
                problems.append(
                    Problem(
                        f"{PROJECT}:{section}",
                        f"not with {PROJECT}:{MODELS_KEY}: set `{section}` in each models entry",
                    )
                )
        try:
            entries = MODELS_ADAPTER.validate_python(raw[MODELS_KEY])
        except ValidationError as exc:
            problems += _section_problems(MODELS_KEY, exc, raw[MODELS_KEY])
        if entries:
            problems += entry_problems(entries, list(raw[MODELS_KEY]))
    parts: dict[str, Any] = {}
    for key, adapter in OBJECT_KEYS.items():
        if multi and key in MODEL_SECTIONS:
            continue
        if key not in raw:
            problems.append(Problem(f"{PROJECT}:{key}", "required"))
            continue
        try:
            parts[key] = adapter.validate_python(raw[key])
        except ValidationError as exc:
            problems += _section_problems(key, exc, raw[key])
    for key, adapter in OPTIONAL_OBJECT_KEYS.items():
        if key not in raw or (multi and key in MODEL_SECTIONS):
            continue
        try:
            parts[key] = adapter.validate_python(raw[key])
        except ValidationError as exc:
            problems += _section_problems(key, exc, raw[key])
    if multi and "responses" in raw:
        problems.append(
            Problem(
                f"{PROJECT}:responses",
                f"not with {PROJECT}:{MODELS_KEY}: the agentic API fronts one pool (use the "
                "single-model form, or leave `responses` out)",
            )
        )
    if problems:
        raise ConfigError(problems)
    if multi:
        first = entries[0]
        parts.update(
            model=first.model,
            serving=first.serving.model_copy(update={"name": first.name}),
            router=first.router,
            models=tuple(entries),
        )
    config = StackConfig(
        **parts,
        has_hf_token="hfToken" in raw,
        has_registry_password="registryPassword" in raw,
        has_responses_db_password="responsesDbPassword" in raw,
    )
    if not multi:
        config, problems = _complete(config, raw)
        if problems:
            raise ConfigError(problems)
        return config
    # Each model is checked as the single-model stack it renders as; its problems are named at
    # its entry, and those of the shared sections once.
    views = []
    for index, view in enumerate(model_views(config)):
        view, view_problems = _complete(view, raw)
        views.append(view)
        for problem in view_problems:
            own = config.models[index].workload is not None
            moved = Problem(entry_key(index, problem.key, own), problem.message)
            if moved not in problems:
                problems.append(moved)
    if problems:
        raise ConfigError(problems)
    # On the completed shared sections (the target's observability defaults filled in).
    problems = shared_problems(views[0].model_copy(update={"models": config.models}))
    if problems:
        raise ConfigError(problems)
    completed = tuple(
        entry.model_copy(
            update={
                "model": view.model,
                "serving": view.serving,
                "router": view.router,
                "workload": view.workload if entry.workload is not None else None,
            }
        )
        for entry, view in zip(config.models, views, strict=True)
    )
    # The stack-wide workload stays the stack's (the first view's may be its entry's own).
    return views[0].model_copy(update={"models": completed, "workload": config.workload})


def _complete(config: StackConfig, raw: Mapping[str, Any]) -> tuple[StackConfig, list[Problem]]:
    """One model's config with the target kind's and the observability defaults filled in, and
    every cross-field rule's problems."""
    config = SPECS[config.target.kind].defaults(config)
    if config.serving.engine == "simulator" and "enabled" not in config.serving.preflight.model_fields_set:
        # The simulator moves no KV over a fabric: nothing for the preflight to prove.
        preflight = config.serving.preflight.model_copy(update={"enabled": False})
        serving = config.serving.model_copy(update={"preflight": preflight})
        config = config.model_copy(update={"serving": serving})
    config = _target_observability_defaults(config)
    problems = [problem for rule in RULES for problem in rule(config)]
    if "kubeconfig" in raw and config.target.kind not in KUBECONFIG_KINDS:
        # Set and never read: the cloud targets create their cluster and its credentials.
        problems.append(
            Problem(
                f"{PROJECT}:kubeconfig",
                f"only for kind {' or '.join(KUBECONFIG_KINDS)}: {config.target.kind} creates its cluster "
                "and reaches it with the credentials it creates; pulumi config rm kubeconfig",
            )
        )
    return config, problems


def _target_observability_defaults(config: StackConfig) -> StackConfig:
    """Fill the per-target defaults of the observability keys (an explicit value is kept): each
    node group's NIC line rate, who scrapes, and the scrapers' namespace under GKE's managed
    collection."""
    spec = SPECS[config.target.kind]
    groups = {
        name: group.model_copy(update={"nic_gbps": spec.nic_gbps}) if group.nic_gbps is None else group
        for name, group in config.fleet.node_groups.items()
    }
    observability = config.observability
    if observability.prometheus is None:
        observability = observability.model_copy(update={"prometheus": spec.prometheus})
    if observability.prometheus == "gmp" and "namespace" not in config.observability.model_fields_set:
        observability = observability.model_copy(update={"namespace": GMP_NAMESPACE})
    fleet = config.fleet.model_copy(update={"node_groups": groups})
    return config.model_copy(update={"fleet": fleet, "observability": observability})


def near_project(namespace: str) -> bool:
    """Whether a config key's prefix is a near miss of this project's (`llmd_fleet`, `llmdfleet`,
    `LLMD-Fleet`, `llmd-flet`): such a key would otherwise be taken for another project's and
    dropped without a word."""
    folded = re.sub(r"[^a-z0-9]", "", namespace.lower())
    target = re.sub(r"[^a-z0-9]", "", PROJECT)
    return folded == target or difflib.SequenceMatcher(None, folded, target).ratio() >= 0.8


def read_pulumi_config(
    get: Callable[[str], Any], all_keys: list[str], is_secret: Callable[[str], bool]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Collect this project's raw config values.

    `get(key)` returns a value as Pulumi stores it (objects as JSON text), `all_keys` lists every
    set `project:key`, `is_secret(key)` tells whether a key was set with --secret.
    """
    raw: dict[str, Any] = {}
    secrets = set()
    misspelt = [
        (full_key, f"unknown project prefix {namespace!r}: did you mean {PROJECT}:{key}?")
        for full_key in sorted(all_keys)
        for namespace, _, key in [full_key.partition(":")]
        if namespace != PROJECT and near_project(namespace)
    ]
    if misspelt:
        raise ConfigError(misspelt)
    for full_key in sorted(all_keys):
        namespace, _, key = full_key.partition(":")
        if namespace != PROJECT:
            continue  # another provider's or project's setting (kubernetes:context, gcp:project)
        value = get(full_key)
        if (key in OBJECT_KEYS or key in OPTIONAL_OBJECT_KEYS or key == MODELS_KEY) and isinstance(
            value, str
        ):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                shape = "a list (a YAML sequence)" if key == MODELS_KEY else "an object (a YAML mapping)"
                raise ConfigError([(full_key, f"must be {shape}")]) from None
        raw[key] = value
        if is_secret(full_key):
            secrets.add(key)
    return raw, frozenset(secrets)


def check_stack_secrets(config: StackConfig) -> StackConfig:
    """A whole stack's config also carries the secrets its sections need (parse_config validates
    settings on their own, without secrets). Raises ConfigError."""
    if problems := password_problems(config.responses, config.has_responses_db_password, PROJECT):
        raise ConfigError(problems)
    return config
