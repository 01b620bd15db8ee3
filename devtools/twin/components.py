"""`make components`: the fleet as a component (`llmd-fleet:index:Fleet`, provider/) consumed from
programs in other languages, deployed into the twin (docs/components.md).

    python -m devtools.twin components [--shared] [--only yaml|typescript]
        --shared: use the twin the quickstart walk kept (CI: between `make quickstart-twin
        QUICKSTART_ARGS=--keep-twin` and `make doctor-twin DOCTOR_TWIN_ARGS=--shared`) and leave it
        up; otherwise a fresh twin, prepared as the walk prepares it, taken down at the end

For each consumer language, a program is written under build/twin/components/<language>/ that
declares one `llmd-fleet:index:Fleet` with quickstart-h100's settings (the stack file's keys as the
component's inputs, `hfToken` and `kubeconfig` from the program's secret config) and runs, through
the Automation API and the Pulumi CLI the twin builds: `pulumi package add` of provider/ (the
component provider, run by the real Python language host), `pulumi up`, a second `pulumi up`, and
`pulumi destroy`. The line it prints, exactly:

    component: <language>: <N> created, second up <M> changes, destroy <L> left

where N counts the Kubernetes objects the up left in the state. The run fails unless M and L are
0, the objects' (apiVersion, kind, namespace, name) set and their specs equal what the Python stack
program declares for the same settings (run under the mock engine here, `llmd-fleet render`'s
synthesis), and no secret's value is in the state in plain text (engine.py's search). Before the
deploy, a bad input (decode's `maxModelLen` above the model's context) must be refused with the stack
file's error naming the key.

The YAML program runs in pulumi-language-yaml ([twin].pulumi-yaml, built from the module proxy);
the TypeScript program in the Node.js language host (nodejs_host.py), when built.
"""

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.twin import build, cluster, engine, python_host
from devtools.twin.modules import wrappers

STACK = "quickstart-h100"
PROVIDER_DIR = Path("provider")
COMPONENT_TYPE = "llmd-fleet:index:Fleet"
RESOURCE_NAME = "fleet"
# The program's secret config keys, passed to the component's inputs of the same name.
SECRET_INPUTS = ("hfToken", "kubeconfig")
# The bad input of the refusal check: decode's maxModelLen far above any context, and the key the
# stack file's error names for it.
BAD_KEY = "llmd-fleet:serving.roles.decode.maxModelLen"
# The wire format's marker of a secret value, as the state holds it (pulumi.runtime.rpc).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET = "[secret]"


class ComponentsError(Exception):
    """A consumer run could not start or a check failed."""


# --- the programs (pure) ----------------------------------------------------------------------------


def fleet_properties(config: Mapping[str, Any]) -> dict[str, Any]:
    """The component's inputs from the engine run's config (`llmd-fleet:<key>` -> value, secrets
    left out: the program passes them from its own secret config)."""
    from llmd_fleet.core.problems import PROJECT

    return {
        key.split(":", 1)[1]: value
        for key, value in config.items()
        if key.startswith(f"{PROJECT}:") and key.split(":", 1)[1] not in SECRET_INPUTS
    }


