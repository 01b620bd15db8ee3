"""The stack program under the Pulumi engine, against the twin (docs/twin.md, "The engine run").

    python -m devtools.twin engine [STACK]     (`make engine`)

With the twin up, this drives the unmodified program through the Automation API: a LocalWorkspace
on a copy of the checkout (build/twin/engine/checkout/, its `.venv` from `uv sync --frozen`), so
the Pulumi CLI runs `infra/__main__.py` and the policy pack through the real Python language host
(python_host.py) with Pulumi.yaml's `toolchain: uv` and `typechecker: mypy`; without the host's
source snapshot, the Automation API's inline program (`llmd_fleet.program.main`) instead. PULUMI_HOME
(plugins) and the file backend live under build/twin/, a passphrase secrets provider with a
passphrase made at run time, the stack's config copied from stacks/Pulumi.<stack>.yaml plus
`target.platform: preinstalled`, and its secrets (kubeconfig of the twin, hfToken,
responsesDbPassword, ...) set at run time as Pulumi secrets. In order:

0. (with the host) `pulumi up` of the program with a type error added, which the host's mypy run
   must refuse before any resource;
1. preview;
2. up with the policy pack (the provider awaits the preflight Job, the Deployments and the rest
   as on a cluster), then the host's line and the pack's line (from the engine's events);
3. a second up, which must change nothing;
4. a serving-only change (decode `maxNumSeqs`), which must update in place and replace nothing;
5. a canary (`serving.canary`) at 0% and 25%, rolled back, then at 100% and promoted, six ups
   read back from the twin (canary.py; one `canary:` line each);
6. destroy, after unprotecting what the stack protects, which must leave nothing of ours.

Each step prints one `engine:` line. The state is exported after the first up and every secret's
value must be absent from it (plain, JSON-escaped and base64). `make e2e` runs the same steps
(engine_e2e.py) with the twin's read-back checks between up and the second up.

The Pulumi CLI, the host and the Kubernetes provider come from build.ensure and python_host.ensure
(PATH or the cache, else built); an installed provider plugin of the version the pulumi-kubernetes
SDK requests (in $PULUMI_HOME/plugins or ~/.pulumi/plugins) is used instead of the built one.
What the run reports (its step lines, the policy packs' results from the engine's events, the
objects a state holds) is read by engine_report.py, which runs nothing.
"""

import base64
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

from devtools.twin import build, canary, cluster, python_host
from devtools.twin.engine_report import (
    PolicyResults,
    Step,
    kubernetes_objects,
    policy_line,
    policy_problems,
    policy_results,
    protected_urns,
    sdk_event,
    step_failures,
    step_line,
)
from devtools.twin.modules import uv_lock_version, wrappers

PROJECT = "llmd-fleet"
PROVIDER_PLUGIN = "kubernetes"
# Target kinds whose stacks deploy into an existing cluster, so into the twin.
TWIN_KINDS = ("onprem", "local")
# What the engine run adds to the stack's config: the twin provides the CRDs, DeviceClasses and
# controllers the third-party charts and URLs would install.
PLATFORM_KEY = "platform"
PLATFORM_VALUE = "preinstalled"
# The serving-only change of step 4: decode's maxNumSeqs (a vLLM flag and the DisaggregatedSet's
# pod template, nothing else that would be replaced).
UPDATE_ROLE = "decode"
UPDATE_KEY = "maxNumSeqs"
# The program's entry point (Pulumi.yaml `main: infra/`) and the policy pack, in the project.
PROGRAM_MAIN = Path("infra") / "__main__.py"
POLICY_PACK = "policies"
# The type-error check: a line mypy refuses (an `int` given a str), appended to the program, and
# what mypy says of it.
TYPE_ERROR = (
    '\n# The engine run adds this line to check that the type checker refuses it.\n_checked: int = "one"\n'
)
TYPE_ERROR_MESSAGE = "Incompatible types in assignment"
# Lines of the engine run that are not step lines: the language host's and the policy pack's.
NOT_STEPS = ("engine: language host", "policy: ", "canary: ")


class EngineError(Exception):
    """The engine run could not start (a missing binary, the twin not up, bad input)."""


# --- the engine: binaries and workspace ------------------------------------------------------------


