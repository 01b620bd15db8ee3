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

from devtools import source_snapshot
from devtools.twin import build, cluster, engine, python_host
from devtools.twin.modules import wrappers

STACK = "quickstart-h100"
PROVIDER_DIR = Path("provider")
GOLDEN_SCHEMA = cluster.PROJECT_ROOT / "tests" / "golden" / "components" / "schema.json"
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


# Fields the Kubernetes provider's Check leaves out of a state's inputs when they are zero: int32
# fields marked `omitempty` in k8s.io/api (Probe.InitialDelaySeconds), whose zero is the API's
# default. The mock engine records what the program passed, zero included.
OMITTED_ZEROS = frozenset({"initialDelaySeconds"})


def normalized(value: Any) -> Any:
    """State or mock inputs as comparable data: a secret (either side's form) becomes SECRET,
    integral floats ints, nulls and OMITTED_ZEROS dropped, and a Secret's `stringData` read as
    `data` (the provider's Check encodes one into the other, as the API server does)."""
    if isinstance(value, dict):
        if _SECRET_SIG_KEY in value:
            return SECRET
        out = {
            k: normalized(v)
            for k, v in value.items()
            if v is not None and not (k in OMITTED_ZEROS and v == 0)
        }
        if out.get("kind") == "Secret" and "stringData" in out:
            out["data"] = out.pop("stringData")
        return out
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
    """Pulumi.yaml of the YAML program, keeping the `packages:` entry `pulumi package add` wrote."""
    path = directory / "Pulumi.yaml"
    program = yaml_program(project, properties)
    if path.is_file() and (packages := (yaml.safe_load(path.read_text()) or {}).get("packages")):
        program["packages"] = packages
    path.write_text(yaml.safe_dump(program, sort_keys=False), encoding="utf-8")


# The TypeScript program: the component's inputs from fleet.json (checked against the generated
# SDK's types by the compiler), the secrets from the program's secret config.
TYPESCRIPT_INDEX = """import * as pulumi from "@pulumi/pulumi";
import * as llmdFleet from "@pulumi/llmd-fleet";
import properties from "./fleet.json";

const config = new pulumi.Config();
const fleet = new llmdFleet.Fleet("fleet", {
    ...properties,
    hfToken: config.requireSecret("hfToken"),
    kubeconfig: config.requireSecret("kubeconfig"),
});

export const gatewayAddress = fleet.gatewayAddress;
export const pools = fleet.pools;
export const namespaces = fleet.namespaces;
"""
TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "target": "es2020",
        "module": "commonjs",
        "moduleResolution": "node",
        "esModuleInterop": True,
        "resolveJsonModule": True,
        "skipLibCheck": True,
    },
    "files": ["index.ts"],
}


def package_json(project: str) -> dict[str, Any]:
    """The TypeScript program's package.json, every version from the matrix ([twin].npm-*)."""
    from llmd_fleet.versions import versions

    twin = versions().twin
    return {
        "name": project,
        "private": True,
        "main": "index.ts",
        "dependencies": {"@pulumi/pulumi": twin.npm_pulumi},
        "devDependencies": {
            "typescript": twin.npm_typescript,
            "ts-node": twin.npm_ts_node,
            "@types/node": twin.npm_types_node,
        },
    }


def write_typescript(directory: Path, project: str, properties: Mapping[str, Any]) -> None:
    """Pulumi.yaml, package.json (keeping what `pulumi package add` added), tsconfig.json,
    index.ts and fleet.json of the TypeScript program."""
    (directory / "Pulumi.yaml").write_text(
        yaml.safe_dump(
            {
                "name": project,
                "runtime": {"name": "nodejs", "options": {"typescript": True, "packagemanager": "npm"}},
                "description": "The llmd-fleet Fleet component declared from TypeScript (make components).",
                **(
                    {"packages": packages}
                    if (directory / "Pulumi.yaml").is_file()
                    and (
                        packages := (yaml.safe_load((directory / "Pulumi.yaml").read_text()) or {}).get(
                            "packages"
                        )
                    )
                    else {}
                ),
            },
            sort_keys=False,
        )
    )
    manifest = directory / "package.json"
    wanted = package_json(project)
    if manifest.is_file():  # `pulumi package add` added the generated SDK (file:sdks/llmd-fleet)
        added = json.loads(manifest.read_text()).get("dependencies", {})
        wanted["dependencies"] = {**added, **wanted["dependencies"]}
    manifest.write_text(json.dumps(wanted, indent=2) + "\n")
    (directory / "tsconfig.json").write_text(json.dumps(TSCONFIG, indent=2) + "\n")
    (directory / "index.ts").write_text(TYPESCRIPT_INDEX)
    (directory / "fleet.json").write_text(json.dumps(properties, indent=2) + "\n")


def npm_env(base: Mapping[str, str]) -> dict[str, str]:
    """npm's download cache outside the repository (shared, content-addressed), no audit, no fund
    or update notices."""
    return {
        **base,
        "npm_config_cache": str(build.cache_root() / "npm-cache"),
        "npm_config_prefer_offline": "true",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
    }