def yaml_program(project: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """Pulumi.yaml of the YAML consumer (`pulumi package add` adds the `packages:` entry)."""
    return {
        "name": project,
        "runtime": "yaml",
        "description": "The llmd-fleet Fleet component declared from YAML (make components).",
        "config": {key: {"type": "string", "secret": True} for key in SECRET_INPUTS},
        "resources": {
            RESOURCE_NAME: {
                "type": COMPONENT_TYPE,
                "properties": {**properties, **{key: f"${{{key}}}" for key in SECRET_INPUTS}},
            }
        },
        "outputs": {
            "gatewayAddress": f"${{{RESOURCE_NAME}.gatewayAddress}}",
            "pools": f"${{{RESOURCE_NAME}.pools}}",
            "namespaces": f"${{{RESOURCE_NAME}.namespaces}}",
        },
    }


def result_line(language: str, created: int, changes: int, left: int) -> str:
    return f"component: {language}: {created} created, second up {changes} changes, destroy {left} left"


def with_bad_input(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The properties with decode's maxModelLen far past any model's context."""
    changed: dict[str, Any] = json.loads(json.dumps(properties))
    changed["serving"]["roles"]["decode"]["maxModelLen"] = 10_000_000
    return changed


def normalized(value: Any) -> Any:
    """State or mock inputs as comparable data: a secret (either side's form) becomes SECRET,
    integral floats ints, nulls dropped."""
    if isinstance(value, dict):
        if _SECRET_SIG_KEY in value:
            return SECRET
        return {k: normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Identity = tuple[str, str, str, str]


def identity(inputs: Mapping[str, Any]) -> Identity:
    meta = inputs.get("metadata") or {}
    return (
        str(inputs.get("apiVersion")),
        str(inputs.get("kind")),
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
    )


def _is_object(type_token: str) -> bool:
    return (
        type_token.startswith("kubernetes:")
        and not type_token.startswith(("kubernetes:helm", "pulumi:providers:"))
        and not type_token.endswith(("List", "Patch"))
    )


def state_specs(deployment: Mapping[str, Any]) -> dict[Identity, Any]:
    """(apiVersion, kind, namespace, name) -> inputs of every Kubernetes object in a state."""
    found = {}
    for resource in deployment.get("resources", []):
        inputs = resource.get("inputs") or {}
        if _is_object(str(resource.get("type", ""))) and "apiVersion" in inputs:
            found[identity(inputs)] = normalized(inputs)
    return found


def python_specs(config: Mapping[str, Any], secret_keys: Iterable[str]) -> dict[Identity, Any]:
    """What the Python stack program declares for the same settings, under the mock engine
    (llmd_fleet/cli/synth.py, as `llmd-fleet render` runs it): identity -> inputs."""
    from llmd_fleet.cli.stack_file import StackFile, stack_config
    from llmd_fleet.cli.synth import synthesize_validated
    from llmd_fleet.plan.fleet import plan_fleet

    values = {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
    stack_file = StackFile(STACK, values, frozenset(secret_keys))
    parsed = stack_config(stack_file)
    synthesis = synthesize_validated(stack_file, parsed, plan_fleet(parsed))
    return {
        identity(r.inputs): normalized(r.inputs)
        for r in synthesis.resources
        if r.custom and _is_object(r.type) and "apiVersion" in r.inputs
    }


def spec_differences(expected: Mapping[Identity, Any], got: Mapping[Identity, Any]) -> list[str]:
    """What differs between the Python program's objects and a consumer's: missing, extra, and
    objects whose inputs differ (by top-level field)."""
    problems = []
    for key in sorted(set(expected) - set(got)):
        problems.append(f"missing {'/'.join(k for k in key if k)}")
    for key in sorted(set(got) - set(expected)):
        problems.append(f"not in the Python program: {'/'.join(k for k in key if k)}")
    for key in sorted(set(expected) & set(got)):
        if expected[key] != got[key]:
            fields = sorted(
                f for f in set(expected[key]) | set(got[key]) if expected[key].get(f) != got[key].get(f)
            )
            problems.append(f"{'/'.join(k for k in key if k)}: differs in {', '.join(fields)}")
    return problems


# --- the run ----------------------------------------------------------------------------------------


def components_dir(root: Path = cluster.PROJECT_ROOT) -> Path:
    return cluster.twin_dir(root) / "components"


@dataclass
class ConsumerResult:
    language: str
    line: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Consumer:
    """A language whose program declares the component: how its program is written and which
    language host runs it (bin directories put first on PATH)."""

    language: str
    host_dirs: tuple[Path, ...]
    write: Callable[[Path, str, Mapping[str, Any]], None]
    """write(directory, project name, properties): the program, ready for `pulumi package add`."""
    after_add: Callable[[Path, Mapping[str, str]], None] = lambda directory, env: None
    """What the program needs after `pulumi package add` (the TypeScript dependencies)."""


def write_yaml(directory: Path, project: str, properties: Mapping[str, Any]) -> None:
    (directory / "Pulumi.yaml").write_text(
        yaml.safe_dump(yaml_program(project, properties), sort_keys=False), encoding="utf-8"
    )


class Workspace:
    """One consumer's program, its file backend, PULUMI_HOME and stack, against the twin."""

    def __init__(self, consumer: Consumer, tools: engine.EngineTools, kubeconfig: Path, root: Path):
        from pulumi import automation as auto

        self.consumer = consumer
        self.tools = tools
        self.root = root
        base = components_dir(root) / consumer.language
        shutil.rmtree(base, ignore_errors=True)
        self.program = base / "program"
        self.program.mkdir(parents=True)
        self.state = base / "state"
        self.state.mkdir()
        self.env = engine.engine_env(base / "home", secrets.token_hex(24), kubeconfig)
        host = tools.host
        if host is None:
            raise ComponentsError(
                f"the component provider needs the Python language host: {tools.host_absent}"
            )
        path = [str(d) for d in (*consumer.host_dirs, host.bin_dir)]
        self.env.update(
            {
                "PATH": os.pathsep.join([*path, os.environ.get("PATH", "")]),
                "PULUMI_BACKEND_URL": f"file://{self.state}",
            }
        )
        engine.install_provider(tools, self.env)
        self.command = auto.PulumiCommand(
            root=str(engine.cli_root(tools.cli, base / "cli")), skip_version_check=True
        )
        self.project = f"llmd-fleet-{consumer.language}"
        self.kubeconfig_text = kubeconfig.read_text()
        self.secrets = {"hfToken": f"hf_{secrets.token_hex(16)}", "kubeconfig": self.kubeconfig_text}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.tools.cli), *args, "--non-interactive"],
            cwd=self.program,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if check and done.returncode != 0:
            raise ComponentsError(f"pulumi {' '.join(args)}: {(done.stderr or done.stdout).strip()[-2000:]}")
        return done

    def prepare(self, properties: Mapping[str, Any]) -> Any:
        from pulumi import automation as auto

        self.consumer.write(self.program, self.project, properties)
        self.cli("package", "add", str((self.root / PROVIDER_DIR).resolve()))
        self.consumer.after_add(self.program, {**os.environ, **self.env})
        options = auto.LocalWorkspaceOptions(
            work_dir=str(self.program),
            pulumi_home=self.env["PULUMI_HOME"],
            env_vars=self.env,
            secrets_provider="passphrase",
            pulumi_command=self.command,
        )
        stack = auto.create_or_select_stack(stack_name=STACK, work_dir=str(self.program), opts=options)
        for key, value in self.secrets.items():
            stack.set_config(key, auto.ConfigValue(value=value, secret=True))
        return stack

    def rewrite(self, properties: Mapping[str, Any]) -> None:
        self.consumer.write(self.program, self.project, properties)
        # `pulumi package add` added the package to the first Pulumi.yaml: add it again.
        self.cli("package", "add", str((self.root / PROVIDER_DIR).resolve()))

    def export(self) -> dict[str, Any]:
        done = self.cli("stack", "export", "--stack", STACK)
        deployment: dict[str, Any] = json.loads(done.stdout)["deployment"]
        return deployment

    def state_text(self) -> str:
        files = sorted(p for p in self.state.rglob("*") if p.is_file())
        return json.dumps(self.export()) + "".join(p.read_text(errors="replace") for p in files)


def _counts(summary: Mapping[Any, int] | None) -> dict[str, int]:
    return {str(getattr(op, "value", op)): int(n) for op, n in (summary or {}).items()}


def run_consumer(
    consumer: Consumer,
    tools: engine.EngineTools,
    kube: Any,
    properties: Mapping[str, Any],
    expected: Mapping[Identity, Any],
    root: Path,
) -> ConsumerResult:
    from pulumi.automation.errors import CommandError

    result = ConsumerResult(consumer.language)
    kubeconfig = cluster.twin_dir(root) / "kubeconfig"
    work = Workspace(consumer, tools, kubeconfig, root)
    label = f"component: {consumer.language}:"
    started = time.monotonic()
    # A bad input first: refused with the stack file's error, before any object.
    work.consumer.write(work.program, work.project, with_bad_input(properties))
    stack = work.prepare(with_bad_input(properties))
    try:
        stack.up(color="never")
        result.problems.append(f"{label} a bad input ({BAD_KEY}) was not refused")
    except CommandError as error:
        text = str(error)
        message = next((line.strip() for line in text.splitlines() if BAD_KEY in line), "")
        if not message:
            result.problems.append(f"{label} a bad input was refused without naming {BAD_KEY}: {text[-800:]}")
        else:
            print(f"  bad input refused: {message}", flush=True)
    work.rewrite(properties)
    up = stack.up(color="never")
    counts = _counts(up.summary.resource_changes)
    deployment = work.export()
    got = state_specs(deployment)
    created = len(got)
    print(
        f"  up: {counts.get('create', 0)} resources created, {created} Kubernetes objects "
        f"({time.monotonic() - started:.1f} s); outputs: "
        + ", ".join(f"{k}={v.value!r}" for k, v in sorted(up.outputs.items())),
        flush=True,
    )
    result.problems.extend(f"{label} {p}" for p in spec_differences(expected, got))
    leaks = engine.leaked_secrets(work.state_text(), work.secrets)
    if leaks:
        result.problems.append(f"{label} secrets in plain text in the state: {', '.join(leaks)}")
    second = stack.up(color="never")
    changes = sum(n for op, n in _counts(second.summary.resource_changes).items() if op != "same")
    objects = [
        {"apiVersion": a, "kind": k, "metadata": {"name": n, **({"namespace": ns} if ns else {})}}
        for a, k, ns, n in got
    ]
    stack.destroy(color="never")
    left = engine.objects_left(kube, objects)
    stack.workspace.remove_stack(STACK)
    result.line = result_line(consumer.language, created, changes, left)
    if changes:
        result.problems.append(f"{label} the second up changed {changes} resources")
    if left:
        result.problems.append(f"{label} destroy left {left} objects in the twin")
    if not created:
        result.problems.append(f"{label} up created no Kubernetes object")
    return result


def consumers(only: str | None) -> list[Consumer]:
    yaml_host = build.ensure(wrappers()["pulumi-yaml"])["pulumi-language-yaml"]
    found = [Consumer("yaml", (yaml_host.parent,), write_yaml)]
    return [c for c in found if only in (None, c.language)]


def run(shared: bool, only: str | None, root: Path = cluster.PROJECT_ROOT) -> int:
    from devtools.twin.quickstart import Quiet, prepare_twin
    from llmd_fleet.cli.stack_file import load_stack_document, stack_file_path

    try:
        tools = engine.ensure_tools()
        chosen = consumers(only)
    except (build.BuildError, python_host.BuildError) as error:
        print(f"components: {error}", file=sys.stderr)
        return 1
    if tools.host is None:
        print(f"components: not run: {tools.host_absent}")
        return 0
    if shared and not cluster.state_path(root).is_file():
        print("components: --shared: the quickstart walk kept no twin; starting its own")
        shared = False
    if shared:
        kube = cluster.client(root)
        engine.ensure_platform(kube)
    else:
        kube, _controller = prepare_twin(Quiet())
    results: list[ConsumerResult] = []
    try:
        config, _secure = engine.engine_config(
            {"config": load_stack_document(stack_file_path(root / "stacks", STACK))}
        )
        engine.preinstalled_switches(config)
        kubeconfig_text = (cluster.twin_dir(root) / "kubeconfig").read_text()
        engine.twin_context(config, kubeconfig_text)
        properties = fleet_properties(config)
        from llmd_fleet.core.problems import PROJECT

        secret_keys = [f"{PROJECT}:{key}" for key in SECRET_INPUTS]
        expected = python_specs({**config, **{key: "placeholder" for key in secret_keys}}, secret_keys)
        print(f"  the Python program declares {len(expected)} Kubernetes objects for {STACK}", flush=True)
        for consumer in chosen:
            result = run_consumer(consumer, tools, kube, properties, expected, root)
            results.append(result)
            if result.line:
                print(result.line, flush=True)
    except Exception as error:  # one line for whatever stopped the run
        print(f"components: FAIL: {type(error).__name__}: {str(error).strip()[-3000:]}", file=sys.stderr)
        return 1
    finally:
        if not shared:
            cluster.down(root)
    problems = [p for r in results for p in r.problems]
    for problem in problems:
        print(f"  FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str]) -> int:
    only = None
    if "--only" in argv:
        index = list(argv).index("--only")
        only = argv[index + 1] if index + 1 < len(argv) else ""
        if only not in ("yaml", "typescript"):
            print(f"components: --only {only!r}: one of yaml, typescript", file=sys.stderr)
            return 2
    return run("--shared" in argv, only)