@dataclass(frozen=True)
class EngineTools:
    """The Pulumi CLI and the Kubernetes provider plugin of the engine run."""

    cli: Path
    provider: Path
    plugin_version: str
    """The version the pulumi-kubernetes SDK of uv.lock requests, which the provider serves as."""
    provider_built: bool
    """True when the provider is ours (built from the served module), False for an installed plugin."""
    host: python_host.Host | None = None
    """The real Python language host; None without its source snapshot (`host_absent` says why)."""
    host_absent: str = ""


def installed_plugin(version: str, homes: Iterable[Path]) -> Path | None:
    """An installed `resource-kubernetes-v<version>` plugin binary under one of `homes`."""
    for home in homes:
        binary = (
            home / "plugins" / f"resource-{PROVIDER_PLUGIN}-v{version}" / f"pulumi-resource-{PROVIDER_PLUGIN}"
        )
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


def user_homes() -> list[Path]:
    """Where a normal Pulumi install keeps plugins: $PULUMI_HOME, else ~/.pulumi."""
    homes = [Path(os.environ["PULUMI_HOME"])] if os.environ.get("PULUMI_HOME") else []
    return [*homes, Path.home() / ".pulumi"]


def ensure_tools(verbose: bool = True) -> EngineTools:
    """The CLI (PATH at the pinned version, the cache, else built), the Python language host (the
    cache, else built from its source snapshot; None without one) and the provider (an installed
    plugin of the SDK's version, the cache, else built). Raises build.BuildError."""
    known = wrappers()
    plugin_version = uv_lock_version("pulumi-kubernetes")
    cli = build.ensure(known["pulumi"], verbose)["pulumi"]
    host: python_host.Host | None = None
    absent = ""
    try:
        host = python_host.ensure(verbose)
    except python_host.SnapshotMissing as missing:
        absent = str(missing)
    installed = installed_plugin(plugin_version, user_homes())
    if installed is not None:
        return EngineTools(cli, installed, plugin_version, False, host, absent)
    provider = build.ensure(known["kubernetes-provider"], verbose)["pulumi-resource-kubernetes"]
    return EngineTools(cli, provider, plugin_version, True, host, absent)


def engine_dir(root: Path = cluster.PROJECT_ROOT) -> Path:
    return cluster.twin_dir(root) / "engine"


def state_dir(root: Path = cluster.PROJECT_ROOT) -> Path:
    """The file backend (`file://<this>`)."""
    return cluster.twin_dir(root) / "state"


def cli_root(cli: Path, directory: Path) -> Path:
    """A directory with `bin/pulumi` -> `cli`: the Automation API runs `<root>/bin/pulumi`."""
    target = directory / "bin" / "pulumi"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.symlink_to(cli)
    return directory


def engine_env(home: Path, passphrase: str, kubeconfig: Path) -> dict[str, str]:
    """The environment of every CLI run: local plugins only, no update check, the passphrase, and
    the twin's kubeconfig for anything that reads the ambient one."""
    return {
        "PULUMI_HOME": str(home),
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "KUBECONFIG": str(kubeconfig),
    }


def install_provider(tools: EngineTools, env: Mapping[str, str]) -> None:
    """`pulumi plugin install resource kubernetes <SDK version> --file <binary>` into PULUMI_HOME
    (skipped when that exact binary is installed already)."""
    home = Path(env["PULUMI_HOME"])
    plugin_dir = home / "plugins" / f"resource-{PROVIDER_PLUGIN}-v{tools.plugin_version}"
    marker = plugin_dir.with_name(plugin_dir.name + ".source")
    source = f"{tools.provider} {tools.provider.stat().st_size} {tools.provider.stat().st_mtime_ns}"
    if marker.is_file() and marker.read_text() == source and (plugin_dir / tools.provider.name).is_file():
        return
    command = [
        str(tools.cli), "plugin", "install", "resource", PROVIDER_PLUGIN, tools.plugin_version,
        "--file", str(tools.provider),
    ]  # fmt: skip
    run_env = {**os.environ, **env}
    done = subprocess.run(command, env=run_env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EngineError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout.strip()}")
    marker.write_text(source)


# --- stack config and secrets (pure) ---------------------------------------------------------------


def _full_key(key: str) -> str:
    return key if ":" in key else f"{PROJECT}:{key}"


