"""Offline synthesis: run the stack program under Pulumi's mock engine and record every resource.

No Pulumi CLI, cloud credentials or cluster is involved. The program is the same one `pulumi up`
runs; the mock engine records each resource's inputs, which are then written as deterministic
files (see llmd_fleet/cli/render.py).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks, mocks, set_mocks

from llmd_fleet.cli.stack_file import StackFile, read_stack_file, stack_config
from llmd_fleet.core.problems import PROJECT
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.plans import plan_models

# The marker the Pulumi wire format wraps secret values in (pulumi.runtime.rpc).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REDACTED = "[secret]"
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


@dataclass(frozen=True)
class Registration:
    """A resource's URN as the Pulumi engine forms it, and the URNs its aliases keep.

    The engine qualifies a type with its parents' types (`A$B$type`, the root stack left out);
    the mock monitor keeps only the nearest parent, so the chain is rebuilt here. A resource
    that moved (a new parent, a new name) keeps its state through a `pulumi.Alias`: the old URN
    it names is its identity, and `llmd-fleet render` lists both (urns.txt)."""

    urn: str
    aliases: tuple[str, ...]


class UrnRecorder:
    """Wraps the mock monitor's RegisterResource to record engine URNs and resolved aliases."""

    def __init__(self, stack: str, project: str) -> None:
        self.stack, self.project = stack, project
        self.registrations: list[Registration] = []
        # mock URN -> the type chain the engine would give it ("" for the root stack)
        self._qualified: dict[str, str] = {}

    def install(self) -> None:
        monitor = pulumi.runtime.settings.get_monitor()
        if monitor is None:
            raise RuntimeError("UrnRecorder.install: set the mocks first (no resource monitor)")
        register = monitor.RegisterResource

        def recording(request: Any) -> Any:
            response = register(request)
            self._record(request, response.urn)
            return response

        monitor.RegisterResource = recording

    def _urn(self, parent: str, type_: str, name: str) -> tuple[str, str]:
        chain = self._qualified.get(parent, "")
        qualified = f"{chain}${type_}" if chain else type_
        return qualified, f"urn:pulumi:{self.stack}::{self.project}::{qualified}::{name}"

    def _record(self, request: Any, mock_urn: str) -> None:
        if request.type == "pulumi:pulumi:Stack":
            self._qualified[mock_urn] = ""
            return
        qualified, urn = self._urn(request.parent, request.type, request.name)
        self._qualified[mock_urn] = qualified
        aliases = []
        for alias in request.aliases:
            if alias.WhichOneof("alias") == "urn":
                aliases.append(alias.urn)
                continue
            spec = alias.spec
            parent = "" if spec.noParent else (spec.parentUrn or request.parent)
            aliases.append(self._urn(parent, spec.type or request.type, spec.name or request.name)[1])
        self.registrations.append(Registration(urn, tuple(sorted(aliases))))


@dataclass(frozen=True)
class Synthesis:
    stack: str
    config: StackConfig
    plan: FleetPlan
    resources: tuple[Recorded, ...]
    registrations: tuple[Registration, ...] = ()


def synthesize(stacks_dir: Path, stack: str) -> Synthesis:
    """Validate, plan and run the stack program under mocks. Raises ConfigError or PlanError
    before any resource is declared when the input is bad."""
    stack_file = read_stack_file(stacks_dir, stack)
    # Bad input is refused here, before the mock engine starts (nothing of it to clean up).
    config = stack_config(stack_file)
    return synthesize_validated(stack_file, config, plan_models(config)[0])


def synthesize_validated(stack_file: StackFile, config: StackConfig, plan: FleetPlan) -> Synthesis:
    """Run the stack program under mocks for a config already validated and planned."""
    from llmd_fleet.program import build_fleet

    stack = stack_file.stack

    pulumi.runtime.set_all_config(stack_file.values, sorted(stack_file.secret_keys))
    recorder = RecordingMocks()
    set_mocks(recorder, project=PROJECT, stack=stack, preview=False)
    urns = UrnRecorder(stack, PROJECT)
    urns.install()

    def program() -> None:
        build_fleet(config, plan)

    # mocks.test runs the program to completion: every registration and apply has finished.
    mocks.test(program)()  # type: ignore[no-untyped-call]
    return Synthesis(stack, config, plan, tuple(recorder.created), tuple(urns.registrations))


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
