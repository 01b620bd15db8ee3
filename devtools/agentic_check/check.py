"""The rendered agentic API Deployment checked against the pinned binary.

    python -m devtools.agentic_check [STACK...]     (render first; `make check-responses`)

For every rendered stack with a `responses` section (build/<stack>/manifests), with the
`agentic-server` of the image tag's version (env.py):

1. every rendered argument (`--flag`) is an option `agentic-server --help` lists, and every
   rendered environment variable is one it lists (`[env: NAME]`) or one of `UNLISTED`, names the
   binary reads that its help does not print, each found in the binary;
2. `agentic-server --version` is the image tag's version;
3. the container starts as rendered (sandbox.py: read-only root, the rendered user, writable only
   at the rendered emptyDir mounts, the rendered environment and arguments) against a throwaway
   PostgreSQL over TLS (postgres.py) and an upstream stand-in answering /health; the process's
   user and mount table are read back from /proc, and every probe path of the container answers
   200 on its port;
4. the same container without `AGENTIC_API_HOME` must fail to start (the proof that the root is
   read-only and that the variable is what lets it start).

Only the upstream URL's value and the connection string's value are replaced (the cluster's
gateway and database do not exist here); every other rendered value is used as it is.
"""

import http.server
import os
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from devtools.agentic_check import env as agentic_env
from devtools.agentic_check import postgres, sandbox
from devtools.dataplane import netns
from devtools.vllm_check.env import EnvError
from llmd_fleet.cli.children import popen
from llmd_fleet.cli.stack_file import stack_names
from llmd_fleet.versions import versions

# Variables the binary reads that `--help` does not list, and what they do (each must occur in
# the binary; AGENTIC_API_HOME's effect is checked by step 4).
UNLISTED = {
    "AGENTIC_API_HOME": "the folder of config.toml (and of the SQLite file without DATABASE_URL)",
    "RUST_LOG": "the log filter (tracing's EnvFilter; the binary's own default is agentic_server=info,...)",
}
HOME_ERROR = "failed to create Agentic API home directory"
NAMESPACE = f"lfac-{os.getpid()}"
UPSTREAM_PORT = 8000
POSTGRES_PORT = 5432
START_SECONDS = 60

_T = TypeVar("_T")


@dataclass(frozen=True)
class HelpNames:
    flags: frozenset[str]
    env: frozenset[str]


def help_names(text: str) -> HelpNames:
    """Options (`--name`, aliases too) and environment variables (`[env: NAME...]`) of a clap
    help text (pure)."""
    flags = set(re.findall(r"^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", text, re.M))
    flags |= set(re.findall(r"\[alias: (--[a-z0-9-]+)\]", text))
    env = set(re.findall(r"\[env: ([A-Z0-9_]+)", text))
    return HelpNames(frozenset(flags), frozenset(env))