def engine_config(stack_document: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """From a stack file's document: the config to copy (native values, `secure:` ones left out,
    `target.platform: preinstalled` added) and the keys whose `secure:` value must be set at run
    time (their ciphertext belongs to another secrets provider)."""
    raw = stack_document.get("config")
    if not isinstance(raw, Mapping):
        raise EngineError("the stack file has no `config:` mapping")
    config: dict[str, Any] = {}
    secure: list[str] = []
    for key, value in raw.items():
        full = _full_key(str(key))
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            secure.append(full)
        else:
            config[full] = json.loads(json.dumps(value))
    target = config.setdefault(f"{PROJECT}:target", {})
    if not isinstance(target, dict):
        raise EngineError(f"{PROJECT}:target is not a mapping")
    target[PLATFORM_KEY] = PLATFORM_VALUE
    return config, sorted(secure)


# Sections that ask the stack to release a chart, which `preinstalled` refuses: in the twin, the
# vendored CRDs stand in for the chart, so the engine run switches each to the cluster's own
# (section key, path, value asked for, value used).
PREINSTALLED_SWITCHES = (
    (f"{PROJECT}:serving", ("autoscaling", "keda"), "install", "preinstalled"),
    (f"{PROJECT}:observability", ("prometheus",), "install", "operator"),
)


def twin_context(config: dict[str, Any], kubeconfig_text: str) -> list[str]:
    """Point a stack that names a kubeconfig context (local-sim: `kind-llmd`) at the twin's
    kubeconfig's current context instead; returns what was switched."""
    target = config.get(f"{PROJECT}:target")
    if not isinstance(target, dict) or "kubeconfigContext" not in target:
        return []
    current = (yaml.safe_load(kubeconfig_text) or {}).get("current-context")
    old, target["kubeconfigContext"] = target["kubeconfigContext"], current
    return [f"{PROJECT}:target.kubeconfigContext: {old} -> {current}"]


def preinstalled_switches(config: dict[str, Any]) -> list[str]:
    """Switch, in place, each section of `config` that asks for a chart to what the twin provides;
    returns what was switched (`key.path: old -> new`)."""
    switched = []
    for key, path, asked, used in PREINSTALLED_SWITCHES:
        node = config.get(key)
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) == asked:
            node[path[-1]] = used
            switched.append(f"{key}.{'.'.join(path)}: {asked} -> {used}")
    return switched


def run_secrets(secure_keys: Sequence[str], kubeconfig: str, token: Callable[[int], str]) -> dict[str, str]:
    """The secrets of the engine run, made now: the twin's kubeconfig, an hfToken (so the token
    Secret path runs), and a fresh value for every `secure:` key of the stack file."""
    values = {f"{PROJECT}:kubeconfig": kubeconfig, f"{PROJECT}:hfToken": f"hf_{token(16)}"}
    for key in secure_keys:
        values.setdefault(key, token(24))
    return values


def secret_forms(value: str) -> set[str]:
    """How a secret's value could appear in a state file: as is, JSON-escaped, base64 (a
    Secret's `data`). Multi-line values are also searched line by line (their longest lines)."""
    forms = {value, json.dumps(value)[1:-1], base64.b64encode(value.encode()).decode()}
    lines = sorted((line.strip() for line in value.splitlines() if len(line.strip()) >= 24), key=len)
    forms.update(lines[-3:])
    return {form for form in forms if form}


def leaked_secrets(state_text: str, values: Mapping[str, str]) -> list[str]:
    """The keys whose value appears, in any of its forms, in `state_text` (an exported state)."""
    return sorted(key for key, value in values.items() if any(f in state_text for f in secret_forms(value)))


