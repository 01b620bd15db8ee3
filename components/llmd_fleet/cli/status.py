"""`llmd-fleet status STACK`: read a deployed fleet from its cluster and say whether it serves.

    groups     prefill 7/7 ready, decode 5/5 ready      (pods of each LeaderWorkerSet group Ready)
    leader     glm52-epp-7d9c-x2k (held 41m, renewed 3s ago)
    endpoints  68/68 pool pods Ready
    preflight  succeeded

The names come from the stack file through the same helpers the render uses (serving name and
namespace, the EPP's leader Lease, the InferencePool, the preflight Job, the Gateway). The API
server is spoken to directly over HTTPS with the kubeconfig's credentials (client certificate,
bearer token or an exec plugin's token); the standard library is enough, so nothing is added to
the install.
"""

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import yaml

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.conventions import POOL_GROUP
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME
from llmd_fleet.layers.preflight.specs import job_name
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.layers.serving.specs import pool_selector

DS_API = "disaggregatedset.x-k8s.io/v1"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ROLE_LABEL = "llm-d.ai/role"
API_TIMEOUT_S = 15.0

Reader = Callable[[str, dict[str, str] | None], Any]
"""GET an API path (with query parameters): the decoded JSON, or None when it is not found (404)."""


class StatusError(Exception):
    """A refusal `status` prints as one line (exit 2): no kubeconfig, an unreachable cluster."""


# --- The cluster: a kubeconfig's server and credentials, over the standard library's HTTPS.


