"""`python -m devtools.twin up|down|status [STACK]`: the control plane on loopback.

    up       build or reuse the binaries, make certificates and build/twin/kubeconfig, start etcd,
             kube-apiserver (DRA on: resource.k8s.io/v1), kube-controller-manager, kube-scheduler
             and kwok, then create the stack's fake nodes and their ResourceSlices
    down     stop what `up` started (by the process ids it recorded) and delete the etcd data
    status   which processes run, API server readiness, nodes ready and ResourceSlices

Everything listens on 127.0.0.1 only, on free ports chosen at `up` and recorded in
build/twin/state.json. `up --apiserver-only` starts etcd and kube-apiserver alone (no nodes): the
subset that proves admission, defaulting and CEL validation. The processes keep running after
`up` returns; `down` ends them.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from devtools.twin import build, nodes
from devtools.twin.kube import ApiError, Kube, wait_for
from devtools.twin.modules import wrappers
from devtools.twin.pki import FRONT_PROXY_CLIENT, SERVICE_CIDR, Pki, ensure_pki, kubeconfig_text
from llmd_fleet.cli.paths import CHECKOUT

PROJECT_ROOT = CHECKOUT
DEFAULT_STACK = "onprem-h100"
LOOPBACK = "127.0.0.1"
# Order of start; `down` stops in reverse.
CONTROL_PLANE = ("etcd", "kube-apiserver")
NODE_SIDE = ("kube-controller-manager", "kube-scheduler", "kwok")
PORT_NAMES = ("etcd", "etcd_peer", "etcd_metrics", "apiserver", "kwok")
# A control plane that does not come up is started once more on new ports with a new store (a
# port taken between choosing and binding, a slow first start on a loaded machine); the second
# failure is reported with the end of the component's log.
CONTROL_PLANE_ATTEMPTS = 2
ETCD_READY_SECONDS = 60
APISERVER_READY_SECONDS = 150
# kwok's own stage definitions, read from its module at the pinned version (node readiness and
# lease heartbeats, pod readiness, completion and deletion), relative to the module root.
KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


class TwinError(Exception):
    """The twin could not be brought up (or is not up)."""


@dataclass
class State:
    """build/twin/state.json: what `up` started and where it listens."""

    stack: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)
    components: list[str] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['apiserver']}"


def twin_dir(root: Path = PROJECT_ROOT) -> Path:
    return root / "build" / "twin"


def state_path(root: Path = PROJECT_ROOT) -> Path:
    return twin_dir(root) / "state.json"


def load_state(root: Path = PROJECT_ROOT) -> State:
    path = state_path(root)
    if not path.is_file():
        raise TwinError("the twin is not up (no build/twin/state.json): run `make twin-up`")
    return State(**json.loads(path.read_text()))


def client(root: Path = PROJECT_ROOT, state: State | None = None) -> Kube:
    state = state or load_state(root)
    pki = Pki(twin_dir(root) / "pki")
    return Kube(state.server, str(pki.ca_cert), str(pki.admin_cert), str(pki.admin_key))


def free_port() -> int:
    return free_ports(["port"])["port"]


def free_ports(names: Sequence[str]) -> dict[str, int]:
    """One free port per name, all different: every socket stays bound until all are chosen (one
    at a time, the kernel may hand out a port it just released)."""
    sockets = []
    try:
        for _ in names:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((LOOPBACK, 0))
        return {name: int(sock.getsockname()[1]) for name, sock in zip(names, sockets, strict=True)}
    finally:
        for sock in sockets:
            sock.close()


def log_tail(path: Path, lines: int = 8) -> str:
    """The last lines of a component's log, indented, for an error message."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "    (no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(f"    {line[:300]}" for line in tail) or "    (empty log)"


