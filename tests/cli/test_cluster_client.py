"""The one cluster client (llmd_fleet/cluster/client.py) under hostile input: every credential,
bound and escaping rule of issue 43 has a test of its own here, each through the command a user
runs (`llmd-fleet status`) or the client itself, against a loopback API server."""

import gzip
import json
import os
import stat
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.cluster import client as client_module
from llmd_fleet.cluster.client import (
    MAX_PAGES,
    ClusterError,
    Forbidden,
    KubeconfigError,
    list_all,
    load_client,
    redact_url,
)
from tests.support import REFERENCE_STACK, STACKS_DIR, serve_in_background

SECRET = "tok-SECRET-8f2b"
Answer = tuple[int, bytes, dict[str, str]]


class Api:
    """A loopback API server: `routes` maps a path (no query) to a function of the query string
    returning (status, body, headers); everything else is 404. Records every request."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[str], Answer]] = {}
        self.requests: list[tuple[str, str | None]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append((self.path, self.headers.get("Authorization")))
                path, _, query = self.path.partition("?")
                route = api.routes.get(path)
                status, body, headers = route(query) if route else (404, b"{}", {})
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_background(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def json(self, path: str, document: Any, status: int = 200) -> None:
        body = json.dumps(document).encode()
        self.routes[path] = lambda query: (status, body, {"Content-Type": "application/json"})


@pytest.fixture
def api() -> Iterator[Api]:
    server = Api()
    yield server
    server.server.shutdown()


def _kubeconfig(path: Path, server: str, user: dict[str, Any] | None = None) -> Path:
    path.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user if user is not None else {"token": SECRET}}],
            }
        )
    )
    return path


def _status(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = run(["--stacks-dir", str(STACKS_DIR), "status", REFERENCE_STACK, *extra])
    out, err = capsys.readouterr()
    return code, out, err


# --- Credentials never printed.


def test_yaml_error_never_echoes_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PyYAML's own message quotes the offending line; a token there must not reach the output."""
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(f"users:\n- name: u\n  user:\n    token: {SECRET}\n      bad: [\n")
    code, out, err = _status(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 2
    assert SECRET not in out + err
    assert err.count("\n") == 1 and "is not valid YAML at line 5" in err
    assert "not shown" in err


def test_failing_exec_plugin_prints_neither_argv_nor_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api: Api
) -> None:
    """An OIDC-style plugin gets a client secret as an argument and echoes its argv on stderr."""
    plugin = tmp_path / "oidc-login"
    plugin.write_text('#!/bin/sh\necho "failed: $*" >&2\necho "$@"\nexit 3\n')
    plugin.chmod(0o755)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "args": ["get-token", f"--oidc-client-secret={SECRET}"],
            "env": [{"name": "SECRET_ENV", "value": SECRET}],
        }
    }
    kubeconfig = _kubeconfig(tmp_path / "kc", api.url, user)
    code, out, err = _status(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 1
    assert SECRET not in out + err
    assert "credential plugin 'oidc-login'" in err and "failed (exit 3)" in err
    assert err.count("\n") == 1
    assert api.requests == []  # nothing sent without credentials


def test_exec_plugin_token_is_used(tmp_path: Path, api: Api) -> None:
    plugin = tmp_path / "plugin"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": SECRET}}  # fmt: skip
    plugin.write_text(f"#!/bin/sh\necho '{json.dumps(credential)}'\n")
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}
    api.json("/api/v1/namespaces", {"items": []})
    with load_client(_kubeconfig(tmp_path / "kc", api.url, user)) as client:
        assert client.list("/api/v1/namespaces") == []
    assert api.requests[-1][1] == f"Bearer {SECRET}"


