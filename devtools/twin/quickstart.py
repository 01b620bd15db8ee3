"""`make quickstart-twin`: walk docs/quickstart.md as a user would, against a fresh twin.

    python -m devtools.twin quickstart [--keep | --keep-twin]
        --keep: leave the twin up and the walk's directory; --keep-twin: leave only the twin up,
        after a pass, for `make doctor-twin DOCTOR_TWIN_ARGS=--shared` (CI)

The commands are not written here: they are read from docs/quickstart.md, every ```bash block of
its "Deploy" section (the deploy commands, then `llmd-fleet status ... --watch`) and of its "Tear
down" section, so the document and this walk cannot drift. Each logical line (a trailing `\\`
joins lines, comment lines are skipped) runs as written under `bash -c`, in order, in a copy of
the checkout (its tracked and untracked files) whose `.venv` is made as `make setup` makes it
(`uv sync --frozen` from uv.lock, no resolution, the caller's uv cache shared), with:

- HOME a fresh temporary directory (so `file://$HOME/.pulumi-state` is a file backend there) and
  PULUMI_HOME its `.pulumi` (the CLI's plugins, credentials and workspaces: new), HF_TOKEN a
  made-up token, PULUMI_CONFIG_PASSPHRASE made at run time, PULUMI_SKIP_CONFIRMATIONS=true (no
  terminal answers `pulumi up`'s and `destroy`'s prompts), no KUBECONFIG: the cluster is reached
  only through the `kubeconfig.yaml` the document names, which is the twin's;
- PATH: the copy's `.venv/bin` (the "environment activated" of the document), the real Python
  language host (python_host.py: built from its source snapshot, with its exec script beside it)
  and the Pulumi CLI the twin builds, with the Kubernetes provider installed in
  $PULUMI_HOME/plugins; UV_FROZEN and the shared UV_CACHE_DIR for the host's own `uv sync`.

The host runs the program as Pulumi.yaml asks (`toolchain: uv`, `typechecker: mypy`: mypy over
`infra/` before the program) and the policy pack (`toolchain: uv`, `virtualenv: ../.venv`). Each
`pulumi up` gets `--event-log` added (it records the engine's events, nothing else changes); after
it, `pulumi about --json` and the host's `-version` give the line `engine: language host ...`,
and the analyzer results in the events the line `policy: <pack> ran in pulumi up: M mandatory, A
advisory` (the walk fails unless M is 0). Without the host's source snapshot the walk is not run
(`quickstart: not run: ...`, exit 0): no stand-in takes the host's place.

Each command's output is written to `logs/` of the walk's temporary directory, which is removed
after a pass and kept (its path printed) after a failure or with --keep.

The twin is prepared as a cluster with `target.platform: preinstalled` would be (engine.py's
ensure_platform: the vendored CRDs and the `gpu.nvidia.com` DeviceClass; the LWS controller built
from its source snapshot, else the twin's stand-in creates the DisaggregatedSet's pods after `pulumi
up`; kwok makes the pods Ready), with the stand-ins devtools/twin/install.py lists for what a real
install leaves (the gateway's class and controller Deployment), so the document's `llmd-fleet
doctor` before `pulumi up` finds what it checks. The Deploy section's commands after the status
command (`llmd-fleet doctor ... --deployed`) run once every group is ready, after the walk sets the
Gateway's address as its controller would; doctor's lines are printed. After them, the state is
exported (its Kubernetes objects; the token must not be in it in plain text), the tear-down commands
run, and none of those objects may be left. One line per step: `quickstart: <step> ok (N.N s)`, then
`quickstart: passed`, or `quickstart: FAIL ...` naming the step and the command.
"""

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.twin import cluster, python_host