def with_update(
    config: Mapping[str, Any], role: str = UPDATE_ROLE, key: str = UPDATE_KEY
) -> tuple[dict[str, Any], int, int]:
    """The config with the role's `key` halved (a serving-only change): (config, old, new)."""
    changed = json.loads(json.dumps(config))
    settings = changed[f"{PROJECT}:serving"]["roles"][role]
    old = int(settings[key])
    new = max(1, old // 2)
    if new == old:
        new = old + 1
    settings[key] = new
    return changed, old, new


# --- the run -----------------------------------------------------------------------------------------


@dataclass
class EngineRun:
    """What the engine run did: its step lines, the objects the first up created, the problems."""

    lines: list[str] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  {text}", flush=True)


def _changes(summary: Mapping[Any, int] | None) -> dict[str, int]:
    return {str(getattr(op, "value", op)): int(n) for op, n in (summary or {}).items()}


class Engine:
    """A stack of the program in a LocalWorkspace against the running twin: with the real Python
    language host, the project as a user's checkout has it (a copy with its own `.venv`, run by
    the CLI through the host); without the host's source snapshot, the Automation API's inline
    program in this process."""

    def __init__(self, stack: str, root: Path = cluster.PROJECT_ROOT, verbose: bool = True):
        from pulumi import automation as auto

        from llmd_fleet.cli.stack_file import load_stack_document, stack_file_path

        self.stack_name = stack
        self.verbose = verbose
        # The one stack reader (YAML 1.2 core scalars, as render and the Pulumi CLI read them).
        path = stack_file_path(root / "stacks", stack)
        self.config, secure = engine_config({"config": load_stack_document(path)})
        self.switched = preinstalled_switches(self.config)
        kubeconfig = cluster.twin_dir(root) / "kubeconfig"
        if not kubeconfig.is_file():
            raise EngineError(f"{kubeconfig} is missing: start the twin first (`make twin`)")
        self.secrets = run_secrets(secure, kubeconfig.read_text(), secrets.token_hex)
        self.switched += twin_context(self.config, kubeconfig.read_text())
        self.tools = ensure_tools(verbose)
        directory = engine_dir(root)
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(state_dir(root), ignore_errors=True)
        directory.mkdir(parents=True)
        state_dir(root).mkdir(parents=True)
        self.env = engine_env(directory / "home", secrets.token_hex(24), kubeconfig)
        install_provider(self.tools, self.env)
        command = auto.PulumiCommand(
            root=str(cli_root(self.tools.cli, directory / "cli")), skip_version_check=True
        )
        self.policy = PolicyResults((), 0, 0)
        self.synced_s = 0.0
        host = self.tools.host
        if host is None:
            self.work_dir = directory / "work"
            self.work_dir.mkdir()
            self.settings_dir = self.work_dir
            self.runtime_options: dict[str, str] = {}
            options = auto.LocalWorkspaceOptions(
                work_dir=str(self.work_dir),
                pulumi_home=self.env["PULUMI_HOME"],
                env_vars=self.env,
                secrets_provider="passphrase",
                project_settings=auto.ProjectSettings(
                    name=PROJECT,
                    runtime="python",
                    backend=auto.ProjectBackend(url=f"file://{state_dir(root)}"),
                ),
                pulumi_command=command,
            )
            self.stack = auto.create_or_select_stack(
                stack_name=stack, project_name=PROJECT, program=self._program, opts=options
            )
        else:
            self.work_dir = directory / "checkout"
            python_host.copy_checkout(root, self.work_dir)
            project = project_file(self.work_dir)
            self.runtime_options = project_runtime_options(project)
            self.settings_dir = self.work_dir / str(project.get("stackConfigDir") or ".")
            # The stack file's `secure:` values belong to another secrets provider: the run writes
            # its own settings (engine_config's config, secrets set below) in its place.
            (self.settings_dir / f"Pulumi.{stack}.yaml").unlink(missing_ok=True)
            venv = self.work_dir / ".venv"
            self.env.update(python_host.uv_env(os.environ))
            self.env.update(
                {
                    "PATH": os.pathsep.join([str(host.bin_dir), os.environ.get("PATH", "")]),
                    "VIRTUAL_ENV": str(venv),
                    "PULUMI_BACKEND_URL": f"file://{state_dir(root)}",
                }
            )
            self.synced_s = python_host.sync_venv(self.work_dir, {**os.environ, **self.env})
            options = auto.LocalWorkspaceOptions(
                work_dir=str(self.work_dir),
                pulumi_home=self.env["PULUMI_HOME"],
                env_vars=self.env,
                secrets_provider="passphrase",
                pulumi_command=command,
            )
            self.stack = auto.create_or_select_stack(
                stack_name=stack, work_dir=str(self.work_dir), opts=options
            )
        self._write_config(self.config)
        for key, value in self.secrets.items():
            self.stack.set_config(key, auto.ConfigValue(value=value, secret=True))

    @staticmethod
    def _program() -> None:
        from llmd_fleet.program import main

        main()

    def _settings_path(self) -> Path:
        return self.settings_dir / f"Pulumi.{self.stack_name}.yaml"

    def write_config(self, config: Mapping[str, Any]) -> None:
        """Set the stack's config to `config` (the next `up` deploys it)."""
        self._write_config(config)

    def _write_config(self, config: Mapping[str, Any]) -> None:
        """The stack settings the workspace made (secrets provider, salt, secrets) plus `config`."""
        path = self._settings_path()
        settings = yaml.safe_load(path.read_text()) if path.is_file() else {}
        current = settings.setdefault("config", {}) or {}
        settings["config"] = {**current, **config}
        path.write_text(yaml.safe_dump(settings, sort_keys=False))

    def _output(self, text: str) -> None:
        if self.verbose and text.strip():
            print(f"    {text.rstrip()}", flush=True)

    def _on_output(self) -> Callable[[str], None] | None:
        return self._output if os.environ.get("LLMD_FLEET_ENGINE_VERBOSE") else None

    def preview(self) -> Step:
        started = time.monotonic()
        result = self.stack.preview(color="never", on_output=self._on_output())
        return Step("preview", _changes(result.change_summary), time.monotonic() - started)

    def up(self, name: str = "up", policy: bool = False) -> Step:
        """`pulumi up`; with `policy` (and the real host), with the project's policy pack and its
        config for this stack, what the engine reports of it kept in `self.policy`."""
        started = time.monotonic()
        events: list[Any] = []
        extra: dict[str, Any] = {}
        if policy and self.tools.host is not None:
            pack = self.work_dir / POLICY_PACK
            config = pack / "config" / f"{self.stack_name}.json"
            extra = {"policy_packs": [str(pack)], "on_event": events.append}
            if config.is_file():
                extra["policy_pack_configs"] = [str(config)]
        result = self.stack.up(color="never", on_output=self._on_output(), **extra)
        if extra:
            self.policy = policy_results(sdk_event(event) for event in events)
        return Step(name, _changes(result.summary.resource_changes), time.monotonic() - started)

    def type_error_refused(self) -> tuple[str, int]:
        """`pulumi up` of the program with a type error added: the host's mypy run must refuse it
        before the program runs. Returns (what refused it, resources in the state afterwards);
        the program is restored either way."""
        from pulumi.automation.errors import CommandError

        main = self.work_dir / PROGRAM_MAIN
        original = main.read_text()
        main.write_text(original + TYPE_ERROR)
        try:
            self.stack.up(color="never", on_output=self._on_output())
            refused = ""
        except CommandError as error:
            text = str(error)
            refused = "mypy" if "mypy failed" in text and TYPE_ERROR_MESSAGE in text else ""
            if not refused:
                raise EngineError(
                    f"pulumi up of a program with a type error failed otherwise: {text}"
                ) from None
        finally:
            main.write_text(original)
        return refused, len(self.export().get("resources") or [])

    def about_host(self) -> dict[str, str]:
        """What `pulumi about --json` in the project says of the language host it ran."""
        return python_host.about_host(self.cli("about", "--json"))

    def update(self) -> tuple[Step, int, int]:
        changed, old, new = with_update(self.config)
        self._write_config(changed)
        return self.up("update"), old, new

    def cli(self, *args: str) -> str:
        """A CLI command on this stack, in the workspace (its backend, PULUMI_HOME, passphrase)."""
        command = [str(self.tools.cli), *args, "--stack", self.stack_name, "--non-interactive"]
        done = subprocess.run(
            command,
            cwd=self.work_dir,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise EngineError(f"pulumi {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def export(self) -> dict[str, Any]:
        """`pulumi stack export` as stored: secrets stay ciphertext (the Automation API's
        export_stack passes --show-secrets, which decrypts them)."""
        deployment: dict[str, Any] = json.loads(self.cli("stack", "export"))["deployment"]
        return deployment

    def state_text(self) -> str:
        """The exported state and every file of the backend on disk (state, backups, history)."""
        files = sorted(p for p in state_dir().rglob("*") if p.is_file())
        return json.dumps(self.export()) + "".join(p.read_text(errors="replace") for p in files)

    def unprotect(self) -> list[str]:
        """`pulumi state unprotect` for every resource the state protects; returns the URNs."""
        urns = protected_urns(self.export())
        for urn in urns:
            self.cli("state", "unprotect", urn, "--yes")
        return urns

    def destroy(self, left: Callable[[], int]) -> Step:
        started = time.monotonic()
        result = self.stack.destroy(color="never", on_output=self._on_output())
        counts = _changes(result.summary.resource_changes)
        seconds = time.monotonic() - started
        return Step("destroy", counts, seconds, left=left())

    def remove(self) -> None:
        self.stack.workspace.remove_stack(self.stack_name)


def project_file(checkout: Path) -> dict[str, Any]:
    """The project's Pulumi.yaml."""
    document = yaml.safe_load((checkout / "Pulumi.yaml").read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise EngineError(f"{checkout / 'Pulumi.yaml'} is not a mapping")
    return document


def project_runtime_options(project: Mapping[str, Any]) -> dict[str, str]:
    """Pulumi.yaml's `runtime.options` (empty for the short `runtime: python`)."""
    runtime = project.get("runtime")
    options = runtime.get("options") if isinstance(runtime, Mapping) else None
    return {str(k): str(v) for k, v in options.items()} if isinstance(options, Mapping) else {}


def objects_left(kube: Any, objects: Sequence[dict[str, Any]], grace_s: float = 30) -> int:
    """How many of `objects` the twin still serves; waits up to `grace_s` for ones being deleted
    (a namespace finalizing). Objects of kinds no longer served count as gone."""
    from devtools.twin.kube import ApiError

    def still() -> int:
        count = 0
        for obj in objects:
            try:
                kube.read(obj)
                count += 1
            except (ApiError, KeyError, LookupError):
                continue
        return count

    deadline = time.monotonic() + grace_s
    remaining = still()
    while remaining and time.monotonic() < deadline:
        time.sleep(1)
        remaining = still()
    return remaining


def ensure_platform(kube: Any) -> int:
    """What a preinstalled platform provides and the twin stands in for: every vendored CRD
    (schemas/crds/, applied server-side and Established) and the `gpu.nvidia.com` DeviceClass of
    the NVIDIA DRA driver's chart (`twin up` makes it too). Idempotent; returns the CRD count."""
    from devtools.twin import manifests, nodes
    from devtools.twin.kube import wait_for

    crds = manifests.vendored_crds()
    for obj in [*crds, nodes.gpu_device_class()]:
        kube.apply(obj)

    def established() -> bool:
        for crd in crds:
            conditions = (kube.read(crd).get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for("CRDs Established", established, timeout=60)
    return len(crds)


def run_engine(
    stack: str,
    after_up: Callable[[list[dict[str, Any]]], None] | None = None,
    root: Path = cluster.PROJECT_ROOT,
) -> EngineRun:
    """preview, up, [after_up(objects)], second up, update, the canary steps, destroy against the
    running twin."""
    run = EngineRun()
    kube = cluster.client(root)
    run.note(
        f"preinstalled platform (twin): {ensure_platform(kube)} vendored CRDs, DeviceClass gpu.nvidia.com"
    )
    engine = Engine(stack, root)
    provider = "built" if engine.tools.provider_built else "installed"
    run.note(
        f"Pulumi CLI {engine.tools.cli}; Kubernetes provider ({provider}) {engine.tools.provider}, "
        f"registered as {PROVIDER_PLUGIN} {engine.tools.plugin_version}"
    )
    for switch in engine.switched:
        run.note(f"config for the twin: {switch}")
    host = engine.tools.host
    if host is None:
        run.note(f"the Automation API's inline program in this process: {engine.tools.host_absent}")
        run.say(python_host.NOT_RUN_LINE)
    else:
        run.note(
            f"the project as a user's checkout in {engine.work_dir} (`uv sync --frozen` "
            f"{engine.synced_s:.1f} s, shared uv cache), run by {host.binary}"
        )
        started = time.monotonic()
        refused, resources = engine.type_error_refused()
        run.note(
            f"a type error in {PROGRAM_MAIN}: pulumi up refused by {refused or 'nothing'} before the program "
            f"ran, {resources} resources in the state ({time.monotonic() - started:.1f} s)"
        )
        if not refused or resources:
            run.problems.append("engine: a program with a type error was not stopped before any resource")
    run.say(step_line(engine.preview()))
    run.say(step_line(engine.up(policy=True)))
    if host is not None:
        about = engine.about_host()
        problems = python_host.host_problems(host, about, engine.runtime_options)
        if problems:
            run.problems.extend(f"engine: {problem}" for problem in problems)
        else:
            run.say(python_host.host_line(about, host.commit))
        run.say(policy_line(engine.policy))
        run.problems.extend(policy_problems(engine.policy))
    deployment = engine.export()
    run.created = kubernetes_objects(deployment)
    run.note(f"Kubernetes objects in the state after up: {len(run.created)}")
    leaks = leaked_secrets(engine.state_text(), engine.secrets)
    names = ", ".join(key.split(":", 1)[1] for key in sorted(engine.secrets))
    encrypted = len(engine.secrets) - len(leaks)
    run.note(
        f"secrets in the state: {len(engine.secrets)} set ({names}), {encrypted} encrypted, "
        f"{len(leaks)} in plain text"
    )
    if leaks:
        run.problems.append(f"engine: secrets in plain text in the state: {', '.join(leaks)}")
    if after_up is not None:
        after_up(run.created)
    run.say(step_line(engine.up("second up")))
    ds_before = _disaggregated_sets(kube, run.created)
    step, old, new = engine.update()
    run.say(step_line(step))
    ds_after = _disaggregated_sets(kube, run.created)
    for name, (uid, generation) in ds_before.items():
        after = ds_after.get(name)
        in_place = after is not None and after[0] == uid and after[1] > generation
        what = f"same object, generation {generation} -> {after[1]}" if after and in_place else "NOT in place"
        run.note(f"DisaggregatedSet {name}: {UPDATE_ROLE} {UPDATE_KEY} {old} -> {new}, {what}")
        if not in_place:
            run.problems.append(f"engine: DisaggregatedSet {name} was not updated in place")
    # Canary, rollback and promotion by `pulumi up` (canary.py), from the config the update left.
    run.problems.extend(
        canary.run_steps(
            with_update(engine.config)[0],
            engine.write_config,
            lambda name: engine.up(name).counts,
            kube,
            run.say,
        )
    )
    urns = engine.unprotect()
    run.note(
        "unprotected before destroy: "
        + (
            ", ".join(u.rsplit("::", 1)[-1] + f" ({u.split('::')[-2].rsplit('$', 1)[-1]})" for u in urns)
            or "nothing"
        )
    )
    run.say(step_line(engine.destroy(lambda: objects_left(kube, run.created))))
    engine.remove()
    run.problems.extend(step_failures([line for line in run.lines if not line.startswith(NOT_STEPS)]))
    return run


def _disaggregated_sets(kube: Any, objects: Sequence[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    found = {}
    for obj in objects:
        if obj["kind"] == "DisaggregatedSet":
            live = kube.read(obj)
            found[obj["metadata"]["name"]] = (
                live["metadata"]["uid"],
                int(live["metadata"].get("generation", 0)),
            )
    return found


def main(argv: Sequence[str]) -> int:
    from llmd_fleet.cli.stack_file import read_stack_file
    from llmd_fleet.core.problems import ConfigError

    positional = [a for a in argv if not a.startswith("--")]
    stack = positional[0] if positional else cluster.DEFAULT_STACK
    try:
        stack_file = read_stack_file(cluster.PROJECT_ROOT / "stacks", stack)
    except ConfigError as error:
        print(f"twin engine: {error}", file=sys.stderr)
        return 2
    kind = json.loads(stack_file.values.get(f"{PROJECT}:target", "{}")).get("kind")
    if kind not in TWIN_KINDS:
        print(
            f"twin engine: {stack} is kind {kind}: the engine run deploys kinds "
            f"{' and '.join(TWIN_KINDS)} into the twin (a {kind} stack creates cloud resources)",
            file=sys.stderr,
        )
        return 2
    if not cluster.state_path().is_file():
        print("twin engine: the twin is not up: `make twin` (TWIN_STACK=<stack>) first", file=sys.stderr)
        return 2
    from pulumi.automation.errors import CommandError

    try:
        run = run_engine(stack)
    except (EngineError, build.BuildError, CommandError) as error:
        print(f"twin engine: {str(error).strip()}", file=sys.stderr)
        return 1
    for problem in run.problems:
        print(f"  FAIL {problem}", file=sys.stderr)
    return 1 if run.problems else 0