def _alive(pid: int, binary: str) -> bool:
    """Whether `pid` still runs `binary` (a recycled pid running something else is not ours)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return cmdline == binary


def command_lines(state: State, directory: Path, pki: Pki, kwok_config: Path | None) -> dict[str, list[str]]:
    """The command line of every component (pure apart from paths)."""
    b, p = state.binaries, state.ports
    kubeconfig = str(directory / "kubeconfig")
    etcd_url = f"http://{LOOPBACK}:{p['etcd']}"
    peer_url = f"http://{LOOPBACK}:{p['etcd_peer']}"
    lines = {
        "etcd": [
            b["etcd"], "--name=twin", f"--data-dir={directory / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=twin={peer_url}", f"--listen-metrics-urls=http://{LOOPBACK}:{p['etcd_metrics']}",
            # A disposable store: no fsync (the twin is rebuilt, never recovered).
            "--unsafe-no-fsync", "--log-level=warn",
        ],
        "kube-apiserver": [
            b["kube-apiserver"], f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
            f"--secure-port={p['apiserver']}",
            f"--tls-cert-file={pki.server_cert}", f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=RBAC",
            "--allow-privileged=true", "--profiling=false",
            # The `kubernetes` Service cannot have a loopback endpoint (validation refuses it);
            # nothing in the twin reaches the API server through that Service.
            "--endpoint-reconciler-type=none",
            # DRA: resource.k8s.io/v1 is GA and on by default in 1.34; said explicitly here.
            "--runtime-config=resource.k8s.io/v1=true",
            # The aggregation layer (Kubernetes "Configure the Aggregation Layer"): the front
            # proxy's CA and the names aggregated API servers accept, the header names, and the
            # client certificate the API server proxies with; the day-two replay's
            # external-metrics stand-in serves behind it (devtools/daytwo/scaling.py).
            f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
            f"--proxy-client-key-file={pki.front_proxy_client_key}",
        ],
        "kube-controller-manager": [
            b["kube-controller-manager"], f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            "--secure-port=0", f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            # `*` includes horizontalpodautoscaling (the day-two replay's HPA, scaling.py).
            "--use-service-account-credentials=false", "--controllers=*",
            # Fake nodes have no pod CIDR allocator to wait for.
            "--allocate-node-cidrs=false",
        ],
        "kube-scheduler": [
            b["kube-scheduler"], f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=0",
        ],
    }  # fmt: skip
    if kwok_config is not None:
        lines["kwok"] = [
            b["kwok"], f"--kubeconfig={kubeconfig}", f"--config={kwok_config}",
            f"--manage-nodes-with-annotation-selector={next(iter(nodes.KWOK_ANNOTATION))}=fake",
            "--node-lease-duration-seconds=40", f"--server-address={LOOPBACK}:{p['kwok']}",
            f"--node-ip={LOOPBACK}", "--cidr=10.64.0.1/12",
        ]  # fmt: skip
    return lines


def kwok_stages(kwok_module_dir: Path, kubelet_nodes: Sequence[str] = ()) -> str:
    """kwok's default stages as one multi-document YAML (read from the module, never copied into
    the repository), its pod stages kept off the pods of `kubelet_nodes` (`without_pods_on`)."""
    text = "\n---\n".join((kwok_module_dir / rel).read_text() for rel in KWOK_STAGE_FILES)
    return without_pods_on(text, kubelet_nodes) if kubelet_nodes else text


def without_pods_on(stages: str, node_names: Sequence[str]) -> str:
    """The stages with every Pod stage's selector also requiring `.spec.nodeName` not in
    `node_names` (a kwok selector key is a jq expression; kwok v0.8.0
    pkg/apis/v1alpha1/stage_types.go SelectorRequirement): kwok keeps those nodes Ready and their
    leases fresh, while another kubelet (devtools/daytwo/kubelet.py) runs, readies and deletes
    their pods. Pure."""
    docs = [d for d in yaml.safe_load_all(stages) if d]
    for doc in docs:
        if doc.get("kind") != "Stage" or doc["spec"]["resourceRef"].get("kind") != "Pod":
            continue
        selector = doc["spec"].setdefault("selector", {})
        selector.setdefault("matchExpressions", []).append(
            {"key": ".spec.nodeName", "operator": "NotIn", "values": list(node_names)}
        )
    return "\n---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


def _module_dir(wrapper_dir: Path, module: str) -> Path:
    out = subprocess.run(
        ["go", "list", "-m", "-json", module], cwd=wrapper_dir, capture_output=True, text=True, check=False
    )
    info = json.loads(out.stdout or "{}")
    if "Dir" not in info:
        subprocess.run(["go", "mod", "download", module], cwd=wrapper_dir, check=True)
        out = subprocess.run(
            ["go", "list", "-m", "-json", module], cwd=wrapper_dir, capture_output=True, text=True, check=True
        )
        info = json.loads(out.stdout)
    return Path(info["Dir"])


def binaries(apiserver_only: bool) -> tuple[dict[str, Path], list[str]]:
    """Paths of every binary that could be had, and the problems of those that could not."""
    found: dict[str, Path] = {}
    problems = []
    names = ["etcd", "kubernetes"] if apiserver_only else ["etcd", "kubernetes", "kwok"]
    for name in names:
        try:
            found.update(build.ensure(wrappers()[name]))
        except build.BuildError as error:
            problems.append(str(error))
    return found, problems


def _start(name: str, argv: list[str], logs: Path) -> int:
    return _launch(name, argv, logs).pid


def _launch(name: str, argv: list[str], logs: Path) -> "subprocess.Popen[bytes]":
    with (logs / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def up(
    stack: str = DEFAULT_STACK,
    apiserver_only: bool = False,
    root: Path = PROJECT_ROOT,
    kubelet_nodes: Sequence[str] = (),
) -> State:
    """Start the twin with `stack`'s nodes; kwok runs no pod on `kubelet_nodes` (their pods are
    another kubelet's, `without_pods_on`)."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    directory = twin_dir(root)
    if state_path(root).is_file():
        old = load_state(root)
        if any(_alive(pid, old.binaries.get(n, "")) for n, pid in old.pids.items()):
            raise TwinError("the twin is already up: `make twin-down` first")
        state_path(root).unlink()
    config = stack_config(read_stack_file(root / "stacks", stack))
    found, problems = binaries(apiserver_only)
    for problem in problems:
        print(f"twin: {problem}", file=sys.stderr)
    if not {"etcd", "kube-apiserver"} <= set(found):
        raise TwinError("etcd and kube-apiserver are required and could not be had")
    components = list(CONTROL_PLANE)
    if not apiserver_only and {"kube-controller-manager", "kube-scheduler", "kwok"} <= set(found):
        components += list(NODE_SIDE)
    elif not apiserver_only:
        print("twin: node side unavailable; API server only", file=sys.stderr)
    directory.mkdir(parents=True, exist_ok=True)
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)
    pki = ensure_pki(directory / "pki")
    kwok_config = None
    if "kwok" in components:
        kwok_config = directory / "kwok-stages.yaml"
        kwok_wrapper = wrappers()["kwok"]
        kwok_module = _module_dir(kwok_wrapper.directory, kwok_wrapper.module)
        kwok_config.write_text(kwok_stages(kwok_module, kubelet_nodes))
    started = time.monotonic()
    paths = {k: str(v) for k, v in found.items()}
    for attempt in range(1, CONTROL_PLANE_ATTEMPTS + 1):
        state = State(stack=stack, ports=free_ports(PORT_NAMES), binaries=paths, components=components)
        (directory / "kubeconfig").write_text(kubeconfig_text(state.server, pki))
        (directory / "kubeconfig").chmod(0o600)
        lines = command_lines(state, directory, pki, kwok_config)
        try:
            _start_control_plane(state, lines, logs, root)
            break
        except BaseException as error:
            _stop(state)
            shutil.rmtree(directory / "etcd-data", ignore_errors=True)
            if not isinstance(error, TwinError) or attempt == CONTROL_PLANE_ATTEMPTS:
                print(f"twin: up failed; logs in {logs}", file=sys.stderr)
                state_path(root).unlink(missing_ok=True)
                raise
            print(f"twin: {error}\ntwin: starting the control plane again on new ports", file=sys.stderr)
    try:
        kube = client(root, state)
        wait_for("resource.k8s.io/v1 served", lambda: _serves(kube, "resource.k8s.io/v1"), timeout=30)
        for name in NODE_SIDE:
            if name in components:
                state.pids[name] = _start(name, lines[name], logs)
                _save(state, root)
        print(f"twin: control plane ready in {time.monotonic() - started:.0f} s at {state.server}")
        if "kwok" in components:
            _create_nodes(kube, config.fleet.node_groups)
    except BaseException:
        print(f"twin: up failed; logs in {logs}", file=sys.stderr)
        down(root)
        raise
    return state