DOC = Path("docs") / "quickstart.md"
STACK = "quickstart-h100"
DEPLOY_SECTION = "Deploy"
TEARDOWN_SECTION = "Tear down"
KUBECONFIG_FILE = "kubeconfig.yaml"
COMMAND_TIMEOUT_S = 900.0
STATUS_TIMEOUT_S = 180.0
STATUS_COMMAND = "llmd-fleet status"
DOCTOR_COMMAND = "llmd-fleet doctor"
GATEWAY_ADDRESS = "10.96.0.80"
"""The Gateway's address the walk sets as a gateway controller would (a service-range address of
the twin: doctor reads it, nothing is sent to it)."""
# Characters that end a step's name: the first word holding a value (a quote, a variable, a
# substitution) and everything after it are left out of the name.
_VALUE = re.compile(r"[\"'$`(]")
_FENCE = re.compile(r"^```(\w*)\s*$")
_GROUPS = re.compile(r"(\w+) (\d+)/(\d+) groups ready")


class QuickstartError(Exception):
    """The document does not have what the walk needs (a section, a command)."""


# --- the document (pure) --------------------------------------------------------------------------


def section(markdown: str, heading: str) -> str:
    """The text under `## <heading>` up to the next heading of level 2 or above."""
    lines = markdown.splitlines()
    start = None
    fenced = False
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced:
            continue  # a `# comment` in a code block is not a heading
        elif start is None and line.strip() == f"## {heading}":
            start = i + 1
        elif start is not None and re.match(r"^#{1,2} ", line):
            return "\n".join(lines[start:i])
    if start is None:
        raise QuickstartError(f"{DOC} has no section `## {heading}`")
    return "\n".join(lines[start:])


def shell_blocks(text: str) -> list[str]:
    """The bodies of the ```bash (or ```sh, ```shell) fenced blocks of `text`, in order."""
    blocks: list[str] = []
    body: list[str] | None = None
    keep = False
    for line in text.splitlines():
        fence = _FENCE.match(line.strip())
        if fence and body is None:
            body, keep = [], fence.group(1) in ("bash", "sh", "shell")
        elif line.strip() == "```" and body is not None:
            if keep:
                blocks.append("\n".join(body))
            body = None
        elif body is not None:
            body.append(line)
    return blocks


def commands(block: str) -> list[str]:
    """The logical command lines of a shell block: lines ending in `\\` joined to the next (the
    backslash and the indentation dropped), blank lines and comment lines skipped. A trailing
    comment stays: bash ignores it."""
    found: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        found.append(pending + line)
        pending = ""
    if pending:
        raise QuickstartError(f"a command ends in a line continuation: {pending.strip()!r}")
    return found


def without_comment(command: str) -> str:
    """The command without a trailing `  # ...` comment (outside quotes)."""
    quote = ""
    for i, char in enumerate(command):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.strip()


def step_name(command: str, max_words: int = 6) -> str:
    """A step's name in the output: the command's words up to the first one holding a value
    (quotes, `$`, a substitution), at most `max_words`."""
    words: list[str] = []
    for word in without_comment(command).split():
        if _VALUE.search(word) or len(words) == max_words:
            break
        words.append(word)
    return " ".join(words)


@dataclass(frozen=True)
class Walk:
    """The commands of the walk, as the document gives them."""

    deploy: list[str]
    """The deploy block's commands, in order (before the status command)."""
    status: str
    """`llmd-fleet status STACK ... --watch`: follows the rollout until every group is ready."""
    teardown: list[str]
    after: list[str] = field(default_factory=list)
    """The deploy section's commands after the status command (`llmd-fleet doctor ... --deployed`):
    they check what the deploy made, once every group is ready."""


def walk_commands(markdown: str) -> Walk:
    """The deploy, status and tear-down commands of docs/quickstart.md."""
    deploy = [c for block in shell_blocks(section(markdown, DEPLOY_SECTION)) for c in commands(block)]
    status = [c for c in deploy if c.startswith(STATUS_COMMAND)]
    if len(status) != 1:
        raise QuickstartError(
            f"{DOC} `## {DEPLOY_SECTION}` has {len(status)} `{STATUS_COMMAND}` commands, not 1"
        )
    at = deploy.index(status[0])
    if not any(c.startswith("pulumi up") for c in deploy[:at]):
        raise QuickstartError(f"{DOC} `## {DEPLOY_SECTION}`: `{STATUS_COMMAND}` comes before `pulumi up`")
    teardown = [c for block in shell_blocks(section(markdown, TEARDOWN_SECTION)) for c in commands(block)]
    if not teardown:
        raise QuickstartError(f"{DOC}: no tear-down commands")
    return Walk(deploy=deploy[:at], status=status[0], teardown=teardown, after=deploy[at + 1 :])


