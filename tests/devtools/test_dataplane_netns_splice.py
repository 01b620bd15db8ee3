"""netns.splice, the byte pump both forwarders (the host forwarder and the day-two replay's
forwarder into a namespace) share: bytes pass both ways and an end on one side ends the other."""

import socket
import threading

from devtools.dataplane import netns


def test_splice_passes_bytes_both_ways_and_ends_with_the_client() -> None:
    client_outer, client_inner = socket.socketpair()
    upstream_inner, upstream_outer = socket.socketpair()
    pump = threading.Thread(target=netns.splice, args=(client_inner, upstream_inner), daemon=True)
    pump.start()
    client_outer.sendall(b"request")
    assert upstream_outer.recv(64) == b"request"
    upstream_outer.sendall(b"response")
    assert client_outer.recv(64) == b"response"
    client_outer.shutdown(socket.SHUT_WR)
    pump.join(5)
    assert not pump.is_alive()
    assert upstream_outer.recv(64) == b""