def test_server_url_userinfo_is_refused_unechoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kc", f"https://admin:{SECRET}@127.0.0.1:6443")
    code, out, err = _status(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 2
    assert SECRET not in out + err and "admin" not in out + err
    assert "user name or password in its URL (not shown)" in err
    assert redact_url(f"https://admin:{SECRET}@h:1/x") == "https://***@h:1/x"


@pytest.mark.parametrize(
    "broken",
    [
        # The library names a node by its whole content (the token too) in its messages.
        {"user": {"token": SECRET, "client-certificate": "/nonexistent/cert.pem"}},
        {"user": {"token": SECRET, "exec": {"command": "x"}}},  # no apiVersion
        {"user": {"token": SECRET, "tokenFile": "/nonexistent/token"}},
        {"user": "not-a-mapping-" + SECRET},
    ],
)
def test_kubeconfig_problems_never_print_the_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: dict[str, Any]
) -> None:
    kubeconfig = tmp_path / "kc"
    document = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        # https: the library reads certificate files only for TLS.
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", **broken}],
    }
    kubeconfig.write_text(json.dumps(document))
    code, out, err = _status(capsys, "--kubeconfig", str(kubeconfig))
    assert SECRET not in out + err
    assert code in (1, 2) and err.count("\n") == 1 and err.startswith("error: ")


def test_certificate_files_live_only_while_the_client_does(tmp_path: Path, api: Api) -> None:
    """Inline client certificates become files for urllib3: private, removed on close."""
    import base64

    user = {
        "client-certificate-data": base64.b64encode(b"CERT").decode(),
        "client-key-data": base64.b64encode(SECRET.encode()).decode(),
    }
    server = "https://127.0.0.1:1"
    client = load_client(_kubeconfig(tmp_path / "kc", server, user))
    scratch = client._scratch
    files = list(scratch.iterdir())
    assert any(f.read_bytes() == SECRET.encode() for f in files)
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700
    client.close()
    assert not scratch.exists()


# --- Bounds.


