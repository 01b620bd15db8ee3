"""Fabric preflight probe: moves data between two NIXL agents over the fleet's KV backend, checks
every byte and fails when the throughput is below the fabric's threshold.

This file is self-contained (the standard library, plus `nixl` and `numpy` where the probe runs):
the preflight Job mounts it from a ConfigMap rendered from this very file and runs it in the
serving image, which has the NIXL the engines use; `make preflight-probe` runs it in a cached
environment with the pinned NIXL (llmd_fleet/tools/preflight_probe/env.py). Nothing here imports
the rest of the package.

Two processes take part: the *target* (Job completion index 0) registers a buffer filled with a
seeded pattern, listens on the metadata port and hands its NIXL agent metadata and buffer address
to the *initiator* (index 1), which sends its own metadata back. The initiator then READs the
target's buffer (decode pulling KV from prefill, as vLLM's NixlConnector does) and WRITEs a second
pattern into it, each `--iterations` times after one untimed warm-up, through the NIXL backend
named by `--backend` (UCX on InfiniBand/RoCE and TCPXO, LIBFABRIC on EFA) with NIXL's progress
thread on. The initiator verifies what it read; the target verifies what was written. The verdict
(PASS when every byte matched and both directions reached `--nic-gbps` x `--efficiency`; with
`--rate-gate off`, where the fabric has no rate to gate on, every byte matching is enough and the
rates are only reported) goes back to the target, and both processes exit with it: 0 pass, 1
below the threshold or a byte mismatch, 2 the probe could not run (no peer, no backend, a failed
transfer). Each process logs its steps and ends with one summary line that starts with
`preflight:`.
"""

import argparse
import json
import os
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

SUMMARY_PREFIX = "preflight:"
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
MIB = 1024 * 1024
READ_SEED = 1
WRITE_SEED = 2
_FRAME = struct.Struct(">I")
_MAX_FRAME = 64 * MIB


class ProbeError(Exception):
    """The probe could not run to a verdict (exit 2)."""


@dataclass(frozen=True)
class Threshold:
    """The slowest acceptable transfer rate: one fabric NIC's line rate times an efficiency."""

    nic_gbps: float
    """Line rate of one GPU-fabric NIC of the node group, in Gb/s (nicGbps)."""
    efficiency: float
    """Fraction of that line rate each direction must reach (serving.preflight.minEfficiency)."""
    gated: bool = True
    """False: the rates are reported, not judged (a fabric without a known reachable rate)."""

    @property
    def min_gbps(self) -> float:
        return self.nic_gbps * self.efficiency if self.gated else 0.0

    def describe(self) -> str:
        return f"{self.min_gbps:.1f}Gb/s" if self.gated else "ungated"


@dataclass(frozen=True)
class Measurement:
    """What the initiator measured."""

    backend: str
    bytes_per_transfer: int
    iterations: int
    read_gbps: float
    write_gbps: float
    read_verified: bool
    write_verified: bool

    @property
    def verified_bytes(self) -> int:
        """Bytes checked one by one: the read buffer on the initiator, the written one on the target."""
        return self.bytes_per_transfer * (int(self.read_verified) + int(self.write_verified))


def verdict(measurement: Measurement, threshold: Threshold) -> tuple[bool, list[str]]:
    """(passed, reasons it failed): every byte matched and both directions reached the threshold."""
    reasons = []
    if not measurement.read_verified:
        reasons.append("the bytes READ from the target differ from its buffer")
    if not measurement.write_verified:
        reasons.append("the bytes WRITTEN to the target differ from what was sent")
    for direction, gbps in (("READ", measurement.read_gbps), ("WRITE", measurement.write_gbps)):
        if threshold.gated and gbps < threshold.min_gbps:
            reasons.append(
                f"{direction} {gbps:.1f} Gb/s is below {threshold.min_gbps:.1f} Gb/s "
                f"({threshold.nic_gbps:g} Gb/s x {threshold.efficiency:g})"
            )
    return not reasons, reasons


def summary_line(measurement: Measurement, threshold: Threshold, passed: bool, peer: str) -> str:
    """The one-line result both pods print last (`kubectl logs` and the Job's own log)."""
    return (
        f"{SUMMARY_PREFIX} {'PASS' if passed else 'FAIL'} backend={measurement.backend} peer={peer} "
        f"size={measurement.bytes_per_transfer // MIB}MiB iterations={measurement.iterations} "
        f"read={measurement.read_gbps:.1f}Gb/s write={measurement.write_gbps:.1f}Gb/s "
        f"threshold={threshold.describe()} verified={measurement.verified_bytes}B"
    )


def gbps(total_bytes: int, seconds: float) -> float:
    """Gigabits per second (10^9 bits, as NIC line rates are quoted)."""
    return total_bytes * 8 / seconds / 1e9 if seconds > 0 else float("inf")