@dataclass(frozen=True)
class Cluster:
    server: str
    context: ssl.SSLContext | None
    token: str | None

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        url = self.server + path + ("?" + urlencode(params) if params else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        # No proxies from the environment: the kubeconfig names the server to reach.
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self.context)
        )
        try:
            with opener.open(request, timeout=API_TIMEOUT_S) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code in (401, 403):
                raise StatusError(
                    f"the API server refused GET {path}: HTTP {exc.code} (check the kubeconfig's credentials)"
                ) from None
            raise StatusError(f"the API server answered GET {path} with HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise StatusError(f"cannot reach the cluster at {self.server}: {reason}") from None
        except ValueError:
            raise StatusError(f"the API server's answer to GET {path} is not JSON") from None


def kubeconfig_path(flag: Path | None, environ: dict[str, str] | None = None) -> Path:
    """`--kubeconfig`, else the first file of KUBECONFIG, else ~/.kube/config (as kubectl reads)."""
    env = os.environ if environ is None else environ
    if flag is not None:
        candidates = [flag]
    elif env.get("KUBECONFIG"):
        candidates = [Path(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
    else:
        candidates = [Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"]
    for path in candidates:
        if path.is_file():
            return path
    raise StatusError(
        f"no kubeconfig at {', '.join(str(p) for p in candidates)}: pass --kubeconfig FILE or set "
        "KUBECONFIG (on-prem: pulumi config get kubeconfig --stack STACK > kubeconfig.yaml)"
    )


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(what)
            return value if isinstance(value, dict) else {}
    raise StatusError(f"the kubeconfig has no {what} {name!r}")


def _pem(data: dict[str, Any], key: str, base: Path) -> bytes | None:
    """The PEM bytes of `<key>-data` (base64) or of the file `<key>` (relative to the kubeconfig)."""
    if data.get(f"{key}-data"):
        return base64.b64decode(str(data[f"{key}-data"]))
    if data.get(key):
        path = Path(str(data[key])).expanduser()
        return (path if path.is_absolute() else base / path).read_bytes()
    return None


def _exec_credential(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a kubeconfig `exec` plugin (gke-gcloud-auth-plugin, aws eks get-token) for its status."""
    command = [str(spec.get("command", "")), *(str(a) for a in spec.get("args") or [])]
    env = dict(os.environ) | {str(e["name"]): str(e["value"]) for e in spec.get("env") or []}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
        status = json.loads(done.stdout).get("status") or {}
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise StatusError(f"the kubeconfig's credential plugin {command[0]!r} failed: {exc}") from None
    return status if isinstance(status, dict) else {}


def load_cluster(path: Path, context_name: str | None = None) -> Cluster:
    """The server and credentials of a kubeconfig's context (its current one unless named)."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise StatusError(f"cannot read the kubeconfig {path}: {exc}") from None
    if not isinstance(config, dict):
        raise StatusError(f"the kubeconfig {path} is not a kubeconfig (no mapping)")
    name = context_name or config.get("current-context")
    if not name:
        raise StatusError(f"the kubeconfig {path} has no current-context")
    context = _named(config.get("contexts"), str(name), "context")
    cluster = _named(config.get("clusters"), str(context.get("cluster", "")), "cluster")
    user = _named(config.get("users"), str(context.get("user", "")), "user") if context.get("user") else {}
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise StatusError(f"the kubeconfig {path} names no server for context {name!r}")
    base = path.parent
    if user.get("exec"):
        user = user | {
            k.replace("clientCertificateData", "client-certificate-data").replace(
                "clientKeyData", "client-key-data"
            ): base64.b64encode(v.encode()).decode() if k != "token" else v
            for k, v in _exec_credential(user["exec"]).items()
            if k in ("token", "clientCertificateData", "clientKeyData") and isinstance(v, str)
        }
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(str(user["tokenFile"])).read_text(encoding="utf-8").strip()
    tls: ssl.SSLContext | None = None
    if server.startswith("https://"):
        try:
            tls = ssl.create_default_context()
            ca = _pem(cluster, "certificate-authority", base)
            if cluster.get("insecure-skip-tls-verify"):
                tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
            elif ca is not None:
                tls = ssl.create_default_context(cadata=ca.decode("ascii"))
            cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
            if cert is not None and key is not None:
                # load_cert_chain reads files only: a private directory, removed at once.
                with tempfile.TemporaryDirectory() as tmp:
                    (Path(tmp) / "cert.pem").write_bytes(cert)
                    (Path(tmp) / "key.pem").write_bytes(key)
                    tls.load_cert_chain(Path(tmp) / "cert.pem", Path(tmp) / "key.pem")
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise StatusError(f"the kubeconfig {path} has unusable TLS material: {exc}") from None
    return Cluster(server=server, context=tls, token=str(token) if token else None)


# --- What the fleet's objects say.


def is_ready(pod: dict[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _list(read: Reader, path: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params = {"labelSelector": selector, "limit": "500"}
    while True:
        page = read(path, params) or {}
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        params = params | {"continue": token}


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass(frozen=True)
class RoleGroups:
    role: str
    ready: int
    desired: int
    pods_ready: int
    pods: int


@dataclass(frozen=True)
class Status:
    serving: str
    namespace: str
    roles: tuple[RoleGroups, ...] | None
    """Per role; None when the DisaggregatedSet is not there (yet)."""
    leader: str
    endpoints: tuple[int, int] | None
    """(Ready, selected) pods of the InferencePool; None when the pool is not there."""
    preflight: str

    @property
    def all_ready(self) -> bool:
        return bool(self.roles) and all(r.desired > 0 and r.ready >= r.desired for r in self.roles or ())

    def groups_text(self) -> str:
        if self.roles is None:
            return f"DisaggregatedSet {self.serving} absent"
        return ", ".join(
            f"{r.role} {r.ready}/{r.desired} groups ready ({r.pods_ready}/{r.pods} pods)" for r in self.roles
        )

    def endpoints_text(self) -> str:
        if self.endpoints is None:
            return f"InferencePool {self.serving} absent"
        return f"{self.endpoints[0]}/{self.endpoints[1]} ready"

    def lines(self) -> list[str]:
        return [
            f"fleet      {self.serving} in namespace {self.namespace}",
            f"groups     {self.groups_text()}",
            f"leader     {self.leader}",
            f"endpoints  {self.endpoints_text()}",
            f"preflight  {self.preflight}",
        ]

    def one_line(self) -> str:
        """The compact form (`--watch`, the twin's e2e): `prefill 7/7 groups ready, decode 5/5, ...`."""
        if self.roles is None:
            groups = f"DisaggregatedSet {self.serving} absent"
        else:
            groups = ", ".join(
                f"{r.role} {r.ready}/{r.desired}" + (" groups ready" if i == 0 else "")
                for i, r in enumerate(self.roles)
            )
        endpoints = "absent" if self.endpoints is None else f"{self.endpoints[0]}/{self.endpoints[1]}"
        return f"{groups}, leader {self.leader}, pool endpoints {endpoints}, preflight {self.preflight}"


def _roles(read: Reader, config: StackConfig) -> tuple[RoleGroups, ...] | None:
    """Groups per role: a group is ready when all `size` pods of it (one LeaderWorkerSet group,
    by its LWS name and group index) are Ready; desired is the DisaggregatedSet's replicas."""
    ns, name = config.serving.namespace, config.serving.name
    ds = read(f"/apis/{DS_API}/namespaces/{quote(ns)}/disaggregatedsets/{quote(name)}", None)
    if ds is None:
        return None
    pods = _list(read, f"/api/v1/namespaces/{quote(ns)}/pods", _selector(pool_selector(config)))
    result = []
    for role in (ds.get("spec") or {}).get("roles") or []:
        spec = role.get("spec") or {}
        size = int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
        mine = [
            p
            for p in pods
            if (p.get("metadata", {}).get("labels") or {}).get(ROLE_LABEL) == role.get("name")
            and not p.get("metadata", {}).get("deletionTimestamp")
        ]
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in mine:
            labels = pod["metadata"].get("labels") or {}
            groups.setdefault((labels.get(LWS_NAME, ""), labels.get(GROUP_INDEX, "")), []).append(pod)
        ready = sum(1 for g in groups.values() if len(g) == size and all(is_ready(p) for p in g))
        result.append(
            RoleGroups(
                role=str(role.get("name")),
                ready=ready,
                desired=int(spec.get("replicas", 1)),
                pods_ready=sum(1 for p in mine if is_ready(p)),
                pods=len(mine),
            )
        )
    return tuple(result)


def _leader(read: Reader, config: StackConfig, now: datetime) -> str:
    names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
    lease = read(
        f"/apis/coordination.k8s.io/v1/namespaces/{quote(names.namespace)}/leases/{quote(names.leader_lease)}",
        None,
    )
    if lease is None:
        return f"none (no Lease {names.leader_lease} yet)"
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder:
        return f"none (Lease {names.leader_lease} has no holder)"
    renewed = _time(spec.get("renewTime"))
    acquired = _time(spec.get("acquireTime")) or renewed
    duration = int(spec.get("leaseDurationSeconds") or 15)
    if renewed is not None and (now - renewed).total_seconds() > duration:
        return f"none (last holder {holder}, lease expired {_age((now - renewed).total_seconds())} ago)"
    held = f"held {_age((now - acquired).total_seconds())}" if acquired else "held"
    fresh = f", renewed {_age((now - renewed).total_seconds())} ago" if renewed else ""
    return f"{holder} ({held}{fresh})"


def _endpoints(read: Reader, config: StackConfig) -> tuple[int, int] | None:
    ns, name = config.serving.namespace, config.serving.name
    pool = read(f"/apis/{POOL_GROUP}/v1/namespaces/{quote(ns)}/inferencepools/{quote(name)}", None)
    if pool is None:
        return None
    labels = ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or pool_selector(config)
    pods = _list(read, f"/api/v1/namespaces/{quote(ns)}/pods", _selector(labels))
    return sum(1 for p in pods if is_ready(p)), len(pods)


def _preflight(read: Reader, config: StackConfig) -> str:
    if not config.serving.preflight.enabled:
        return "off (serving.preflight.enabled false)"
    job = read(
        f"/apis/batch/v1/namespaces/{quote(config.serving.namespace)}/jobs/{quote(job_name(config))}", None
    )
    if job is None:
        return "absent"
    conditions = {
        c.get("type"): c
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    if "Complete" in conditions:
        return "succeeded"
    if "Failed" in conditions:
        why = conditions["Failed"].get("reason") or conditions["Failed"].get("message") or ""
        return (
            f"failed ({why}; kubectl logs -n {config.serving.namespace} job/{job_name(config)})"
            if why
            else "failed"
        )
    return "running"


def read_status(read: Reader, config: StackConfig, now: datetime | None = None) -> Status:
    return Status(
        serving=config.serving.name,
        namespace=config.serving.namespace,
        roles=_roles(read, config),
        leader=_leader(read, config, now or datetime.now(UTC)),
        endpoints=_endpoints(read, config),
        preflight=_preflight(read, config),
    )


# --- One request through the gateway.


def gateway_url(read: Reader, config: StackConfig) -> str:
    """http://<the Gateway's first address>[:port] (the listener port of gateway.listenerPort)."""
    gateway = read(
        f"/apis/gateway.networking.k8s.io/v1/namespaces/{quote(config.serving.namespace)}"
        f"/gateways/{GATEWAY_NAME}",
        None,
    )
    addresses = ((gateway or {}).get("status") or {}).get("addresses") or []
    if not addresses or not addresses[0].get("value"):
        what = "no Gateway" if gateway is None else "the Gateway has no address yet"
        raise StatusError(
            f"{what} {config.serving.namespace}/{GATEWAY_NAME}: "
            "pass --url http://HOST:PORT to send the request"
        )
    host = str(addresses[0]["value"])
    host = f"[{host}]" if ":" in host else host
    port = config.gateway.listener_port
    return f"http://{host}" + ("" if port == 80 else f":{port}")


@dataclass(frozen=True)
class Answer:
    code: int | None
    seconds: float
    detail: str

    def line(self, url: str) -> str:
        code = "no answer" if self.code is None else f"HTTP {self.code}"
        detail = f": {self.detail}" if self.detail else ""
        return f"request    POST {url}: {code} in {self.seconds:.2f} s{detail}"


def chat_request(base_url: str, model: str, timeout: float = 120.0) -> tuple[str, Answer]:
    """POST one short chat completion to `base_url`/v1/chat/completions; its status and latency."""
    url = base_url.rstrip("/")
    if not url.endswith("/chat/completions"):
        url += "/v1/chat/completions"
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello in five words."}],
        "max_tokens": 16,
    }
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    started = time.monotonic()
    try:
        with opener.open(request, timeout=timeout) as response:
            payload = response.read()
            seconds = time.monotonic() - started
            try:
                text = json.loads(payload)["choices"][0]["message"]["content"]
                detail = " ".join(str(text).split())[:80]
            except (ValueError, KeyError, IndexError, TypeError):
                detail = ""
            return url, Answer(response.status, seconds, repr(detail) if detail else "")
    except urllib.error.HTTPError as exc:
        seconds = time.monotonic() - started
        return url, Answer(exc.code, seconds, " ".join(exc.read()[:200].decode(errors="replace").split()))
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return url, Answer(None, time.monotonic() - started, str(getattr(exc, "reason", exc)))


# --- The command.


def watch(
    poll: Callable[[], Status],
    timeout: float,
    interval: float,
    emit: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Status | None:
    """Poll until every group is ready (that Status) or `timeout` seconds pass (None); one
    progress line per poll: elapsed time and the compact status."""
    started = clock()
    while True:
        status = poll()
        elapsed = clock() - started
        emit(f"[{_age(elapsed):>6}] {status.one_line()}")
        if status.all_ready:
            return status
        if elapsed + interval > timeout:
            return None
        sleep(interval)
