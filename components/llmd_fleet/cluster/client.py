"""The one cluster client: a kubeconfig's context, credentials and server through the
`kubernetes` client library, hardened for a command line that prints what it reads.

The library reads the kubeconfig model (contexts, merged KUBECONFIG files, client certificates,
token files, exec credential plugins, auth providers, proxy-url, tls-server-name) and speaks
HTTPS (urllib3). Around it:

- **No credential is ever printed.** A kubeconfig that is not YAML is reported by line and column
  only (PyYAML's own message quotes the line, a token among them). The library's messages name
  nodes by their whole content (a user's token included) and a failing exec plugin's message is
  its stderr (OIDC plugins get client secrets as arguments and echo them), so neither is
  printed: the refusal names the key, the context or the plugin's command name and exit status.
  A server URL with a user name or password (userinfo) is refused without echoing it.
- **Every string from the cluster is escaped** (`text`: control characters as escapes, at most
  200 characters) before a command prints it: a Lease holder or a Job reason cannot forge a line.
- **Bounds.** A list is paged 500 items at a time, at most 100 pages; an answer is read up to
  64 MiB (decompressed) and refused beyond; each request has a 15 s timeout.
- **Exit codes** (docs/bad-input.md): a kubeconfig of the wrong shape is bad input (2); an
  unreachable cluster, a refused request or a failing credential plugin is the environment (1).
"""

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
import yaml

from llmd_fleet.core.problems import clip, printable

MAX_PAGES = 100
PAGE_SIZE = 500
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
REQUEST_TIMEOUT_S = 15.0
# A kubeconfig larger than this is not one (real ones are a few KB; certificates inline).
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
TEXT_LIMIT = 200

EXIT_ENVIRONMENT, EXIT_BAD_INPUT = 1, 2


class ClusterError(Exception):
    """A cluster that cannot be read: one line, exit 1 (the environment) unless a subclass says."""

    exit_code = EXIT_ENVIRONMENT


class KubeconfigError(ClusterError):
    """A kubeconfig of the wrong shape (or none): bad input, exit 2."""

    exit_code = EXIT_BAD_INPUT


class Forbidden(ClusterError):
    """HTTP 403: the credentials may not do `verb` on `resource` (doctor names the permission)."""

    def __init__(self, verb: str, resource: str, namespace: str | None) -> None:
        self.verb, self.resource, self.namespace = verb, resource, namespace
        where = f" in namespace {namespace}" if namespace else " (cluster-wide)"
        super().__init__(
            f"the API server refused {verb} {resource}{where}: HTTP 403 (the kubeconfig's user needs "
            "that permission: docs/troubleshooting.md#permissions)"
        )

    @property
    def permission(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.resource}{where}"


def text(value: object, limit: int = TEXT_LIMIT) -> str:
    """A string from the cluster, safe to print on one line: escaped, at most `limit` characters."""
    return clip(str(value), limit)


def redact_url(url: str) -> str:
    """`url` without its userinfo (`https://user:pass@host` -> `https://***@host`), escaped."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparseable URL, not shown)"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        return text(parts._replace(netloc=f"***@{host}").geturl())
    return text(url)


def kubeconfig_paths(flag: Path | None, environ: dict[str, str] | None = None) -> list[Path]:
    """`--kubeconfig`, else the existing files of KUBECONFIG (merged, as kubectl merges them),
    else ~/.kube/config. Raises KubeconfigError when none exists."""
    env = os.environ if environ is None else environ
    if flag is not None:
        candidates = [flag]
    elif env.get("KUBECONFIG"):
        candidates = [Path(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
    else:
        candidates = [Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"]
    found = [p for p in candidates if p.is_file()]
    if not found:
        shown = ", ".join(printable(str(p)) for p in candidates[:5])
        raise KubeconfigError(
            f"no kubeconfig at {shown}: pass --kubeconfig FILE or set KUBECONFIG "
            "(on-prem: pulumi config get kubeconfig --stack STACK > kubeconfig.yaml)"
        )
    return found


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    """One kubeconfig file parsed; every refusal names the file and a position, never its text."""
    shown = printable(str(path))
    try:
        size = path.stat().st_size
        if size > MAX_KUBECONFIG_BYTES:
            raise KubeconfigError(
                f"the kubeconfig {shown} has {size} bytes (at most {MAX_KUBECONFIG_BYTES}): not a kubeconfig"
            )
        document = yaml.safe_load(path.read_bytes())
    except OSError as exc:
        raise ClusterError(f"cannot read the kubeconfig {shown}: {printable(exc.strerror or '')}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise KubeconfigError(
            f"the kubeconfig {shown} is not valid YAML{where} "
            "(its text is not shown: it may hold credentials)"
        ) from None
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError, ValueError):
        raise KubeconfigError(
            f"the kubeconfig {shown} is not valid YAML (its text is not shown: it may hold credentials)"
        ) from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"the kubeconfig {shown} is not a kubeconfig (no mapping at the top)")
    return document


def _named(document: dict[str, Any], section: str, name: str, where: str) -> dict[str, Any]:
    """The `section` entry called `name` (its inner mapping), or a refusal naming both."""
    entries = document.get(f"{section}s")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            inner = entry.get(section)
            if not isinstance(inner, dict):
                raise KubeconfigError(f"{where}: {section} {text(name, 80)!r} is not a mapping")
            return inner
    raise KubeconfigError(f"{where} has no {section} {text(name, 80)!r}")


def _merged(paths: list[Path]) -> dict[str, Any]:
    """The merged view kubectl takes (first file wins per name), for our own shape checks."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    for path in paths:
        document = _read_kubeconfig(path)
        for section in ("clusters", "contexts", "users"):
            entries = document.get(section) or []
            if not isinstance(entries, list):
                raise KubeconfigError(f"the kubeconfig {printable(str(path))}: {section} is not a list")
            seen = {e.get("name") for e in merged[section] if isinstance(e, dict)}
            merged[section] += [e for e in entries if isinstance(e, dict) and e.get("name") not in seen]
        if "current-context" not in merged and document.get("current-context"):
            merged["current-context"] = document["current-context"]
    return merged


