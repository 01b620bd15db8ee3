"""Run the CrossGuard policy pack offline, through the analyzer protocol the Pulumi CLI speaks.

What `pulumi preview --policy-pack policies --policy-pack-config <file>` does, without an engine:

1. start the pack as the Python policy host does: `<python> -u -m pulumi.policy <engine> <pack>`
   in the pack directory, with the pack's virtualenv from PulumiPolicy.yaml; building the
   PolicyPack serves the Analyzer gRPC service on 127.0.0.1 and prints the port on stdout;
2. GetPluginInfo and GetAnalyzerInfo: the pack's policies, levels and config schemas;
3. reconcile the policy config (schema defaults, then the pack's initial config, then the file,
   validated against each policy's schema) and Configure; ConfigureStack with the stack's name;
4. Analyze every recorded resource with its inputs, then AnalyzeStack with all of them;
5. stop the pack.

URNs are built as `urn:pulumi:<stack>::<project>::<type>::<name>` (the recording keeps no
parent chain).
"""

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import grpc  # type: ignore[import-untyped]
import jsonschema
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2  # type: ignore[import-untyped]
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi.runtime.rpc import UNKNOWN

from llmd_fleet.cli.children import popen
from llmd_fleet.cli.paths import PACKAGE_DIR
from llmd_fleet.cli.synth import Recorded
from llmd_fleet.core.problems import PROJECT, clip, names, printable, quote

PACK_DIR = PACKAGE_DIR / "policies"
# The CLI hands the policy host its engine's address; the Python host parses it and never dials it.
_ENGINE_ADDRESS = "127.0.0.1:0"
_LEVELS = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}
_LEVEL_NAMES = {value: name for name, value in _LEVELS.items()}
_SEVERITIES = {
    analyzer_pb2.POLICY_SEVERITY_UNSPECIFIED: "",
    analyzer_pb2.POLICY_SEVERITY_LOW: "low",
    analyzer_pb2.POLICY_SEVERITY_MEDIUM: "medium",
    analyzer_pb2.POLICY_SEVERITY_HIGH: "high",
    analyzer_pb2.POLICY_SEVERITY_CRITICAL: "critical",
}


class PolicyConfigError(ValueError):
    """The policy config file is unreadable or does not fit the pack's schemas (bad input)."""


class PolicyPackError(RuntimeError):
    """The pack could not be started or did not answer."""


NOT_RUN = "not run"
_PREVIEW_COMPONENT = "llmd-fleet:gateway:GatewayLayer"
_NOT_RUN_PREFIX = "can't run policy"


@dataclass(frozen=True)
class Violation:
    """One diagnostic of the pack, as a preview lists it."""

    policy: str
    level: str
    urn: str
    type: str
    name: str
    message: str
    description: str
    severity: str

    def line(self) -> str:
        """One line, like a preview's policy summary: level, policy, resource, message."""
        message = " ".join(self.message.split())
        return f"[{self.level}]  {self.policy}  ({self.type}: {self.name})  {message}"


def report_lines(violations: tuple[Violation, ...], verbose: bool = False) -> list[str]:
    """The violations as `llmd-fleet check` prints them: every mandatory one on its own line; the
    advisories of one policy on one line with a count when there are several (`xN`, the first
    one's resource and message), unless `verbose`. In order of first appearance."""
    entries: list[list[Violation]] = []
    by_policy: dict[str, list[Violation]] = {}
    for violation in violations:
        if verbose or violation.level in ("mandatory", NOT_RUN):
            entries.append([violation])
        elif violation.policy in by_policy:
            by_policy[violation.policy].append(violation)
        else:
            by_policy[violation.policy] = [violation]
            entries.append(by_policy[violation.policy])
    lines = []
    for group in entries:
        first = group[0]
        if len(group) == 1:
            lines.append(first.line())
            continue
        message = " ".join(first.message.split())
        lines.append(
            f"[{first.level}]  {first.policy}  x{len(group)}  ({first.type}: {first.name}, and "
            f"{len(group) - 1} more)  {message}  (check --verbose lists each)"
        )
    return lines


@dataclass(frozen=True)
class PolicyState:
    name: str
    level: str
    kind: str
    """`resource` or `stack`."""


@dataclass(frozen=True)
class PolicyReport:
    pack: str
    version: str
    policies: tuple[PolicyState, ...]
    resources: int
    violations: tuple[Violation, ...]

    @property
    def mandatory(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.level == "mandatory")

    @property
    def advisory(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.level not in ("mandatory", NOT_RUN))

    @property
    def not_run(self) -> tuple[Violation, ...]:
        """Policies the SDK could not run (they read a value unknown before the update)."""
        return tuple(v for v in self.violations if v.level == NOT_RUN)

    def summary(self) -> str:
        enabled = sum(1 for p in self.policies if p.level != "disabled")
        return (
            f"policy pack {self.pack}@v{self.version}: {enabled} of {len(self.policies)} policies over "
            f"{self.resources} resources: {len(self.mandatory)} mandatory, {len(self.advisory)} advisory "
            "violation(s)" + (f", {len(self.not_run)} not run" if self.not_run else "")
        )


