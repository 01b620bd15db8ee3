"""KV-event relays for precise prefix routing in the data plane (docs/twin.md).

Both ends of the KV-event stream dial: the simulator's publisher dials its `--zmq-endpoint`
(llm-d-inference-sim v0.10.2 pkg/common/publisher.go, `socket.Dial`) and the picker's per-endpoint
subscriber dials `tcp://<pod address>:<socketPort + rank index>` (llm-d-router v0.10.0
pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache/extractor.go,
`ensureSubscriber`). A relay binds both sides for one rank: an XSUB socket where the rank's
simulator dials, an XPUB socket on the port the picker dials (where vLLM would bind its
publisher), and pyzmq's `zmq.proxy` forwarding messages one way and subscriptions the other.
Messages are forwarded whole (topic, sequence, payload frames); the picker attributes them to the
endpoint it dialled, not to the topic's pod name.

    python -m devtools.dataplane.relay IN=OUT [IN=OUT ...]

where IN and OUT are ZMQ endpoints (`tcp://127.0.0.1:15557=tcp://*:5557`). Runs until stopped.
"""

import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    inbound: str
    """Bound XSUB endpoint the simulator's publisher dials."""
    outbound: str
    """Bound XPUB endpoint the picker's subscriber dials."""


def parse(args: Sequence[str]) -> list[Pair]:
    """`IN=OUT` words into pairs; a clear error for anything else."""
    pairs = []
    for word in args:
        inbound, sep, outbound = word.partition("=")
        if not sep or not inbound.startswith("tcp://") or not outbound.startswith("tcp://"):
            raise ValueError(f"relay: expected IN=OUT with two tcp:// endpoints, got {word!r}")
        pairs.append(Pair(inbound, outbound))
    if not pairs:
        raise ValueError("relay: no IN=OUT pair given")
    if len({p.inbound for p in pairs} | {p.outbound for p in pairs}) != 2 * len(pairs):
        raise ValueError("relay: an endpoint appears twice")
    return pairs


def relay_endpoints(pod_ip: str, socket_port: int, ranks: int, inbound_base: int) -> list[Pair]:
    """One pair per rank of a pod: the simulator of rank r publishes to 127.0.0.1:inbound_base+r
    inside the pod, the picker dials pod_ip:socket_port+r."""
    return [
        Pair(f"tcp://127.0.0.1:{inbound_base + r}", f"tcp://{pod_ip}:{socket_port + r}") for r in range(ranks)
    ]


def serve(pairs: list[Pair]) -> None:
    import zmq

    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    threads = []
    for pair in pairs:
        xsub = context.socket(zmq.XSUB)
        xsub.bind(pair.inbound)
        xpub = context.socket(zmq.XPUB)
        xpub.bind(pair.outbound)
        thread = threading.Thread(target=zmq.proxy, args=(xsub, xpub), daemon=True)
        thread.start()
        threads.append(thread)
    print(f"relay: {len(pairs)} pair(s) bound: " + ", ".join(f"{p.inbound} -> {p.outbound}" for p in pairs))
    sys.stdout.flush()
    for thread in threads:
        thread.join()


def main(argv: Sequence[str]) -> int:  # pragma: no cover - runs in the data plane
    try:
        pairs = parse(argv)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    serve(pairs)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