class _Captured(logging.Handler):
    """Holds the library's log records (an exec plugin's failure is logged with the plugin's
    stderr): never printed, only counted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _library_logs_captured(handler: _Captured) -> Iterator[None]:
    """Route the root logger (the kubeconfig loader logs there) to `handler` only."""
    root = logging.getLogger()
    saved, saved_level = root.handlers[:], root.level
    root.handlers = [handler]
    try:
        yield
    finally:
        root.handlers, root.level = saved, saved_level


@dataclass(frozen=True)
class Target:
    """What a client reaches, safe to print."""

    context: str
    server: str


class Client:
    """GET, bounded list, and close (removes the private directory of certificate files)."""

    def __init__(self, api: Any, target: Target, scratch: Path, logs: _Captured, plugin: str | None) -> None:
        self._api = api
        self.target = target
        self._scratch = scratch
        self._logs = logs
        self._plugin = plugin

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._api.close()
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        """GET an API path: the decoded JSON, or None when it is not found (404)."""
        from kubernetes.client.exceptions import OpenApiException

        try:
            with _library_logs_captured(self._logs):
                method, url, headers, _, _ = self._api.param_serialize(
                    method="GET",
                    resource_path=path,
                    query_params=list((params or {}).items()),
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                )
                response = self._api.call_api(
                    method, url, header_params=headers, _request_timeout=REQUEST_TIMEOUT_S
                ).response
        except (urllib3.exceptions.HTTPError, OSError, OpenApiException) as exc:
            raise ClusterError(self._unreachable(exc)) from None
        try:
            return self._decode(path, response)
        finally:
            response.release_conn()

    def _unreachable(self, exc: BaseException) -> str:
        reason = exc
        while isinstance(reason, urllib3.exceptions.MaxRetryError) and reason.reason is not None:
            reason = reason.reason
        kind = type(reason).__name__
        if isinstance(reason, urllib3.exceptions.SSLError):
            what = "TLS failed (check the kubeconfig's certificate-authority and server name)"
        elif isinstance(reason, (urllib3.exceptions.TimeoutError, TimeoutError)):
            what = f"no answer within {REQUEST_TIMEOUT_S:.0f} s"
        elif isinstance(reason, urllib3.exceptions.NewConnectionError):
            what = "connection refused or no route"
        else:
            what = kind
        return f"cannot reach the cluster at {self.target.server} (context {self.target.context}): {what}"

    def _decode(self, path: str, response: Any) -> Any:
        status = int(response.status)
        if status == 404:
            return None
        if status in (401, 403):
            if status == 403:
                raise _forbidden(path)
            plugin = self._plugin_failed()
            raise ClusterError(
                f"the API server refused GET {text(path)}: HTTP 401 (the kubeconfig's credentials were "
                f"not accepted{plugin})"
            )
        if not 200 <= status < 300:
            raise ClusterError(f"the API server answered GET {text(path)} with HTTP {status}")
        length = response.headers.get("Content-Length")
        if length and length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            raise ClusterError(self._too_large(path))
        body = bytearray()
        try:
            for chunk in response.stream(1 << 20, decode_content=True):
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    raise ClusterError(self._too_large(path))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(self._unreachable(exc)) from None
        try:
            return json.loads(body or b"null")
        except (ValueError, RecursionError):
            raise ClusterError(f"the API server's answer to GET {text(path)} is not JSON") from None

    @staticmethod
    def _too_large(path: str) -> str:
        return (
            f"the API server's answer to GET {text(path)} exceeds {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB: "
            "not read further"
        )

    def _plugin_failed(self) -> str:
        if self._plugin is None or not self._logs.records:
            return ""
        return f"; its credential plugin {self._plugin!r} failed, its output not shown"

    def list(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        return list_all(self.get, path, selector)


def list_all(
    read: Callable[[str, dict[str, str] | None], Any], path: str, selector: str | None = None
) -> list[dict[str, Any]]:
    """Every item of a list through `read` (a client's `get`), `PAGE_SIZE` a page, at most
    `MAX_PAGES` pages: an API that always answers with a `continue` token is not followed further."""
    items: list[dict[str, Any]] = []
    params = {"limit": str(PAGE_SIZE)}
    if selector:
        params["labelSelector"] = selector
    for _ in range(MAX_PAGES):
        page = read(path, params) or {}
        if not isinstance(page, dict):
            raise ClusterError(f"the API server's answer to GET {text(path)} is not a list")
        items += [i for i in page.get("items") or [] if isinstance(i, dict)]
        token = (
            (page.get("metadata") or {}).get("continue") if isinstance(page.get("metadata"), dict) else None
        )
        if not token:
            return items
        params = params | {"continue": str(token)}
    raise ClusterError(
        f"the list {text(path)} goes on past {MAX_PAGES} pages of {PAGE_SIZE}: not read further"
    )


def _forbidden(path: str) -> Forbidden:
    """The permission a 403 on `path` needs: verb, resource.group and namespace."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    group = ""
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return Forbidden("get", text(path), None)
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else "namespaces"
    verb = "get" if len(rest) >= 2 else "list"
    name = f"{resource}.{group}" if group else resource
    return Forbidden(verb, text(name, 100), text(namespace, 80) if namespace else None)


def load_client(
    flag: Path | None, context: str | None = None, environ: dict[str, str] | None = None
) -> Client:
    """A client for the kubeconfig's context (its current one unless named)."""
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

    paths = kubeconfig_paths(flag, environ)
    where = "the kubeconfig " + ", ".join(printable(str(p)) for p in paths)
    merged = _merged(paths)
    name = context or merged.get("current-context")
    if not name or not isinstance(name, str):
        raise KubeconfigError(f"{where} has no current-context: pass --context NAME")
    ctx = _named(merged, "context", name, where)
    cluster = _named(merged, "cluster", str(ctx.get("cluster", "")), where)
    user = _named(merged, "user", str(ctx["user"]), where) if ctx.get("user") else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f"{where} names no server for context {text(name, 80)!r}")
    parts = urlsplit(server)
    if "@" in parts.netloc:
        raise KubeconfigError(
            f"{where}: the server of context {text(name, 80)!r} has a user name or password in its URL "
            "(not shown): put credentials under users:, not in the URL"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KubeconfigError(
            f"{where}: the server of context {text(name, 80)!r} must be an http(s) URL with a host "
            f"(got {redact_url(server)})"
        )
    plugin_spec = user.get("exec") if isinstance(user.get("exec"), dict) else None
    plugin = text(Path(str(plugin_spec.get("command", ""))).name, 80) if plugin_spec else None
    target = Target(context=text(name, 80), server=redact_url(server.rstrip("/")))
    scratch = Path(tempfile.mkdtemp(prefix="llmd-fleet-kube-"))
    logs = _Captured()
    configuration = Configuration()
    try:
        with _library_logs_captured(logs):
            # The library's loader is untyped (its own module has no annotations).
            merger = KubeConfigMerger(os.pathsep.join(str(p) for p in paths))  # type: ignore[no-untyped-call]
            loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
                config_dict=merger.config,
                active_context=name,
                config_base_path=None,
                temp_file_path=str(scratch),
            )
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise KubeconfigError(f"{where}: {_config_problem(str(exc))}") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError) as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise KubeconfigError(
            f"{where}: context {text(name, 80)!r} cannot be used ({type(exc).__name__}; "
            "its text is not shown: it may hold credentials)"
        ) from None
    if plugin is not None and logs.records:
        shutil.rmtree(scratch, ignore_errors=True)
        status = _exit_status(logs.records)
        raise ClusterError(
            f"the kubeconfig's credential plugin {plugin!r} (context {text(name, 80)!r}) failed{status}; "
            "its output and arguments are not shown (they may hold credentials): run it yourself to see why"
        )
    # Proxies come from the kubeconfig's proxy-url only, as the library reads it; no retries on
    # top of the request timeout.
    configuration.retries = 0
    return Client(ApiClient(configuration), target, scratch, logs, plugin)


def _exit_status(records: list[logging.LogRecord]) -> str:
    import re

    for record in records:
        match = re.match(r"exec: process returned (-?\d+)", record.getMessage())
        if match:
            return f" (exit {match.group(1)})"
    return ""


def _config_problem(message: str) -> str:
    """The library's ConfigException, said without its node names (which hold whole entries, a
    token among them): only a missing key's name is kept."""
    import re

    if match := re.search(r"Expected key (\S+) in", message):
        return f"a key {text(match.group(1), 60)!r} it needs is missing"
    if "File does not exist" in message:
        return "a certificate or token file it names does not exist"
    return "it cannot be read as a kubeconfig (the library's message is not shown: it may quote credentials)"