def log(role: str, message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {role}: {message}", flush=True)


# --- metadata exchange: length-prefixed frames over one TCP connection -------------------------


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_FRAME.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ProbeError("the peer closed the metadata connection")
        chunks += chunk
    return bytes(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = _FRAME.unpack(_recv_exact(sock, _FRAME.size))
    if size > _MAX_FRAME:
        raise ProbeError(f"a metadata frame of {size} bytes is larger than {_MAX_FRAME}")
    return _recv_exact(sock, size)


def send_json(sock: socket.socket, value: dict[str, Any]) -> None:
    send_frame(sock, json.dumps(value, sort_keys=True).encode())


def recv_json(sock: socket.socket) -> dict[str, Any]:
    value = json.loads(recv_frame(sock))
    if not isinstance(value, dict):
        raise ProbeError("a metadata frame is not a JSON object")
    return value


def connect(host: str, port: int, deadline: float) -> socket.socket:
    """Connect to the target, retrying until `deadline` (its pod may start later)."""
    last: OSError | None = None
    while time.monotonic() < deadline:
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError as exc:  # not resolvable or not listening yet
            last = exc
            time.sleep(2)
    raise ProbeError(f"no target at {host}:{port}: {last}")


# --- NIXL ----------------------------------------------------------------------------------------


def pattern(seed: int, size: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8)


def make_agent(name: str, backend: str) -> Any:
    """A NIXL agent with only `backend`, its progress thread on, no listener (metadata goes over
    the probe's own connection)."""
    from nixl._api import nixl_agent, nixl_agent_config

    config = nixl_agent_config(enable_prog_thread=True, enable_listen_thread=False, backends=[backend])
    agent = nixl_agent(name, config)
    if backend not in agent.backends:
        raise ProbeError(f"NIXL backend {backend} did not load (plugins found: {agent.get_plugin_list()})")
    return agent


def agent_name(loaded: Any) -> str:
    """The name add_remote_agent returns (bytes from the pinned NIXL's binding, str elsewhere)."""
    return loaded.decode() if isinstance(loaded, bytes) else str(loaded)


def register(agent: Any, buffer: Any, backend: str) -> tuple[Any, Any]:
    """Register `buffer` (host memory) with `backend`; (registration, transfer descriptors)."""
    import numpy as np

    region = np.array([[buffer.ctypes.data, buffer.nbytes, 0]], dtype=np.uint64)
    registration = agent.register_memory(region, "DRAM", backends=[backend])
    return registration, agent.get_xfer_descs(region, "DRAM")


def timed_transfers(agent: Any, handle: Any, iterations: int, timeout: float) -> float:
    """Post the prepared transfer once untimed, then `iterations` times; the timed seconds."""

    def once() -> None:
        state = agent.transfer(handle)
        limit = time.monotonic() + timeout
        while state == "PROC":
            if time.monotonic() > limit:
                raise ProbeError(f"a transfer did not finish within {timeout:.0f} s")
            state = agent.check_xfer_state(handle)
        if state != "DONE":
            raise ProbeError(f"a transfer failed (state {state})")

    once()  # connection setup and first-touch costs stay out of the figure
    started = time.perf_counter()
    for _ in range(iterations):
        once()
    return time.perf_counter() - started


def run_target(args: argparse.Namespace) -> int:
    import numpy as np

    role = "target"
    size = args.size_mib * MIB
    agent = make_agent(f"{args.name}-target", args.backend)
    buffer = pattern(READ_SEED, size)
    registration, _ = register(agent, buffer, args.backend)
    log(role, f"registered {args.size_mib} MiB of host memory with {args.backend}")
    with socket.create_server(("", args.port)) as server:
        server.settimeout(args.timeout)
        log(role, f"waiting for the initiator on port {args.port}")
        try:
            conn, peer = server.accept()
        except TimeoutError as exc:
            raise ProbeError(f"no initiator connected within {args.timeout} s") from exc
        with conn:
            conn.settimeout(args.timeout)
            send_json(conn, {"agent": agent.name, "address": int(buffer.ctypes.data), "size": size})
            send_frame(conn, agent.get_agent_metadata())
            remote = agent_name(agent.add_remote_agent(recv_frame(conn)))
            log(role, f"exchanged agent metadata with {remote} ({peer[0]})")
            request = recv_json(conn)  # the initiator is done writing
            written = bool(np.array_equal(buffer, pattern(WRITE_SEED, size)))
            log(role, f"verified the written buffer: {'match' if written else 'MISMATCH'}")
            send_json(conn, {"write_verified": written})
            result = recv_json(conn)
    agent.deregister_memory(registration, backends=[args.backend])
    print(result.get("summary", f"{SUMMARY_PREFIX} FAIL no verdict from the initiator"), flush=True)
    del request
    return EXIT_PASS if result.get("passed") else EXIT_FAIL


def run_initiator(args: argparse.Namespace) -> int:
    import numpy as np

    role = "initiator"
    size = args.size_mib * MIB
    threshold = Threshold(nic_gbps=args.nic_gbps, efficiency=args.efficiency, gated=args.rate_gate == "on")
    agent = make_agent(f"{args.name}-initiator", args.backend)
    buffer = np.zeros(size, dtype=np.uint8)
    registration, local = register(agent, buffer, args.backend)
    deadline = time.monotonic() + args.timeout
    with connect(args.peer, args.port, deadline) as conn:
        conn.settimeout(args.timeout)
        hello = recv_json(conn)
        remote = agent_name(agent.add_remote_agent(recv_frame(conn)))
        send_frame(conn, agent.get_agent_metadata())
        if hello.get("size") != size or remote != hello.get("agent"):
            raise ProbeError(f"the target offers {hello}, expected {size} bytes from {remote}")
        log(role, f"exchanged agent metadata with {remote} at {args.peer}:{args.port}")
        remote_descs = agent.get_xfer_descs(np.array([[hello["address"], size, 0]], dtype=np.uint64), "DRAM")
        moved = size * args.iterations

        read = agent.initialize_xfer("READ", local, remote_descs, remote, backends=[args.backend])
        read_seconds = timed_transfers(agent, read, args.iterations, args.timeout)
        read_verified = bool(np.array_equal(buffer, pattern(READ_SEED, size)))
        log(
            role,
            f"READ {moved} bytes in {read_seconds:.3f} s; bytes {'match' if read_verified else 'DIFFER'}",
        )

        buffer[:] = pattern(WRITE_SEED, size)
        write = agent.initialize_xfer("WRITE", local, remote_descs, remote, backends=[args.backend])
        write_seconds = timed_transfers(agent, write, args.iterations, args.timeout)
        log(role, f"WRITE {moved} bytes in {write_seconds:.3f} s")
        send_json(conn, {"written": True})
        write_verified = bool(recv_json(conn).get("write_verified"))

        measurement = Measurement(
            backend=args.backend,
            bytes_per_transfer=size,
            iterations=args.iterations,
            read_gbps=gbps(moved, read_seconds),
            write_gbps=gbps(moved, write_seconds),
            read_verified=read_verified,
            write_verified=write_verified,
        )
        passed, reasons = verdict(measurement, threshold)
        for reason in reasons:
            log(role, reason)
        line = summary_line(measurement, threshold, passed, remote)
        send_json(conn, {"passed": passed, "summary": line, "measurement": asdict(measurement)})
    read.release()
    write.release()
    agent.remove_remote_agent(remote)
    agent.deregister_memory(registration, backends=[args.backend])
    print(line, flush=True)
    return EXIT_PASS if passed else EXIT_FAIL


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(description="NIXL fabric preflight between two pods.")
    parser.add_argument(
        "--role",
        choices=("target", "initiator", "auto"),
        default="auto",
        help="auto: target for Job completion index 0, initiator otherwise (JOB_COMPLETION_INDEX)",
    )
    parser.add_argument("--peer", default=env.get("PREFLIGHT_PEER", "127.0.0.1"), help="target host")
    parser.add_argument("--port", type=int, default=int(env.get("PREFLIGHT_PORT", "5590")))
    parser.add_argument("--backend", default=env.get("PREFLIGHT_BACKEND", "UCX"))
    parser.add_argument("--size-mib", type=int, default=int(env.get("PREFLIGHT_SIZE_MIB", "256")))
    parser.add_argument("--iterations", type=int, default=int(env.get("PREFLIGHT_ITERATIONS", "8")))
    parser.add_argument("--nic-gbps", type=float, default=float(env.get("PREFLIGHT_NIC_GBPS", "0")))
    parser.add_argument("--efficiency", type=float, default=float(env.get("PREFLIGHT_EFFICIENCY", "0")))
    parser.add_argument(
        "--rate-gate",
        choices=("on", "off"),
        default=env.get("PREFLIGHT_RATE_GATE", "on"),
        help="off: pass at any rate once every byte matched (the rates are still reported)",
    )
    parser.add_argument("--timeout", type=float, default=float(env.get("PREFLIGHT_TIMEOUT_SECONDS", "600")))
    parser.add_argument("--name", default=env.get("PREFLIGHT_NAME", "preflight"))
    args = parser.parse_args(argv)
    if args.role == "auto":
        args.role = "target" if env.get("JOB_COMPLETION_INDEX", "0") == "0" else "initiator"
    if args.size_mib < 1 or args.iterations < 1 or not 0 < args.port < 65536:
        parser.error("--size-mib and --iterations must be positive and --port a TCP port")
    gated = args.rate_gate == "on"
    if args.role == "initiator" and gated and (args.nic_gbps <= 0 or not 0 < args.efficiency <= 1):
        parser.error("the initiator needs --nic-gbps > 0 and 0 < --efficiency <= 1 (or --rate-gate off)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log(args.role, f"backend {args.backend}, {args.size_mib} MiB x {args.iterations}, port {args.port}")
    try:
        return run_target(args) if args.role == "target" else run_initiator(args)
    except Exception as exc:  # NIXL raises its own binding errors; each ends the probe the same way
        print(f"{SUMMARY_PREFIX} ERROR {args.role}: {type(exc).__name__}: {exc}", flush=True)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