def resource_urn(stack: str, type_: str, name: str, project: str = PROJECT) -> str:
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def stack_urn(stack: str, project: str = PROJECT) -> str:
    return resource_urn(stack, "pulumi:pulumi:Stack", f"{project}-{stack}", project)


def _urn_parts(urn: str) -> tuple[str, str]:
    parts = urn.split("::")
    if len(parts) < 4:
        return "", urn
    return parts[2].rsplit("$", 1)[-1], "::".join(parts[3:])


def load_policy_config(path: Path) -> dict[str, Any]:
    """A `--policy-pack-config` file: JSON mapping policy names (or `all`) to an enforcement
    level or to an object of `enforcementLevel` and config properties. Only reads it: check it
    against the pack with `validate_policy_config`."""
    where = f"--policy-config {printable(str(path))}"
    try:
        document = json.loads(path.read_bytes())
    except OSError as exc:
        raise PolicyConfigError(f"{where}: {exc.strerror}") from None
    except RecursionError:
        raise PolicyConfigError(f"{where}: not valid JSON: nested too deeply") from None
    except ValueError as exc:  # also not UTF-8, and integers beyond Python's digit limit
        reason = str(exc)
        if reason.startswith("Exceeds the limit"):
            reason = f"an integer of more than {sys.get_int_max_str_digits()} digits"
        raise PolicyConfigError(f"{where}: not valid JSON: {clip(reason)}") from None
    if not isinstance(document, dict):
        raise PolicyConfigError(f"{where}: must be a JSON object of policy name -> config")
    return document


def pack_analyzer_info() -> analyzer_pb2.AnalyzerInfo:
    """The AnalyzerInfo the shipped pack answers GetAnalyzerInfo with (its policies, their levels
    and config schemas), built in this process by pulumi_policy's own servicer over the same
    `all_policies()` and pack level the pack serves (`llmd_fleet.policies.pack.serve`), without
    starting a server: the policy config is checked against it before anything is written."""
    from pulumi_policy import EnforcementLevel
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    from llmd_fleet.policies.pack import PACK_LEVEL, PACK_NAME, all_policies

    servicer = _PolicyAnalyzerServicer(PACK_NAME, "0.0.0", all_policies(), EnforcementLevel(PACK_LEVEL))
    info: analyzer_pb2.AnalyzerInfo = servicer.GetAnalyzerInfo(None, None)  # type: ignore[no-untyped-call]
    return info


def validate_policy_config(user_config: Mapping[str, Any] | None, where: str = "--policy-config") -> None:
    """Refuse a policy config the pack would refuse (unknown policy names, enforcement levels, config
    properties outside a policy's schema) with PolicyConfigError, without starting the pack."""
    try:
        reconcile_config(pack_analyzer_info(), user_config)
    except PolicyConfigError as exc:
        raise PolicyConfigError(f"{where}: {exc}") from None


def _schema_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: spec["default"] for name, spec in (schema.get("properties") or {}).items() if "default" in spec
    }


