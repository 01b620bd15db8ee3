"""Offline synthesis: run the stack program under Pulumi's mock engine and record every resource.

No Pulumi CLI, cloud credentials or cluster is involved. The program is the same one `pulumi up`
runs; the mock engine records each resource's inputs, which are then written as deterministic
files (see infra/render.py).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks, mocks, set_mocks

from components.config import PROJECT, ConfigError, StackConfig, parse_config, read_pulumi_config
from components.plan import FleetPlan, plan_fleet

# The marker the Pulumi wire format wraps secret values in (pulumi.runtime.rpc).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REDACTED = "[secret]"
# Stand-in for each `secure:` value of a stack file: its ciphertext is never decrypted offline.
SECRET_PLACEHOLDER = "offline-render-placeholder"
# Stand-in AWS account id for outputs that only AWS knows (the ECR repository URL). It is the
# documentation-reserved shape, never a real account; README "What is verified offline" says so.
OFFLINE_AWS_ACCOUNT = "000000000000"
# Region of an AWS resource registered without a regional provider (components tested alone).
OFFLINE_AWS_REGION = "offline-region"


@dataclass(frozen=True)
class Recorded:
    """One registered resource: its type token, logical name, parent chain and inputs."""

    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]


@dataclass
class RecordingMocks(Mocks):
    """Mocks that record every resource and echo its inputs back as its state.

    The few outputs the program reads that a cloud computes (and that do not merely repeat an
    input) get a placeholder of the right shape, so that what depends on them renders."""

    created: list[Recorded] = field(default_factory=list)
    _provider_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.created.append(Recorded(args.typ, args.name, bool(args.custom), dict(args.inputs)))
        resource_id, state = f"{args.name}-id", dict(args.inputs)
        if args.typ.startswith("pulumi:providers:"):
            self._provider_inputs[resource_id] = dict(args.inputs)
        elif args.typ == "aws:ecr/repository:Repository":
            region = self._provider_region(args.provider)
            host = f"{OFFLINE_AWS_ACCOUNT}.dkr.ecr.{region}.amazonaws.com"
            url = f"{host}/{args.inputs['name']}"
            state.update({"repositoryUrl": url, "registryId": OFFLINE_AWS_ACCOUNT})
        return resource_id, state

    def _provider_region(self, reference: str | None) -> str:
        # A provider reference is "<urn>::<id>"; the id is what new_resource returned for it.
        inputs = self._provider_inputs.get((reference or "").rpartition("::")[2], {})
        return str(inputs.get("region") or OFFLINE_AWS_REGION)

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        # Invokes (registry tokens) answer nothing offline; the mock engine iterates the
        # failures, so they are an empty list.
        return {}, []


class _DuplicateKey(yaml.YAMLError):
    """A mapping names the same key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key that appears twice in one mapping. Plain YAML keeps the
    last value silently (a second `llmd-fleet:model:` block would replace the first); the Pulumi
    CLI refuses such a file, and so does this."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                earlier = first_line.get(key)
            except TypeError:  # an unhashable key; the caller refuses non-string keys
                continue
            if earlier is not None:
                raise _DuplicateKey(
                    f"duplicate key {key!r} at lines {earlier} and {line} (YAML would keep only the "
                    "last; the Pulumi CLI refuses the file): keep one"
                )
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class StackFile:
    """A stack's config as the Pulumi CLI would pass it to the program."""

    stack: str
    values: dict[str, str]
    secret_keys: frozenset[str]


def stack_file_path(stacks_dir: Path, stack: str) -> Path:
    return stacks_dir / f"Pulumi.{stack}.yaml"


def read_stack_file(stacks_dir: Path, stack: str) -> StackFile:
    """Read stacks/Pulumi.<stack>.yaml. Objects become JSON text and `secure:` values a
    placeholder, exactly the shapes the Pulumi CLI hands a Python program."""
    path = stack_file_path(stacks_dir, stack)
    if not path.is_file():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise ConfigError([("stack", f"no stack file {path} (stacks: {', '.join(known) or 'none'})")])
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}
    except _DuplicateKey as exc:
        raise ConfigError([(str(path), str(exc))]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([(str(path), f"not valid YAML: {exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([(str(path), f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise ConfigError([(str(path), "must contain a `config:` mapping")])
    values: dict[str, str] = {}
    secrets = set()
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError([(str(path), f"config keys must be strings (got {key!r})")])
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[full_key] = SECRET_PLACEHOLDER
            secrets.add(full_key)
        elif isinstance(value, (dict, list)):
            values[full_key] = json.dumps(value)
        elif isinstance(value, bool):
            values[full_key] = "true" if value else "false"
        else:
            values[full_key] = str(value)
    return StackFile(stack=stack, values=values, secret_keys=frozenset(secrets))


def stack_config(stack_file: StackFile) -> StackConfig:
    """The validated config of a stack file, read exactly as the program reads it from Pulumi
    (raises ConfigError)."""
    raw, secrets = read_pulumi_config(
        stack_file.values.__getitem__, list(stack_file.values), stack_file.secret_keys.__contains__
    )
    return parse_config(raw, secrets)


@dataclass(frozen=True)
class Synthesis:
    stack: str
    config: StackConfig
    plan: FleetPlan
    resources: tuple[Recorded, ...]


def synthesize(stacks_dir: Path, stack: str) -> Synthesis:
    """Validate, plan and run the stack program under mocks. Raises ConfigError or PlanError
    before any resource is declared when the input is bad."""
    stack_file = read_stack_file(stacks_dir, stack)
    # Bad input is refused here, before the mock engine starts (nothing of it to clean up).
    config = stack_config(stack_file)
    plan = plan_fleet(config)
    from infra.program import build_fleet

    pulumi.runtime.set_all_config(stack_file.values, sorted(stack_file.secret_keys))
    recorder = RecordingMocks()
    set_mocks(recorder, project=PROJECT, stack=stack, preview=False)

    def program() -> None:
        build_fleet(config, plan)

    # mocks.test runs the program to completion: every registration and apply has finished.
    mocks.test(program)()
    return Synthesis(stack, config, plan, tuple(recorder.created))


def _redacted(secret: Any) -> Any:
    """A secret value with every leaf replaced by REDACTED and its shape kept, so the object
    around it stays valid (a Secret's `stringData`, which the Kubernetes SDK marks secret as a
    whole, is still a map of strings; its keys are names, not secrets)."""
    if isinstance(secret, dict):
        if secret.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return _redacted(secret.get("value"))
        return {k: _redacted(v) for k, v in secret.items() if v is not None}
    if isinstance(secret, list):
        return [_redacted(v) for v in secret]
    return REDACTED


def clean(value: Any) -> Any:
    """Engine values -> plain data: secrets redacted (shape kept), integral floats back to ints
    (the wire format carries every number as a double), nulls dropped."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return _redacted(value.get("value"))
        return {k: clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