def groups_ready(output: str) -> tuple[bool, str]:
    """From `llmd-fleet status` output: whether its last `groups` line shows every role's groups
    ready (ready == desired > 0 for each), and that line."""
    lines = [line for line in output.splitlines() if line.startswith("groups ")]
    if not lines:
        return False, ""
    last = lines[-1]
    roles = _GROUPS.findall(last)
    ok = bool(roles) and all(int(ready) == int(desired) > 0 for _, ready, desired in roles)
    return ok, " ".join(last.split()[1:])


_PACK = re.compile(r"^\s+(?:\S+\s+)?([\w./-]+@v[\w.+-]+ \([^)]*\))\s*$")


def policy_packs(output: str) -> list[str]:
    """The packs a `pulumi up`/`preview` output lists under `Policies:` (their status mark
    dropped), each once, e.g. `llmd-fleet@v0.1.0 (local: policies)`; the findings listed under
    a pack are not packs."""
    packs: list[str] = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "Policies:":
            continue
        for entry in lines[i + 1 :]:
            if not entry.startswith(" ") or not entry.strip():
                break
            match = _PACK.match(entry)
            if match and match.group(1) not in packs:
                packs.append(match.group(1))
    return packs


def policy_findings(output: str) -> dict[str, int]:
    """The findings of the last `Policies:` section of an output (the update's, after the
    preview's), by enforcement level: `- [advisory] [severity: low]  image-digest ...`."""
    sections = output.split("\nPolicies:\n")
    if len(sections) < 2:
        return {}
    found: dict[str, int] = {}
    for line in sections[-1].splitlines():
        if not line.strip():
            break
        match = re.match(r"^\s+- \[(\w+)\]", line)
        if match:
            found[match.group(1)] = found.get(match.group(1), 0) + 1
    return found


def resource_changes(output: str) -> dict[str, int]:
    """The `Resources:` summary of a `pulumi up` or `destroy` output: operation -> count
    (`+ 31 created` -> created 31, `- 31 deleted` -> deleted 31, `5 unchanged`)."""
    found: dict[str, int] = {}
    for match in re.finditer(
        r"^\s+[-+~]?\s*(\d+) (created|deleted|updated|replaced|unchanged)\b", output, re.M
    ):
        found[match.group(2)] = found.get(match.group(2), 0) + int(match.group(1))
    return found


# --- the environment --------------------------------------------------------------------------------


def walk_env(base: Mapping[str, str], home: Path, path: Sequence[Path], venv: Path) -> dict[str, str]:
    """The environment of every command: the caller's, less anything pointing Pulumi or kubectl
    elsewhere, plus a fresh HOME, PATH first through `path`, and the activated virtualenv."""
    dropped = ("KUBECONFIG", "PULUMI_")
    env = {k: v for k, v in base.items() if not k.startswith(dropped)}
    env.update(
        {
            "HOME": str(home),
            # The CLI finds its home (plugins, credentials, workspaces) through the user database,
            # not HOME: said explicitly so that nothing of the walk lands in the real ~/.pulumi.
            "PULUMI_HOME": str(home / ".pulumi"),
            "PATH": os.pathsep.join([*(str(p) for p in path), base.get("PATH", "")]),
            "VIRTUAL_ENV": str(venv),
            "HF_TOKEN": f"hf_{secrets.token_hex(16)}",
            "PULUMI_CONFIG_PASSPHRASE": secrets.token_hex(24),
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        }
    )
    return env