def agentic_deployment(manifests: Path) -> dict[str, Any] | None:
    """The rendered Deployment whose container runs the agentic API image, if any."""
    image = versions().image("agentic-api").ref
    for path in sorted(manifests.rglob("deployment-*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        containers = document.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
        if any(c.get("image") == image for c in containers):
            return document
    return None


def name_problems(container: dict[str, Any], names: HelpNames, binary: bytes) -> list[str]:
    """Rendered flags and variables the binary does not know (pure)."""
    problems = []
    for arg in container.get("args") or []:
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and flag not in names.flags:
            problems.append(f"argument {flag} is not an option of agentic-server --help")
    for var in container.get("env") or []:
        name = var["name"]
        if name in names.env:
            continue
        if name not in UNLISTED:
            problems.append(f"environment variable {name} is not one agentic-server --help lists")
        elif name.encode() not in binary:
            problems.append(f"environment variable {name} does not occur in the binary")
    return problems


def _in_ns(work: Callable[[], _T]) -> _T:
    return netns._in_namespace(NAMESPACE, work)


def get(port: int, path: str, timeout: float = 3.0) -> int | None:
    """The status of GET 127.0.0.1:port/path inside the check's namespace; None when nothing answers."""

    def request() -> int:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{port}{path}", timeout=timeout) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    try:
        return _in_ns(request)
    except OSError:
        return None


@dataclass
class Upstream:
    """The upstream stand-in: /health answers 200 (an engine that loaded its model), counted."""

    health_calls: int = 0
    server: socketserver.TCPServer | None = field(default=None, repr=False)

    def start(self) -> None:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/health":
                    owner.health_calls += 1
                self.send_response(200 if self.path == "/health" else 404)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", UPSTREAM_PORT), Handler, bind_and_activate=False
        )
        server.socket = netns._listen_in(NAMESPACE, "127.0.0.1", UPSTREAM_PORT)
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()


def container_env(container: dict[str, Any], database_url: str) -> dict[str, str]:
    """The rendered variables with the Secret's connection string replaced (pure)."""
    out = {}
    for var in container.get("env") or []:
        if "value" in var:
            out[var["name"]] = str(var["value"])
        elif var.get("valueFrom", {}).get("secretKeyRef"):
            out[var["name"]] = database_url
        else:
            raise ValueError(f"environment variable {var['name']}: only values and Secret keys are supported")
    return out


def container_mounts(pod: dict[str, Any], container: dict[str, Any]) -> list[sandbox.Mount]:
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = []
    for m in container.get("volumeMounts") or []:
        volume = volumes[m["name"]]
        if "emptyDir" not in volume:
            raise ValueError(f"volume {m['name']}: only emptyDir volumes are supported")
        mounts.append(sandbox.Mount(m["mountPath"], sandbox.tmpfs_size(volume["emptyDir"].get("sizeLimit"))))
    return mounts


def upstream_args(args: list[str], url: str) -> list[str]:
    """The rendered arguments with the upstream URL's value replaced (pure)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--llm-api-base":
            out[i + 1] = url
        elif arg.startswith("--llm-api-base="):
            out[i] = f"--llm-api-base={url}"
    return out


def writable_mounts(mountinfo: str) -> list[str]:
    """Mount points mounted read-write, from /proc/<pid>/mountinfo (pure)."""
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 5 and "rw" in fields[5].split(","):
            out.append(fields[4])
    return out


@dataclass
class Started:
    exit_code: int | None
    uid: int | None = None
    writable: list[str] = field(default_factory=list)
    probes: dict[str, int | None] = field(default_factory=dict)
    home_files: list[str] = field(default_factory=list)
    log: str = ""


def start(
    binary: Path, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str], log: Path
) -> Started:
    """Start the container as rendered, wait until its port answers (or it exits), read it back."""
    context = {**(pod.get("securityContext") or {}), **(container.get("securityContext") or {})}
    uid = int(context["runAsUser"])
    gid = int(context.get("runAsGroup", uid))
    port = int(container["ports"][0]["containerPort"])
    args = upstream_args(list(container.get("args") or []), f"http://127.0.0.1:{UPSTREAM_PORT}")
    text = sandbox.script(binary, args, container_mounts(pod, container), uid, gid)
    with log.open("w") as out:
        # Dies with this process (a SIGKILLed check leaves no agentic-server in its sandbox).
        proc = popen(
            sandbox.argv(NAMESPACE, text),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=sandbox.environment(env),
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and proc.poll() is None and get(port, "/health") != 200:
            time.sleep(0.3)
        if proc.poll() is not None:
            return Started(proc.returncode, log=log.read_text())
        started = Started(None)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        started.uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
        started.writable = writable_mounts(Path(f"/proc/{proc.pid}/mountinfo").read_text())
        home = env.get("AGENTIC_API_HOME")
        if home:
            folder = Path(f"/proc/{proc.pid}/root") / home.lstrip("/")
            started.home_files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            path = (container.get(kind) or {}).get("httpGet", {}).get("path")
            if path:
                started.probes[f"{kind} {path}"] = get(port, path)
        return started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def check_stack(
    stack: str,
    root: Path,
    binary: Path,
    names: HelpNames,
    binary_bytes: bytes,
    pg: postgres.Postgres,
    upstream: Upstream,
    work: Path,
) -> tuple[str, list[str]]:
    manifests = root / "build" / stack / "manifests"
    if not manifests.is_dir():
        return "", [f"{stack}: {manifests} is missing: run `llmd-fleet render {stack}` first"]
    deployment = agentic_deployment(manifests)
    if deployment is None:
        return f"{stack}: no responses section, nothing to check", []
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["image"] == versions().image("agentic-api").ref]
    problems = [f"{stack}: {p}" for p in name_problems(container, names, binary_bytes)]
    env = container_env(container, pg.url())
    mounts = {m["mountPath"] for m in container.get("volumeMounts") or []}
    before = upstream.health_calls
    run = start(binary, pod, container, env, work / f"{stack}.log")
    if run.exit_code is not None:
        tail = "\n".join(run.log.splitlines()[-5:])
        return "", [
            *problems,
            f"{stack}: the container exited {run.exit_code} before answering /health:\n{tail}",
        ]
    expected_uid = int(
        {**pod.get("securityContext", {}), **container.get("securityContext", {})}["runAsUser"]
    )
    if run.uid != expected_uid:
        problems.append(f"{stack}: runs as uid {run.uid}, rendered {expected_uid}")
    unexpected = sorted(
        set(run.writable) - mounts - {"/proc", "/dev"} - {m for m in run.writable if m.startswith("/dev/")}
    )
    if "/" in run.writable or unexpected:
        problems.append(f"{stack}: writable beyond the rendered mounts: {', '.join(unexpected or ['/'])}")
    for probe, status in run.probes.items():
        if status != 200:
            problems.append(f"{stack}: {probe} answered {status}")
    if upstream.health_calls == before:
        problems.append(f"{stack}: it started without asking the upstream's /health")
    home = env.get("AGENTIC_API_HOME")
    if home:
        if "config.toml" not in run.home_files:
            problems.append(f"{stack}: no config.toml in AGENTIC_API_HOME {home}")
        without = {k: v for k, v in env.items() if k != "AGENTIC_API_HOME"}
        negative = start(
            binary,
            pod,
            {**container, "env": [e for e in container["env"] if e["name"] != "AGENTIC_API_HOME"]},
            without,
            work / f"{stack}-without-home.log",
        )
        if negative.exit_code is None or HOME_ERROR not in negative.log:
            problems.append(
                f"{stack}: without AGENTIC_API_HOME it did not fail as a read-only root must make it"
            )
    summary = (
        f"{stack}: {len([a for a in container.get('args', []) if a.startswith('--')])} arguments and "
        f"{len(env)} environment variables known to the binary; "
        f"started as uid {run.uid} on a read-only root, "
        f"writable only at {', '.join(sorted(mounts))}; "
        + ", ".join(f"{p.split()[1]} {s}" for p, s in run.probes.items())
        + ("; without AGENTIC_API_HOME it exits 1 (read-only root)" if home else "")
    )
    return summary, problems


def main(argv: list[str]) -> int:
    root = Path.cwd()
    stacks = argv or stack_names(root / "stacks")
    try:
        binary = agentic_env.ensure()
        bindir = postgres.ensure_installed()
    except (EnvError, postgres.PostgresError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    version = agentic_env.agentic_version()
    reported = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True).stdout
    names = help_names(help_text)
    problems: list[str] = []
    if reported != f"agentic-server {version}":
        problems.append(f"the binary reports {reported!r}, the image tag is v{version}")
    print(f"agentic-api check: {reported} (image tag {versions().image('agentic-api').tag}), {binary}")
    work = Path(tempfile.mkdtemp(prefix="agentic-check-"))
    work.chmod(0o755)  # the server's own user reaches its folder below
    subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
    upstream = Upstream()
    pg = postgres.Postgres(
        work / "postgres",
        "127.0.0.1",
        POSTGRES_PORT,
        "agentic_api",
        "agentic_api",
        prefix=["ip", "netns", "exec", NAMESPACE],
        client_cidr="127.0.0.1/32",
        bindir=bindir,
    )
    try:
        subprocess.run(["ip", "-n", NAMESPACE, "link", "set", "lo", "up"], check=True)
        pg.init()
        upstream.start()
        print(
            f"agentic-api check: PostgreSQL {pg.major} (TLS) and an upstream answering /health "
            "on the namespace's loopback"
        )
        for stack in stacks:
            summary, found = check_stack(stack, root, binary, names, binary.read_bytes(), pg, upstream, work)
            if summary:
                print(summary)
            problems += found
    except postgres.PostgresError as exc:
        problems.append(str(exc))
    finally:
        upstream.stop()
        pg.stop()
        subprocess.run(["ip", "netns", "del", NAMESPACE], check=False)
    for problem in problems:
        print(f"FAILED {problem}")
    if problems:
        print(f"agentic-api check: logs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    verdict = "all pass" if not problems else f"{len(problems)} problem(s)"
    print(f"agentic-api check: {len(stacks)} stacks, {verdict}")
    return 1 if problems else 0