@pytest.mark.parametrize("flag", ["--interval", "--timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf", "1e9", "abc", " 5", ""])
def test_watch_bounds_refused_with_one_line(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, tmp_path: Path
) -> None:
    # No kubeconfig is read: the flags are refused first.
    code, out, err = _status(capsys, "--watch", f"{flag}={value}", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {flag} ") and err.count("\n") == 1
    assert "finite number of seconds" in err


@pytest.mark.parametrize(
    ("flag", "value"), [("--interval", "0.5"), ("--interval", "3601"), ("--timeout", "86401")]
)
def test_watch_bounds_edges(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, tmp_path: Path
) -> None:
    code, _, err = _status(capsys, flag, value, "--kubeconfig", str(tmp_path / "none"))
    assert code == 2 and err.startswith(f"error: {flag} {value}: ")


def test_watch_bounds_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # In bounds, the next refusal is the missing kubeconfig.
    code, _, err = _status(
        capsys, "--interval", "1", "--timeout", "86400", "--kubeconfig", str(tmp_path / "n")
    )
    assert code == 2 and err.startswith("error: no kubeconfig")


def test_paging_stops_after_max_pages() -> None:
    calls: list[dict[str, str] | None] = []

    def endless(path: str, params: dict[str, str] | None) -> Any:
        calls.append(params)
        return {"items": [{"n": len(calls)}], "metadata": {"continue": "again"}}

    with pytest.raises(ClusterError, match=f"past {MAX_PAGES} pages"):
        list_all(endless, "/api/v1/pods")
    assert len(calls) == MAX_PAGES == 100
    assert all(p is not None and p["limit"] == "500" for p in calls)


def test_paging_follows_continue_tokens(tmp_path: Path, api: Api) -> None:
    def pages(query: str) -> Answer:
        page = 2 if "continue=p2" in query else 1
        meta = {"continue": "p2"} if page == 1 else {}
        return 200, json.dumps({"items": [{"page": page}], "metadata": meta}).encode(), {}

    api.routes["/api/v1/pods"] = pages
    with load_client(_kubeconfig(tmp_path / "kc", api.url)) as client:
        assert client.list("/api/v1/pods", "a=b") == [{"page": 1}, {"page": 2}]


def test_response_size_bound_by_content_length(tmp_path: Path, api: Api) -> None:
    # Claims 65 MiB and sends nothing: refused before reading.
    api.routes["/api/v1/pods"] = lambda q: (200, b"", {"Content-Length": str(65 * 1024 * 1024)})
    with (
        load_client(_kubeconfig(tmp_path / "kc", api.url)) as client,
        pytest.raises(ClusterError, match="exceeds 64 MiB"),
    ):
        client.get("/api/v1/pods")


def test_response_size_bound_while_streaming(
    tmp_path: Path, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Content-Length, gzip: the bound counts decompressed bytes as they arrive."""
    monkeypatch.setattr(client_module, "MAX_RESPONSE_BYTES", 1024 * 1024)
    bomb = gzip.compress(b"[" + b"0," * (2 * 1024 * 1024) + b"0]")
    assert len(bomb) < 64 * 1024
    api.routes["/api/v1/pods"] = lambda q: (200, bomb, {"Content-Encoding": "gzip", "Connection": "close"})
    with (
        load_client(_kubeconfig(tmp_path / "kc", api.url)) as client,
        pytest.raises(ClusterError, match="exceeds 1 MiB"),
    ):
        client.get("/api/v1/pods")


def test_not_json_and_nesting(tmp_path: Path, api: Api) -> None:
    api.routes["/a"] = lambda q: (200, b"<html>", {})
    api.routes["/b"] = lambda q: (200, b"[" * 100_000 + b"]" * 100_000, {})
    with load_client(_kubeconfig(tmp_path / "kc", api.url)) as client:
        for path in ("/a", "/b"):
            with pytest.raises(ClusterError, match="is not JSON"):
                client.get(path)


# --- Status codes and exit codes.


def test_forbidden_names_the_permission(tmp_path: Path, api: Api) -> None:
    api.json("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com", {}, status=403)
    api.json("/api/v1/namespaces/llm-d/secrets", {}, status=403)
    with load_client(_kubeconfig(tmp_path / "kc", api.url)) as client:
        with pytest.raises(Forbidden) as one:
            client.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")
        assert one.value.permission == "get deviceclasses.resource.k8s.io"
        with pytest.raises(Forbidden) as two:
            client.list("/api/v1/namespaces/llm-d/secrets")
        assert two.value.permission == "list secrets in llm-d"
        assert client.get("/apis/x/v1/nothing") is None  # 404


def test_unreachable_is_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    code, out, err = _status(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 1 and out == ""
    assert err.startswith("error: cannot reach the cluster at http://127.0.0.1:9 (context c)")
    assert err.count("\n") == 1


def test_unauthorized_is_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api: Api
) -> None:
    api.routes["/apis/disaggregatedset.x-k8s.io/v1/namespaces/llm-d/disaggregatedsets/glm52"] = lambda q: (
        401,
        json.dumps({"message": SECRET}).encode(),
        {},
    )
    code, out, err = _status(capsys, "--kubeconfig", str(_kubeconfig(tmp_path / "kc", api.url)))
    assert code == 1 and SECRET not in out + err
    assert "HTTP 401 (the kubeconfig's credentials were not accepted)" in err


def test_kubeconfig_shape_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for document, needle in [
        ([1, 2], "no mapping at the top"),
        ({"contexts": []}, "has no current-context"),
        (
            {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "x"}}]},
            "no cluster 'x'",
        ),
    ]:
        kubeconfig = tmp_path / "kc"
        kubeconfig.write_text(json.dumps(document))
        code, _, err = _status(capsys, "--kubeconfig", str(kubeconfig))
        assert code == 2 and needle in err and err.count("\n") == 1, err


def test_kubeconfig_env_files_are_merged(tmp_path: Path, api: Api) -> None:
    first = tmp_path / "a"
    first.write_text(
        json.dumps(
            {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
        )
    )
    second = _kubeconfig(tmp_path / "b", api.url)
    api.json("/api", {"versions": ["v1"]})
    environ = {"KUBECONFIG": os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)])}
    with load_client(None, environ=environ) as client:
        assert client.get("/api") == {"versions": ["v1"]}


def test_kubeconfig_errors_are_kubeconfig_errors(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="no kubeconfig"):
        load_client(None, environ={"KUBECONFIG": str(tmp_path / "none")})