# --- the run ---------------------------------------------------------------------------------------


class StepFailed(Exception):
    def __init__(self, step: str, command: str, detail: str):
        self.step, self.command, self.detail = step, command, detail
        super().__init__(f"{step}: `{command}` {detail}")


@dataclass
class Quiet:
    """A Reporter (lws_checks) that keeps what it is told; failures are printed."""

    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def figure(self, name: str, value: str) -> None:
        self.lines.append(f"{name}: {value}")

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)
            print(f"quickstart: FAIL {message}", flush=True)

    def line(self, text: str) -> None:
        self.lines.append(text)


def say(step: str, seconds: float, detail: str = "") -> None:
    print(f"quickstart: {step} ok ({seconds:.1f} s){f': {detail}' if detail else ''}", flush=True)


class Walker:
    def __init__(self, root: Path, directory: Path, env: dict[str, str]):
        self.root, self.directory, self.env = root, directory, env
        self.checkout = directory / "checkout"
        self.count = 0
        self.count_events = 0

    def run(
        self,
        command: str,
        timeout: float = COMMAND_TIMEOUT_S,
        step: str = "",
        detail: Any = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """One command as written, under bash, in the checkout copy (`env` added to the walk's
        environment); its standard output on success. `detail(stdout)` gives the text after
        `ok (N s):`, or raises StepFailed."""
        step = step or step_name(command)
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.checkout,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            out = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
            raise StepFailed(step, command, f"did not finish in {timeout:.0f} s\n{tail(out)}") from None
        output = done.stdout + done.stderr
        self.count += 1
        log = (
            self.directory / "logs" / f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', step).strip('-')}.log"
        )
        log.parent.mkdir(exist_ok=True)
        log.write_text(output)
        if done.returncode != 0:
            raise StepFailed(step, command, f"exited {done.returncode} (its output: {log})\n{tail(output)}")
        say(step, time.monotonic() - started, detail(done.stdout) if detail else "")
        return done.stdout


def up_detail(command: str, output: str) -> str:
    """What `pulumi up` did: resources created, the policy packs it ran. A command that names a
    policy pack whose output lists none fails (the pack did not run)."""
    changes = resource_changes(output)
    packs = policy_packs(output)
    if "--policy-pack" in command and not packs:
        raise StepFailed(step_name(command), command, "listed no policy pack: the pack did not run")
    # The SDK lists a policy that read a value unknown at preview as an advisory "can't run
    # policy" finding; it checked nothing, in the preview or the update.
    not_run = sorted(set(re.findall(r"can't run policy '([\w-]+)'", output)))
    if not_run:
        raise StepFailed(step_name(command), command, f"policies did not run: {', '.join(not_run)}")
    findings = ", ".join(f"{n} {level}" for level, n in sorted(policy_findings(output).items())) or "none"
    ran = ", ".join(packs) or "none"
    return f"{changes.get('created', 0)} created; policy packs: {ran} (findings: {findings})"


def deploy(walker: Walker, command: str, host: python_host.Host) -> None:
    """A `pulumi up` of the document, with `--event-log` added (it records the engine's events and
    changes nothing else; the CLI offers it under `PULUMI_DEBUG_COMMANDS=true`, as the Automation
    API runs it); then the language host's and the policy pack's lines, from what
    `pulumi about --json` says of the host and from the analyzer results in those events."""
    from devtools.twin.engine import project_file, project_runtime_options
    from devtools.twin.engine_report import event_log, policy_line, policy_problems, policy_results

    walker.count_events += 1
    log = walker.directory / f"events-{walker.count_events}.jsonl"
    walker.run(
        f"{command} --event-log {shlex.quote(str(log))}",
        step=step_name(command),
        detail=lambda out: up_detail(command, out),
        # The CLI offers `--event-log` with its debug flags only, as the Automation API uses it.
        env={"PULUMI_DEBUG_COMMANDS": "true"},
    )
    results = policy_results(event_log(log.read_text()) if log.is_file() else [])
    about = python_host.about_host(walker.run(f"pulumi about --json --stack {STACK}", step="pulumi about"))
    options = project_runtime_options(project_file(walker.checkout))
    problems = python_host.host_problems(host, about, options)
    if problems:
        raise StepFailed("language host", "pulumi about --json", "; ".join(problems))
    print(python_host.host_line(about, host.commit), flush=True)
    print(policy_line(results), flush=True)
    problems = policy_problems(results)
    if problems:
        raise StepFailed(step_name(command), command, "; ".join(problems))


def tail(text: str, lines: int = 25) -> str:
    return "\n".join(f"    {line}" for line in text.rstrip().splitlines()[-lines:])


def prepare_twin(report: Quiet) -> tuple[Any, Any]:
    """A fresh twin with the stack's nodes, and what a `preinstalled` cluster runs: the vendored
    CRDs, the GPU DeviceClass, the LWS controller when its source is there. (kube, controller)."""
    from devtools.twin import lws_checks
    from devtools.twin.engine import ensure_platform

    if cluster.state_path().is_file():
        cluster.down()
    started = time.monotonic()
    state = cluster.up(STACK)
    kube = cluster.client(state=state)
    crds = ensure_platform(kube)
    controller = lws_checks.start_controller(state, kube, report)
    who = (
        "the LWS controller (built from its source snapshot)"
        if controller
        else "the twin's stand-in for the LWS controller (no source snapshot)"
    )
    say(
        "twin up",
        time.monotonic() - started,
        f"{len(kube.list('v1', 'Node'))} nodes; preinstalled platform: {crds} vendored CRDs, "
        f"DeviceClass gpu.nvidia.com, DisaggregatedSet pods by {who}",
    )
    return kube, controller


def install_standins(kube: Any, lws_running: bool) -> None:
    """What a real install of the platform leaves beside the twin's CRDs and DeviceClass (the
    gateway's class and controller Deployment, the LWS webhooks without the controller), so the
    document's `llmd-fleet doctor` before `pulumi up` finds a prepared cluster
    (devtools/twin/install.py lists each stand-in)."""
    from devtools.twin import install

    started = time.monotonic()
    made = install.prepare(kube, lws_running)
    say("install stand-ins", time.monotonic() - started, "; ".join(made))


def set_gateway_addresses(kube: Any) -> str:
    """What the gateway controller does once it programs a Gateway: its address in the status (no
    controller runs in the twin; the address is the twin's, nothing is sent to it)."""
    from devtools.dataplane.run import gateway_status

    named = []
    for gateway in kube.list("gateway.networking.k8s.io/v1", "Gateway"):
        kube.request(
            "PATCH",
            kube.object_path(gateway) + "/status",
            gateway_status(GATEWAY_ADDRESS),
            "application/merge-patch+json",
        )
        named.append(f"{gateway['metadata']['namespace']}/{gateway['metadata']['name']}")
    if not named:
        raise StepFailed("gateway address (stand-in)", "(the twin)", "the deploy made no Gateway")
    return f"{', '.join(named)} at {GATEWAY_ADDRESS}, as its controller would set it"


def doctor_summary(output: str) -> str:
    """`llmd-fleet doctor` passed (it exits 1 on a FAIL): its summary line as the step's detail."""
    lines = output.strip().splitlines()
    return lines[-1] if lines else "no output"


def doctor_detail(output: str) -> str:
    """As doctor_summary, with doctor's lines printed first at column 0 (after the deploy: the
    checks `make doctor-twin` does not run)."""
    for line in output.strip().splitlines():
        print(line, flush=True)
    return doctor_summary(output)


def stand_in_pods(kube: Any, report: Quiet) -> None:
    """What the LWS controller would do after `pulumi up`: the DisaggregatedSet's pods."""
    from devtools.twin import pods
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    config = stack_config(read_stack_file(cluster.PROJECT_ROOT / "stacks", STACK))
    ds = kube.get(
        f"/apis/disaggregatedset.x-k8s.io/v1/namespaces/{config.serving.namespace}"
        f"/disaggregatedsets/{config.serving.name}"
    )
    started = time.monotonic()
    pods.schedule(kube, [ds], report, keep=True)
    if report.failures:
        raise StepFailed("stand-in pods", "(the twin's stand-in for the LWS controller)", report.failures[-1])
    say("stand-in pods (LWS controller absent)", time.monotonic() - started, "bound and Ready by kwok")


def walk(keep: bool = False, keep_twin: bool = False) -> int:
    """The walk; `keep` leaves the twin and the walk's directory, `keep_twin` (CI: `make
    doctor-twin` shares it next) only the twin, and only after a pass."""
    from devtools.twin import build
    from devtools.twin.engine import cli_root, ensure_tools, install_provider, leaked_secrets, objects_left
    from devtools.twin.engine_report import kubernetes_objects
    from devtools.twin.kube import ApiError

    root = cluster.PROJECT_ROOT
    started = time.monotonic()
    steps = walk_commands((root / DOC).read_text(encoding="utf-8"))
    # `pulumi up` of this project needs the Python language host: no stand-in takes its place, so
    # without its source nothing is built or started.
    try:
        python_host.RECIPE.snapshot(python_host.pins())
    except python_host.SnapshotMissing as missing:
        print(f"quickstart: not run: no Python language host ({missing})", flush=True)
        return 0
    tools = ensure_tools(verbose=True)
    if tools.host is None:
        print(f"quickstart: not run: no Python language host ({tools.host_absent})", flush=True)
        return 0
    host = tools.host
    directory = Path(tempfile.mkdtemp(prefix="llmd-fleet-quickstart-"))
    home = directory / "home"
    home.mkdir()
    bin_dir = cli_root(tools.cli, directory / "cli") / "bin"
    walker = Walker(root, directory, {})
    copied = python_host.copy_checkout(root, walker.checkout)
    venv = walker.checkout / ".venv"
    walker.env = walk_env(os.environ, home, [venv / "bin", host.bin_dir, bin_dir], venv)
    walker.env.update(python_host.uv_env(os.environ))
    install_provider(tools, {"PULUMI_HOME": str(home / ".pulumi")})
    print(
        f"quickstart: {len(steps.deploy)} deploy, 1 status, {len(steps.after)} after-deploy and "
        f"{len(steps.teardown)} tear-down commands "
        f"from {DOC}; {copied} files of the checkout in {walker.checkout}",
        flush=True,
    )
    try:
        say(
            "uv sync --frozen",
            python_host.sync_venv(walker.checkout, walker.env),
            "the copy's .venv from uv.lock (make setup's sync), shared uv cache",
        )
    except python_host.BuildError as error:
        print(f"quickstart: FAIL at step `uv sync --frozen`: {error}", flush=True)
        shutil.rmtree(directory, ignore_errors=True)
        return 1
    report = Quiet()
    not_checked: list[str] = []
    objects: list[dict[str, Any]] = []
    deployed = False
    failed: StepFailed | None = None
    try:
        kube, controller = prepare_twin(report)
        if report.failures:
            raise StepFailed("twin up", "(the twin)", report.failures[-1])
        install_standins(kube, controller is not None)
        shutil.copy(cluster.twin_dir() / "kubeconfig", walker.checkout / KUBECONFIG_FILE)
        for command in steps.deploy:
            if command.startswith("pulumi up"):
                deployed = True
                deploy(walker, command, host)
            else:
                walker.run(command, detail=doctor_summary if command.startswith(DOCTOR_COMMAND) else None)
        if not controller:
            stand_in_pods(kube, report)
        status_started = time.monotonic()
        if controller:
            output = walker.run(steps.status, timeout=STATUS_TIMEOUT_S, step="llmd-fleet status --watch")
            ok, groups = groups_ready(output)
            if not ok:
                raise StepFailed(
                    "every group ready", steps.status, f"not every group ready: {groups or output}"
                )
            say("every group ready", time.monotonic() - status_started, groups)
        else:
            # It must still run and read the cluster; what it counts is the stand-in's work.
            output = walker.run(
                steps.status,
                timeout=STATUS_TIMEOUT_S,
                step="llmd-fleet status --watch",
                detail=lambda out: "ran and read the twin; its groups are the stand-in's pods",
            )
            groups = groups_ready(output)[1]
            not_checked.append(
                "every group ready: no LWS controller ran (no source snapshot); the twin's stand-in made "
                f"the pods and labels them as the controller would, so the groups status read ({groups}) "
                "are the stand-in's, not the controller's"
            )
            print("quickstart: every group ready NOT CHECKED (LWS stand-in, see below)", flush=True)
        if steps.after:
            gateways = set_gateway_addresses(kube)
            say("gateway address (stand-in)", 0.0, gateways)
        for command in steps.after:
            walker.run(command, detail=doctor_detail if command.startswith(DOCTOR_COMMAND) else None)
        exported = json.loads(walker.run(f"pulumi stack export --stack {STACK}", step="pulumi stack export"))
        objects = kubernetes_objects(exported["deployment"])
        state_files = sorted(p for p in (home / ".pulumi-state").rglob("*") if p.is_file())
        state_text = json.dumps(exported) + "".join(p.read_text(errors="replace") for p in state_files)
        leaks = leaked_secrets(state_text, {"hfToken": walker.env["HF_TOKEN"]})
        if leaks:
            raise StepFailed("state", "pulumi stack export", f"secrets in plain text: {', '.join(leaks)}")
        say("state", 0.0, f"{len(objects)} Kubernetes objects; hfToken not in plain text")
        for command in steps.teardown:
            if command.startswith("pulumi destroy"):
                walker.run(command, detail=lambda out: f"{resource_changes(out).get('deleted', 0)} deleted")
            else:
                walker.run(command)
        deployed = False
        left_started = time.monotonic()
        left = objects_left(kube, objects)
        if left:
            raise StepFailed(
                "nothing left", "pulumi destroy", f"{left} of {len(objects)} objects still served"
            )
        say(
            "nothing left",
            time.monotonic() - left_started,
            f"0 of {len(objects)} objects of the stack served",
        )
    except StepFailed as error:
        failed = error
    except (build.BuildError, cluster.TwinError, TimeoutError, ApiError) as error:
        failed = StepFailed("twin", "(the twin)", str(error))
    finally:
        if deployed and failed is not None:
            try:
                walker.run(f"pulumi destroy --stack {STACK}", step="clean-up destroy")
            except StepFailed as error:
                print(f"quickstart: clean-up destroy failed: {error.detail}", flush=True)
        if not (keep or (keep_twin and failed is None)):
            cluster.down()
    print(f"quickstart: wall time {time.monotonic() - started:.0f} s", flush=True)
    for what in not_checked:
        print(f"quickstart: not checked: {what}", flush=True)
    if failed is not None:
        print(
            f"quickstart: FAIL at step `{failed.step}`: command `{failed.command}` {failed.detail}",
            flush=True,
        )
        print(
            f"quickstart: the copy, HOME, state and each command's output (logs/) are kept in {directory}",
            flush=True,
        )
        return 1
    if keep:
        print(f"quickstart: the copy, HOME, state and each command's output (logs/) are kept in {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    print("quickstart: passed" + (" (with what was not checked, above)" if not_checked else ""), flush=True)
    return 0


def main(argv: Sequence[str]) -> int:
    from devtools.twin.build import BuildError
    from devtools.twin.engine import EngineError

    try:
        return walk(keep="--keep" in argv, keep_twin="--keep-twin" in argv)
    except QuickstartError as error:
        print(f"quickstart: FAIL: {error}", file=sys.stderr)
    except (BuildError, EngineError) as error:
        print(
            f"quickstart: FAIL at step `tools` (the Pulumi CLI, Python language host and Kubernetes "
            f"provider): {error}",
            file=sys.stderr,
        )
    return 1
