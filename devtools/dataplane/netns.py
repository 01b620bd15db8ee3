"""The run's pod network: one network namespace per pod (its own loopback, so each pod's processes
bind the ports the rendering gives them, as in a cluster), one per picker replica and one for the
gateway stand-in, joined by a bridge in a namespace of its own. Nothing is added to the host's
network namespace; every address the run dials exists only inside these namespaces, except the
twin's API server on the host's loopback, which `Forwarder` brings into a namespace at the same
address (so the kubeconfig and the server's certificate stay as they are)."""

import contextlib
import ctypes
import json
import os
import selectors
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

CLONE_NEWNET = 0x40000000
# Every namespace of a run carries the run's process id (`lfdp<pid>-<name>`): two runs on one
# machine (two checkouts) each tear down their own, and a later run removes those of runs whose
# process is gone. Namespaces named `lfdp-...` by earlier versions of this tool are not ours to
# remove: a concurrent run of such a version tears them down itself.
STEM = "lfdp"
PREFIX = f"{STEM}{os.getpid()}-"
BRIDGE_NS = PREFIX + "net"
# `ip netns exec NAME` bind-mounts every file of /etc/netns/NAME over /etc (ip-netns(8)): a
# hosts file there is how a Service name resolves inside the run's namespaces, as cluster DNS
# would resolve it in a pod.
NETNS_ETC = Path("/etc/netns")


def ns_name(name: str) -> str:
    return PREFIX + name


def setup_commands(namespaces: Iterable[tuple[str, str]], prefix_len: int = 24) -> list[list[str]]:
    """The `ip` commands that create the bridge namespace and one namespace per (name, address)
    wired to it. Pure, so a test can read them."""
    commands = [
        ["ip", "netns", "add", BRIDGE_NS],
        ["ip", "-n", BRIDGE_NS, "link", "add", "br0", "type", "bridge"],
        ["ip", "-n", BRIDGE_NS, "link", "set", "br0", "up"],
    ]
    for index, (name, address) in enumerate(namespaces):
        commands += attach_commands(name, address, index, prefix_len)
    return commands


def mac_address(address: str) -> str:
    """The hardware address of the namespace holding IPv4 `address`: locally administered
    (02:00), then the address's four bytes. A run gives an address to one namespace at a time,
    and a namespace that takes over an address an earlier one held (one phase's pods after
    another's) gets that one's hardware address too, so a neighbour entry cached elsewhere stays
    right: with a fresh random one, a namespace that dials the address would send to the gone
    veth until its neighbour entry failed over, seconds later (ip-neighbour(8), STALE, DELAY,
    PROBE). Pure."""
    return "02:00:" + ":".join(f"{int(octet):02x}" for octet in address.split("."))


def attach_commands(name: str, address: str, index: int, prefix_len: int = 24) -> list[list[str]]:
    """The `ip` commands that add one namespace with `address` (and `mac_address`), wired to the
    bridge by the veth `v<index>` (an index no other namespace of the run has). Pure."""
    ns = ns_name(name)
    port = f"v{index}"
    return [
        ["ip", "netns", "add", ns],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "-n", BRIDGE_NS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns],
        ["ip", "-n", BRIDGE_NS, "link", "set", port, "master", "br0", "up"],
        ["ip", "-n", ns, "link", "set", "eth0", "address", mac_address(address)],
        ["ip", "-n", ns, "addr", "add", f"{address}/{prefix_len}", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ours(name: str, own_prefix: str = PREFIX, alive: Callable[[int], bool] = _alive) -> bool:
    """A namespace (or /etc/netns folder) of this run, or of a run whose process is gone (pure
    given `alive`)."""
    if name.startswith(own_prefix):
        return True
    head, sep, _ = name.partition("-")
    pid = head.removeprefix(STEM)
    return bool(sep) and head.startswith(STEM) and pid.isdigit() and not alive(int(pid))


def existing() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip() and ours(line.split()[0])]


def hosts_text(base: str, entries: dict[str, str]) -> str:
    """The host's hosts file with one line per (name, address) added. Pure."""
    lines = [base.rstrip("\n")] if base.strip() else []
    lines += [f"{address} {name}" for name, address in sorted(entries.items())]
    return "\n".join(lines) + "\n"


def write_hosts(names: Iterable[str], entries: dict[str, str], etc: Path = NETNS_ETC) -> None:
    """Give the namespaces `names` a hosts file with `entries` added (see NETNS_ETC)."""
    base = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    for name in names:
        folder = etc / ns_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(hosts_text(base, entries))