def npm_install(directory: Path, env: Mapping[str, str]) -> None:
    """`npm install` of the program (the matrix's packages and the generated SDK); prints its time."""
    started = time.monotonic()
    done = subprocess.run(
        ["npm", "install", "--no-save"],
        cwd=directory,
        env=npm_env(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ComponentsError(f"npm install in {directory}: {(done.stderr or done.stdout).strip()[-2000:]}")
    print(f"  npm install: {time.monotonic() - started:.1f} s", flush=True)


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
        self.env.update(python_host.uv_env(os.environ))
        # npm (the TypeScript program: `pulumi package add` and the Node host install with it).
        self.env.update(npm_env({}))
        self.env.update(
            {
                "PATH": os.pathsep.join([*path, os.environ.get("PATH", "")]),
                "PULUMI_BACKEND_URL": f"file://{self.state}",
                # The provider's environment (provider/venv, which the host's `uv sync` makes from
                # uv.lock) is the core install: its only provider plugin is Kubernetes', installed
                # above; the dev group would add the cloud SDKs' plugins.
                "UV_NO_DEV": "1",
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
        started = time.monotonic()
        self.cli("package", "add", str((self.root / PROVIDER_DIR).resolve()))
        print(f"  pulumi package add provider: {time.monotonic() - started:.1f} s", flush=True)
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

    def schema(self) -> dict[str, Any]:
        """`pulumi package get-schema` of the provider, as a user would see it."""
        done = self.cli("package", "get-schema", str((self.root / PROVIDER_DIR).resolve()))
        schema: dict[str, Any] = json.loads(done.stdout)
        return schema

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
    stack = work.prepare(with_bad_input(properties))
    if consumer.language == "yaml":
        schema = work.schema()
        if schema != json.loads(GOLDEN_SCHEMA.read_text()):
            result.problems.append(
                f"{label} pulumi package get-schema differs from {GOLDEN_SCHEMA.relative_to(root)} "
                "(review, then `python -m devtools.twin components --write-schema`)"
            )
        else:
            print(f"  schema: pulumi package get-schema equals {GOLDEN_SCHEMA.relative_to(root)}", flush=True)
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
    differences = spec_differences(expected, got)
    result.problems.extend(f"{label} {p}" for p in differences)
    if differences:  # both sides, for a diff
        for name, specs in (("python", expected), (consumer.language, got)):
            path = components_dir(root) / f"specs-{name}.json"
            path.write_text(
                json.dumps({"/".join(k): v for k, v in sorted(specs.items())}, indent=1, sort_keys=True)
            )
        result.problems.append(f"{label} both sides written to {components_dir(root)}/specs-*.json")
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
    from devtools.twin import nodejs_host

    found = []
    if only in (None, "yaml"):
        yaml_host = build.ensure(wrappers()["pulumi-yaml"])["pulumi-language-yaml"]
        found.append(Consumer("yaml", (yaml_host.parent,), write_yaml))
    if only in (None, "typescript"):
        node_host = nodejs_host.ensure()
        found.append(Consumer("typescript", (node_host.bin_dir,), write_typescript, npm_install))
    return found


def run(shared: bool, only: str | None, root: Path = cluster.PROJECT_ROOT) -> int:
    from devtools.twin.quickstart import Quiet, prepare_twin
    from llmd_fleet.cli.stack_file import load_stack_document, stack_file_path

    try:
        tools = engine.ensure_tools()
        chosen = consumers(only)
    except (build.BuildError, python_host.BuildError) as error:
        print(f"components: {error}", file=sys.stderr)
        return 1
    except source_snapshot.SnapshotMissing as missing:
        print(f"components: not run: {missing}")
        return 0
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


def write_schema(root: Path = cluster.PROJECT_ROOT) -> int:
    """Refresh the golden schema from `pulumi package get-schema` of provider/ (no twin)."""
    try:
        tools = engine.ensure_tools()
        if tools.host is None:
            print(
                f"components: --write-schema needs the Python language host: {tools.host_absent}",
                file=sys.stderr,
            )
            return 1
        work = Workspace(Consumer("schema", (), write_yaml), tools, Path(os.devnull), root)
        # As the CLI prints it (its JSON escapes `<` and `>`), byte for byte.
        done = work.cli("package", "get-schema", str((root / PROVIDER_DIR).resolve()))
        GOLDEN_SCHEMA.write_text(done.stdout)
    except (build.BuildError, python_host.BuildError, ComponentsError) as error:
        print(f"components: {error}", file=sys.stderr)
        return 1
    print(f"components: wrote {GOLDEN_SCHEMA.relative_to(root)}")
    return 0


def main(argv: Sequence[str]) -> int:
    if "--write-schema" in argv:
        return write_schema()
    only = None
    if "--only" in argv:
        index = list(argv).index("--only")
        only = argv[index + 1] if index + 1 < len(argv) else ""
        if only not in ("yaml", "typescript"):
            print(f"components: --only {only!r}: one of yaml, typescript", file=sys.stderr)
            return 2
    return run("--shared" in argv, only)
