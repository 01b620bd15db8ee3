"""Which TCP ports one pod's vLLM binds, and whether two of them collide.

vLLM opens these sockets only at engine start, long after the pod was scheduled and the weights
loaded; a clash then kills the engine with "address already in use". Everything here follows from
the parsed command line and the container environment, so it is checked offline. The rules are
vLLM's (pinned version, see README "vLLM argument check"):

- multi-port external load balancing (`--data-parallel-multi-port-external-lb`): local rank i gets
  an API server on `--port + i` and the global DP rank `start rank + i`; a supervisor listens on
  `--data-parallel-supervisor-port`;
- the engine of global DP rank 0 binds the DP handshake on `--data-parallel-rpc-port`;
- the KV-events publisher of each engine binds its endpoint (and replay endpoint) with the global
  DP rank added to the port, when the endpoint is a bind address (`*`, `::`, ipc, inproc);
- a NIXL connector's side channel listens on `VLLM_NIXL_SIDE_CHANNEL_PORT + global DP rank`, and
  the p2p tier of an OffloadingConnector on its `port` (else `VLLM_P2P_SIDE_CHANNEL_PORT`) + global
  DP rank, once per connector that has one;
- every other container of the pod shares its network namespace and its declared ports.

Standard library only: the checker inside the vLLM environment imports it too, and cross-checks
`offset_endpoint_port` and `is_bind_endpoint` against vLLM's own implementation.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from devtools.vllm_check.lines import Problem

MAX_PORT = 65535
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
P2P_PORT_ENV = "VLLM_P2P_SIDE_CHANNEL_PORT"


@dataclass(frozen=True)
class Binding:
    """One listening socket: its port, the flag (or variable) that decides it, and what it is."""

    port: int
    flag: str
    what: str


@dataclass(frozen=True)
class SideChannel:
    """A socket every engine opens on `base + its global DP rank`."""

    base: int
    source: str
    what: str


@dataclass(frozen=True)
class PodLaunch:
    """What decides the ports of one pod's vLLM process tree."""

    port: int
    ranks: tuple[int, ...]
    multi_port: bool = False
    supervisor_port: int | None = None
    dp_size: int = 1
    dp_rpc_port: int | None = None
    kv_events_endpoints: tuple[str, ...] = ()
    side_channels: tuple[SideChannel, ...] = ()
    pod_ports: tuple[tuple[int, str], ...] = ()


def offset_endpoint_port(endpoint: str, rank: int) -> str:
    """The endpoint the publisher of global DP rank `rank` uses (vLLM's
    `ZmqEventPublisher.offset_endpoint_port`): tcp ports move by the rank, port 0 stays."""
    if not endpoint or rank == 0:
        return endpoint
    if "inproc" in endpoint:
        return f"{endpoint}_dp{rank}"
    if "tcp" in endpoint and ":" in endpoint:
        base, _, port = endpoint.rpartition(":")
        return endpoint if int(port) == 0 else f"{base}:{int(port) + rank}"
    if "tcp" in endpoint:
        return endpoint
    raise ValueError(f"invalid endpoint {endpoint!r}: must contain 'inproc' or 'tcp'")


def is_bind_endpoint(endpoint: str) -> bool:
    """Whether the publisher binds (rather than connects to) the endpoint."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def tcp_port(endpoint: str) -> int | None:
    """The TCP port of a ZMQ endpoint (`tcp://*:5557` -> 5557); None for ipc/inproc."""
    if not endpoint.startswith("tcp://") or ":" not in endpoint[len("tcp://") :]:
        return None
    port = endpoint.rpartition(":")[2]
    return int(port) if port.isdigit() else None


def bindings(launch: PodLaunch, offset: Callable[[str, int], str] = offset_endpoint_port) -> list[Binding]:
    """Every TCP port the pod listens on: other containers' declared ports, then vLLM's sockets
    in the order vLLM opens them."""
    # Other containers first: they start on their own, and a clash is then blamed on vLLM's flag.
    out = [Binding(port, "containerPort", what) for port, what in launch.pod_ports]
    if launch.multi_port:
        for i, rank in enumerate(launch.ranks):
            out.append(Binding(launch.port + i, "--port", f"API server of global DP rank {rank}"))
        if launch.supervisor_port is not None:
            out.append(Binding(launch.supervisor_port, "--data-parallel-supervisor-port", "DP supervisor"))
    else:
        out.append(Binding(launch.port, "--port", "API server"))
    if launch.dp_size > 1 and 0 in launch.ranks and launch.dp_rpc_port is not None:
        out.append(
            Binding(launch.dp_rpc_port, "--data-parallel-rpc-port", "DP handshake of global DP rank 0")
        )
    for channel in launch.side_channels:
        for rank in launch.ranks:
            out.append(
                Binding(channel.base + rank, channel.source, f"{channel.what} of global DP rank {rank}")
            )
    for endpoint in launch.kv_events_endpoints:
        for rank in launch.ranks:
            bound = offset(endpoint, rank)
            port = tcp_port(bound)
            if is_bind_endpoint(bound) and port:
                out.append(
                    Binding(
                        port, "--kv-events-config", f"KV-events publisher of global DP rank {rank} ({bound})"
                    )
                )
    return out


def port_problems(found: Iterable[Binding]) -> list[Problem]:
    """Ports outside 1..65535, and ports bound more than once on the pod. The flag blamed for a
    clash is the one that binds the port second (`bindings` lists sockets in opening order)."""
    problems: list[Problem] = []
    first: dict[int, Binding] = {}
    for binding in found:
        if not 1 <= binding.port <= MAX_PORT:
            problems.append(
                Problem(
                    binding.flag, f"{binding.what} would listen on port {binding.port}, outside 1-{MAX_PORT}"
                )
            )
            continue
        if binding.port in first:
            earlier = first[binding.port]
            problems.append(
                Problem(
                    binding.flag,
                    f"port {binding.port} is bound twice on the pod: {binding.what} ({binding.flag}) "
                    f"and {earlier.what} ({earlier.flag}); the second fails with 'address already in use'",
                )
            )
        else:
            first[binding.port] = binding
    return problems