def teardown(etc: Path = NETNS_ETC) -> None:
    """Delete every namespace of this run (and of runs whose process is gone), the veths with
    them, and their per-namespace files under /etc/netns."""
    for ns in existing():
        subprocess.run(["ip", "netns", "del", ns], check=False)
    if etc.is_dir():
        for folder in etc.glob(STEM + "*"):
            if ours(folder.name):
                shutil.rmtree(folder, ignore_errors=True)


def setup(namespaces: list[tuple[str, str]]) -> None:
    teardown()
    for command in setup_commands(namespaces):
        subprocess.run(command, check=True)


def attach(name: str, address: str, index: int) -> None:
    """Add one namespace to the running network (after `setup`), as a pod that starts later."""
    for command in attach_commands(name, address, index):
        subprocess.run(command, check=True)


def detach(name: str) -> None:
    """Delete one namespace (its processes stopped first); its veth goes with it."""
    subprocess.run(["ip", "netns", "del", ns_name(name)], check=False)


def exec_prefix(name: str, hostname: str | None = None) -> list[str]:
    """Run a command inside the namespace; with `hostname`, in its own UTS namespace too (the
    picker's leader-election identity is the host name, which pods have each their own of)."""
    prefix = ["ip", "netns", "exec", ns_name(name)]
    if hostname:
        prefix += ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$0" "$@"']
    return prefix


_T = TypeVar("_T")


def _in_namespace(ns: str, work: Callable[[], _T]) -> _T:
    """`work()` run in a thread that has entered network namespace `ns` (setns applies to the
    calling thread only, so the caller's namespace is untouched); its result or its exception."""
    box: dict[str, _T | BaseException] = {}

    def enter() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {ns}")
            os.close(fd)
            box["result"] = work()
        except BaseException as exc:  # reported in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


def _listen_in(ns: str, host: str, port: int) -> socket.socket:
    """A listening socket created inside namespace `ns` (the socket keeps the namespace)."""

    def listen() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
        return sock

    return _in_namespace(ns, listen)


def fetch(name: str, url: str, timeout: float = 5.0) -> str | None:
    """GET `url` from inside the run's namespace `name`; None on an error."""

    def get() -> str:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=timeout) as resp:
            return str(resp.read().decode())

    try:
        return _in_namespace(ns_name(name), get)
    except OSError:
        return None


def post_status(url: str, body: dict[str, Any], timeout: float = 10.0) -> int:
    """POST `body` as JSON to `url` from the calling thread's namespace; the HTTP status, whatever
    it is (raises OSError when nothing answers: refused, reset, timed out)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with opener.open(request, timeout=timeout) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as error:
        error.read()
        return int(error.code)


def post(name: str, url: str, body: dict[str, Any], timeout: float = 10.0) -> int | None:
    """`post_status` from inside the run's namespace `name`; None when nothing answered."""
    try:
        return _in_namespace(ns_name(name), lambda: post_status(url, body, timeout))
    except OSError:
        return None


def connects(name: str, host: str, port: int, timeout: float = 2.0) -> bool:
    """A TCP connection to host:port opens from inside the run's namespace `name`."""

    def connect() -> bool:
        with socket.create_connection((host, port), timeout=timeout):
            return True

    try:
        return _in_namespace(ns_name(name), connect)
    except OSError:
        return False


def splice(client: socket.socket, upstream: socket.socket) -> None:
    """Bytes both ways between two connected sockets until either side closes; the upstream-to-client
    direction in a thread of its own, this call returning when the client side ends."""
    upstream.settimeout(None)
    client.settimeout(None)

    def copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=copy, args=(upstream, client), daemon=True).start()
    copy(client, upstream)


class Forwarder:
    """TCP from `host:port` inside the given namespaces to the same `host:port` on the host."""

    def __init__(self, namespaces: list[str], host: str, port: int):
        self.target = (host, port)
        self.listeners = [_listen_in(ns_name(n), host, port) for n in namespaces]
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        sel = selectors.DefaultSelector()
        for sock in self.listeners:
            sel.register(sock, selectors.EVENT_READ)
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.5):
                client, _addr = key.fileobj.accept()  # type: ignore[union-attr]
                threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        splice(client, upstream)

    def close(self) -> None:
        self.stop.set()
        for sock in self.listeners:
            sock.close()