def _start_control_plane(state: State, lines: dict[str, list[str]], logs: Path, root: Path) -> None:
    """Start etcd, then kube-apiserver, each waited for while its process lives; a component that
    exits or does not answer in time is a TwinError carrying the end of its log."""
    etcd_health = f"http://{LOOPBACK}:{state.ports['etcd']}/health"
    loopback = requests.Session()
    loopback.trust_env = False  # no proxy from the environment for a loopback address

    def etcd_healthy() -> bool:
        try:
            return loopback.get(etcd_health, timeout=2).ok
        except requests.RequestException:
            return False

    kube = client(root, state)
    for name, ready, timeout in (
        ("etcd", etcd_healthy, ETCD_READY_SECONDS),
        ("kube-apiserver", kube.ready, APISERVER_READY_SECONDS),
    ):
        process = _launch(name, lines[name], logs)
        state.pids[name] = process.pid
        _save(state, root)
        _wait_while_running(name, process, ready, timeout, logs / f"{name}.log")


def _wait_while_running(
    name: str, process: "subprocess.Popen[bytes]", ready: Callable[[], bool], timeout: int, log: Path
) -> None:
    """Wait for `ready` while `process` runs; a TwinError with the end of its log if it exits
    first or is not ready in `timeout` seconds."""

    def ready_while_running() -> bool:
        if ready():
            return True
        if process.poll() is not None:
            raise TwinError(f"{name} exited at start; the end of its log:\n{log_tail(log)}")
        return False

    try:
        wait_for(f"{name} ready", ready_while_running, timeout=timeout, interval=0.5)
    except TimeoutError:
        raise TwinError(f"{name} not ready after {timeout} s; the end of its log:\n{log_tail(log)}") from None


