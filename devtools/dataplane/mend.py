"""The output-id stand-in of the Responses phase (docs/responses.md): one small HTTP proxy per
simulator pod, in the pod's namespace, between the routing sidecar and the simulator's rank ports.

llm-d-inference-sim v0.10.2 answers a non-streamed `POST /v1/responses` with an output message that
has no `id` (pkg/communication/response_builder.go: the non-streamed builder sets none, while the
streamed events carry `msg_<request id>`), and vLLM's agentic API drops output items without one:
the stored response then has an empty `output` and the next turn's history lacks the assistant's
answer. The stand-in adds the id the streamed events would have carried (`msg_` + the response id)
to every output item that has none, and changes nothing else. It also records, for every
`/v1/responses` request, the input items it carries (role and text), which is how the run reads a
turn's history at the simulator side.

    python -m devtools.dataplane.mend RECORD_FILE POD LISTEN=TARGET [LISTEN=TARGET ...]

Each pair serves port LISTEN on every address of the namespace and forwards to 127.0.0.1:TARGET.
Other paths and streamed answers pass through unchanged (streamed ones as they arrive).
"""

import http.client
import http.server
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

RESPONSES_PATH = "/v1/responses"
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "proxy-connection",
    "upgrade",
}


def mend(body: dict[str, Any]) -> int:
    """Give every output item without an `id` the id its streamed event carries; how many."""
    mended = 0
    items = body.get("output")
    if not isinstance(items, list):
        return 0
    for index, item in enumerate(items):
        if isinstance(item, dict) and not item.get("id"):
            suffix = "" if index == 0 else f"_{index}"
            item["id"] = f"msg_{body.get('id', 'response')}{suffix}"
            mended += 1
    return mended


def text_of(content: Any) -> str:
    """An input item's text (a string, or the text parts of a content list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def input_items(request: dict[str, Any]) -> list[dict[str, str]]:
    """The request's input as (role, text) items; a bare string input is one user item."""
    given = request.get("input")
    if isinstance(given, str):
        return [{"role": "user", "text": given}]
    items = []
    for item in given or []:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            items.append({"role": str(item.get("role", "")), "text": text_of(item.get("content"))})
    return items


def _read_body(handler: http.server.BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(handler.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                handler.rfile.readline()
                return out
            out += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("content-length") or 0))


def handler_class(
    listen: int, target: int, record: Any, pod: str, lock: threading.Lock
) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            body = _read_body(self)
            is_responses = self.command == "POST" and self.path.split("?")[0] == RESPONSES_PATH
            if is_responses:
                try:
                    request = json.loads(body)
                    line = {
                        "at": time.time(),
                        "pod": pod,
                        "port": listen,
                        "stream": bool(request.get("stream")),
                        "input": input_items(request),
                    }
                    with lock:
                        record.write(json.dumps(line) + "\n")
                        record.flush()
                except ValueError:
                    pass
            upstream = http.client.HTTPConnection("127.0.0.1", target, timeout=900)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            upstream.request(self.command, self.path, body=body, headers=headers)
            resp = upstream.getresponse()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_HEADERS]
            is_json = "json" in (resp.getheader("content-type") or "")
            if is_responses and is_json:
                data = resp.read()
                try:
                    answer = json.loads(data)
                    if mend(answer):
                        data = json.dumps(answer).encode()
                except ValueError:
                    pass
                self.send_response(resp.status)
                for k, v in kept:
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_response(resp.status)
                for k, v in kept:
                    self.send_header(k, v)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                while chunk := resp.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            upstream.close()

        do_GET = do_POST = do_PUT = do_DELETE = _forward

    return Handler


def parse(args: Sequence[str]) -> list[tuple[int, int]]:
    pairs = []
    for word in args:
        listen, sep, target = word.partition("=")
        if not sep or not listen.isdigit() or not target.isdigit():
            raise ValueError(f"mend: expected LISTEN=TARGET ports, got {word!r}")
        pairs.append((int(listen), int(target)))
    if not pairs:
        raise ValueError("mend: no LISTEN=TARGET pair given")
    return pairs


def main(argv: Sequence[str]) -> int:  # pragma: no cover - runs in the data plane
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        pairs = parse(argv[2:])
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    lock = threading.Lock()
    record = open(argv[0], "a")  # noqa: SIM115 - open for the process's life
    servers = []
    for listen, target in pairs:
        server = http.server.ThreadingHTTPServer(
            ("0.0.0.0", listen), handler_class(listen, target, record, argv[1], lock)
        )
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"mend: {len(pairs)} port(s): " + ", ".join(f"{a} -> {b}" for a, b in pairs), flush=True)
    threading.Event().wait()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