def reconcile_config(
    info: analyzer_pb2.AnalyzerInfo, user_config: Mapping[str, Any] | None
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Level and properties of every policy: schema defaults, then the pack's initial config,
    then the user's file (`all` first, then per policy), validated against each schema."""
    schemas: dict[str, dict[str, Any]] = {}
    result: dict[str, tuple[str, dict[str, Any]]] = {}
    for policy in info.policies:
        schema = {
            "type": "object",
            "properties": json_format.MessageToDict(policy.configSchema.properties),
            "required": list(policy.configSchema.required),
            "additionalProperties": False,
        }
        schemas[policy.name] = schema
        result[policy.name] = (_LEVEL_NAMES[policy.enforcementLevel], _schema_defaults(schema))

    def apply(name: str, value: Any, origin: str) -> None:
        # `all` is reported as itself; a policy by its name, after the origin when not the file.
        label = "all" if origin == "all" else f"{origin}: {printable(name)}" if origin else printable(name)
        level, props = result[name]
        if isinstance(value, str):
            entry: dict[str, Any] = {"enforcementLevel": value}
        elif isinstance(value, Mapping):
            entry = dict(value)
        else:
            raise PolicyConfigError(
                f"{label}: must be an enforcement level or an object (got {quote(value)})"
            )
        new_level = entry.pop("enforcementLevel", level)
        if not isinstance(new_level, str) or new_level not in _LEVELS:
            raise PolicyConfigError(
                f"{label}: enforcementLevel must be one of {', '.join(_LEVELS)} (got {quote(new_level)})"
            )
        result[name] = (new_level, {**props, **entry})

    for name, config in info.initialConfig.items():
        if name in result:
            initial: dict[str, Any] = json_format.MessageToDict(config.properties)
            if config.enforcementLevel or "enforcementLevel" in json_format.MessageToDict(config):
                initial["enforcementLevel"] = _LEVEL_NAMES[config.enforcementLevel]
            apply(name, initial, "pack initial config")
    user = dict(user_config or {})
    if "all" in user:
        for name in result:
            apply(
                name,
                {"enforcementLevel": user["all"]} if isinstance(user["all"], str) else user["all"],
                "all",
            )
        del user["all"]
    unknown = sorted(set(user) - set(result))
    if unknown:
        raise PolicyConfigError(f"unknown policies: {names(unknown)} (policies: {names(sorted(result))})")
    for name, value in user.items():
        apply(name, value, "")
    for name, (_, props) in result.items():
        errors = sorted(
            jsonschema.Draft7Validator(schemas[name]).iter_errors(props), key=lambda e: list(e.path)
        )
        if errors:
            where = ".".join(str(p) for p in errors[0].path)
            raise PolicyConfigError(
                f"{name}{'.' + printable(where) if where else ''}: {_schema_message(errors[0])}"
            )
    return result


def _schema_message(error: jsonschema.ValidationError) -> str:
    """A schema error with the offending value quoted by `quote` (jsonschema's own message
    repeats the whole value)."""
    if error.validator == "additionalProperties":
        schema: Any = error.schema
        instance: Any = error.instance
        extra = sorted(set(instance) - set(schema.get("properties") or {}))
        return f"unknown properties: {names(extra)}"
    if error.validator == "type":
        return f"must be of type {error.validator_value} (got {quote(error.instance)})"
    if error.validator in ("enum", "const"):
        return f"must be one of {quote(error.validator_value, 400)} (got {quote(error.instance)})"
    message = error.message
    if len(message) <= 200:
        return printable(message)
    return f"{error.validator} failed (got {quote(error.instance)})"


def _struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(dict(value))
    return struct


def _pack_python(pack_dir: Path) -> str:
    """The interpreter of the pack's virtualenv (PulumiPolicy.yaml runtime.options.virtualenv),
    else this one."""
    try:
        project = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        project = {}
    runtime = project.get("runtime") if isinstance(project, dict) else None
    venv = runtime.get("options", {}).get("virtualenv") if isinstance(runtime, dict) else None
    if isinstance(venv, str):
        candidate = (pack_dir / venv / "bin" / "python").absolute()
        if candidate.exists():
            return str(candidate)
    return sys.executable


def _pack_version(pack_dir: Path, reported: str) -> str:
    """The CLI takes a Python pack's version from PulumiPolicy.yaml."""
    try:
        project = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return reported
    version = project.get("version") if isinstance(project, dict) else None
    return str(version) if version else reported


class PolicyPackProcess:
    """The pack's process: started, port read from stdout, stopped on exit.

    Starting it is separate from using it: `llmd-fleet check` starts the pack before it
    synthesizes the stack, so the pack's interpreter start and imports run while the program
    runs, instead of after it (docs/performance.md)."""

    def __init__(self, pack_dir: Path, stack: str, project: str = PROJECT):
        env = {
            **os.environ,
            "PULUMI_PROJECT": project,
            "PULUMI_STACK": stack,
            "PULUMI_DRY_RUN": "true",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PULUMI_CONFIG", None)
        self._stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        # Dies with this process however it ends (llmd_fleet/cli/children.py).
        self.process = popen(
            [_pack_python(pack_dir), "-u", "-m", "pulumi.policy", _ENGINE_ADDRESS, str(pack_dir)],
            cwd=pack_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._drain, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.process.stderr, False), daemon=True).start()
        self._port: int | None = None

    def port(self, timeout: float) -> int:
        """The pack's gRPC port, waiting for it to be printed (at most `timeout` seconds)."""
        if self._port is not None:
            return self._port
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise PolicyPackError(
                f"the policy pack printed no port within {timeout:.0f} s{self._tail()}"
            ) from None
        if line is None or not line.strip().isdigit():
            self.stop()
            raise PolicyPackError(f"the policy pack did not start (printed {line!r}){self._tail()}")
        self._port = int(line)
        return self._port

    def _drain(self, stream: IO[str], is_stdout: bool) -> None:
        for line in stream:
            if is_stdout:
                self._lines.put(line.strip())
            else:
                self._stderr.append(line.rstrip())
        if is_stdout:
            self._lines.put(None)

    def _tail(self) -> str:
        self.process.poll()
        tail = "\n".join(self._stderr[-20:])
        return f":\n{tail}" if tail else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_policy_pack(
    resources: Sequence[Recorded],
    stack: str,
    *,
    policy_config: Mapping[str, Any] | None = None,
    pack_dir: Path = PACK_DIR,
    project: str = PROJECT,
    timeout: float = 60.0,
    started: PolicyPackProcess | None = None,
) -> PolicyReport:
    """Analyze recorded resources with the pack over gRPC; violations in the order reported.
    `started` is a pack process started earlier for this stack (it is stopped here either way)."""
    pack = started or PolicyPackProcess(pack_dir, stack, project)
    try:
        port = pack.port(timeout)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                raise PolicyPackError(f"the policy pack does not answer on port {port}") from None
            try:
                return _analyze(
                    analyzer_pb2_grpc.AnalyzerStub(channel),
                    resources,
                    stack,
                    project,
                    policy_config,
                    pack_dir,
                    timeout,
                )
            except grpc.RpcError as exc:
                raise PolicyPackError(f"the policy pack failed: {exc}{pack._tail()}") from None
    finally:
        pack.stop()


def _analyze(
    stub: analyzer_pb2_grpc.AnalyzerStub,
    resources: Sequence[Recorded],
    stack: str,
    project: str,
    policy_config: Mapping[str, Any] | None,
    pack_dir: Path,
    timeout: float,
) -> PolicyReport:
    stub.GetPluginInfo(empty_pb2.Empty(), timeout=timeout)
    info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=timeout)
    config = reconcile_config(info, policy_config)
    stub.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(
            policyConfig={
                name: analyzer_pb2.PolicyConfig(enforcementLevel=_LEVELS[level], properties=_struct(props))
                for name, (level, props) in config.items()
            }
        ),
        timeout=timeout,
    )
    stub.ConfigureStack(
        analyzer_pb2.AnalyzerStackConfigureRequest(
            stack=stack, project=project, organization="organization", dry_run=True
        ),
        timeout=timeout,
    )
    root = stack_urn(stack, project)
    # In the preview of a new stack (`pulumi up`'s first step) the stack resource's properties
    # (the program's outputs) and a component's (its registered outputs) are unknown where they
    # wait on a resource, as `inferencePool` and the gateway's `address` are; the pack sees them.
    entries: list[tuple[str, str, str, dict[str, Any]]] = [
        ("pulumi:pulumi:Stack", f"{project}-{stack}", root, {"inferencePool": UNKNOWN}),
        (
            _PREVIEW_COMPONENT,
            "gateway",
            resource_urn(stack, _PREVIEW_COMPONENT, "gateway", project),
            {"address": UNKNOWN},
        ),
    ]
    entries += [(r.type, r.name, resource_urn(stack, r.type, r.name, project), r.inputs) for r in resources]
    violations: list[Violation] = []

    def collect(response: analyzer_pb2.AnalyzeResponse, default_urn: str) -> None:
        for d in response.diagnostics:
            urn = d.urn or default_urn
            type_, name = _urn_parts(urn)
            message = d.message
            if d.description and message.startswith(d.description):
                message = message[len(d.description) :].lstrip("\n") or d.description
            # The SDK reports a policy that read an unknown value as an advisory diagnostic; it did
            # not check anything, so it counts against the pack instead of as a finding.
            did_not_run = message.startswith(_NOT_RUN_PREFIX)
            violations.append(
                Violation(
                    policy=d.policyName,
                    level=NOT_RUN if did_not_run else _LEVEL_NAMES.get(d.enforcementLevel, "advisory"),
                    urn=urn,
                    type=type_,
                    name=name,
                    message=message,
                    description=d.description,
                    severity=_SEVERITIES.get(d.severity, ""),
                )
            )

    options = analyzer_pb2.AnalyzerResourceOptions(
        customTimeouts=analyzer_pb2.AnalyzerResourceOptions.CustomTimeouts()
    )
    for type_, name, urn, inputs in entries:
        request = analyzer_pb2.AnalyzeRequest(
            type=type_, properties=_struct(inputs), urn=urn, name=name, options=options
        )
        collect(stub.Analyze(request, timeout=timeout), urn)
    stack_request = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(
                type=type_,
                properties=_struct(inputs),
                urn=urn,
                name=name,
                options=options,
                parent="" if urn == root else root,
            )
            for type_, name, urn, inputs in entries
        ]
    )
    collect(stub.AnalyzeStack(stack_request, timeout=timeout), root)
    policies = tuple(
        PolicyState(
            p.name,
            config[p.name][0],
            "stack" if p.policy_type == analyzer_pb2.POLICY_TYPE_STACK else "resource",
        )
        for p in info.policies
    )
    return PolicyReport(
        pack=info.name,
        version=_pack_version(pack_dir, info.version),
        policies=policies,
        resources=len(resources) + 1,  # the recorded ones and the stack
        violations=tuple(violations),
    )