def _stop(state: State) -> None:
    """Stop every recorded process still running our binary (SIGTERM, then SIGKILL after 15 s)."""
    for name in reversed(list(state.pids)):
        pid = state.pids[name]
        if not _alive(pid, state.binaries.get(name, "")):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _alive(pid, state.binaries[name]) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid, state.binaries[name]):
            os.kill(pid, signal.SIGKILL)
        print(f"twin: stopped {name} ({pid})")


def _serves(kube: Kube, group_version: str) -> bool:
    try:
        kube.get(f"/apis/{group_version}")
    except ApiError:
        return False
    return True


def _create_nodes(kube: Kube, node_groups: Any) -> None:
    started = time.monotonic()
    objects = list(nodes.twin_objects(node_groups))
    for obj in objects:
        kube.apply(obj)
    node_count = sum(1 for o in objects if o["kind"] == "Node")
    slice_count = sum(1 for o in objects if o["kind"] == "ResourceSlice")
    wait_for(
        f"{node_count} nodes Ready (kwok)",
        lambda: ready_nodes(kube) >= node_count,
        timeout=180,
        interval=2,
    )
    print(
        f"twin: {node_count} nodes Ready, {slice_count} ResourceSlices ({time.monotonic() - started:.0f} s)"
    )


def ready_nodes(kube: Kube) -> int:
    count = 0
    for node in kube.list("v1", "Node"):
        for condition in node.get("status", {}).get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                count += 1
    return count


def _save(state: State, root: Path) -> None:
    state_path(root).write_text(json.dumps(state.__dict__, indent=2) + "\n")


def down(root: Path = PROJECT_ROOT) -> None:
    """Stop every process `up` recorded (only those still running our binary), then delete the
    etcd data and the state file. Certificates and logs stay."""
    path = state_path(root)
    if not path.is_file():
        print("twin: not up")
        return
    _stop(load_state(root))
    shutil.rmtree(twin_dir(root) / "etcd-data", ignore_errors=True)
    path.unlink()


def status(root: Path = PROJECT_ROOT) -> int:
    """Print the state of every component; 0 when all recorded processes run and the API is ready."""
    try:
        state = load_state(root)
    except TwinError as error:
        print(f"twin: {error}")
        return 1
    healthy = True
    for name in state.components:
        pid = state.pids.get(name)
        running = pid is not None and _alive(pid, state.binaries.get(name, ""))
        healthy &= running
        print(f"{name:<24} {'running' if running else 'STOPPED'} pid={pid}")
    kube = client(root, state)
    ready = kube.ready()
    healthy &= ready
    print(f"{'api server':<24} {'ready' if ready else 'NOT READY'} {state.server}")
    if ready:
        print(f"{'nodes ready':<24} {ready_nodes(kube)} / {len(kube.list('v1', 'Node'))}")
        print(f"{'resourceslices':<24} {len(kube.list('resource.k8s.io/v1', 'ResourceSlice'))}")
    print(f"{'kubeconfig':<24} {twin_dir(root) / 'kubeconfig'}")
    if "kubectl" in state.binaries:
        print(f"{'kubectl':<24} {state.binaries['kubectl']} --kubeconfig {twin_dir(root) / 'kubeconfig'}")
    return 0 if healthy else 1


def main(argv: Sequence[str]) -> int:
    command, rest = argv[0], list(argv[1:])
    apiserver_only = "--apiserver-only" in rest
    positional = [a for a in rest if not a.startswith("--")]
    stack = positional[0] if positional else DEFAULT_STACK
    try:
        if command == "up":
            up(stack, apiserver_only)
            return 0
        if command == "down":
            down()
            return 0
        return status()
    except (TwinError, TimeoutError, ApiError, build.BuildError) as error:
        print(f"twin: {error}", file=sys.stderr)
        return 1
