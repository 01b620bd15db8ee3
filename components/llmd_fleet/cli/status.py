"""`llmd-fleet status STACK`: read a deployed fleet from its cluster and say whether it serves.

    groups     prefill 7/7 ready, decode 5/5 ready      (pods of each LeaderWorkerSet group Ready)
    leader     glm52-epp-7d9c-x2k (held 41m, renewed 3s ago)
    endpoints  68/68 pool pods Ready
    preflight  succeeded
    revision   glm52 6d4f9b8c7: prefill 28/28, decode 40/40 pods ready
    revision   glm52-canary 7b5c6d9f8: prefill 4/4, decode 8/8 pods ready
    traffic    glm52 90%, glm52-canary 10% (HTTPRoute glm52)

The `revision` lines appear during an upgrade or a canary only (more than one revision, or a
canary's DisaggregatedSet), the `traffic` line only while the route has more than one backend.

The names come from the stack file through the same helpers the render uses (serving name and
namespace, the EPP's leader Lease, the InferencePool, the preflight Job, the Gateway). The cluster
is read through the one hardened client (llmd_fleet/cluster/client.py: kubeconfig, credentials,
bounds); every string it returns is escaped before it is printed.
"""

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from llmd_fleet.cluster.client import list_all, text
from llmd_fleet.conventions import POOL_GROUP
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME
from llmd_fleet.layers.preflight.specs import job_name
from llmd_fleet.layers.router.epp_config import DS_REVISION_LABEL
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.layers.serving.config import canary_name
from llmd_fleet.layers.serving.specs import DS_NAME_LABEL, DS_ROLE_LABEL, pool_selector
from llmd_fleet.stack.model import StackConfig

DS_API = "disaggregatedset.x-k8s.io/v1"
# The role scaler LWS makes for an External role (the vendored CRD
# schemas/crds/disaggregatedset.x-k8s.io/disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml).
ROLE_SCALERS = "disaggregatedsetrolescalers"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ROLE_LABEL = "llm-d.ai/role"

Reader = Callable[[str, dict[str, str] | None], Any]
"""GET an API path (with query parameters): the decoded JSON, or None when it is not found (404)."""


class StatusError(Exception):
    """A refusal `status` prints as one line (exit 2): a flag out of its bounds, no Gateway
    address for --request."""


# `--watch` bounds: a poll at most every second (a tighter loop is a load on the API server, not
# a faster answer) and at most every hour; the whole watch at most a day.
INTERVAL_S = (1.0, 3600.0)
MAX_TIMEOUT_S = 86400.0


def interval_seconds(value: str) -> float:
    """`--interval`: a finite number of seconds from 1 to 3600 (raises StatusError naming the flag)."""
    seconds = _seconds(value)
    if not INTERVAL_S[0] <= seconds <= INTERVAL_S[1]:
        raise StatusError(
            f"--interval {text(value, 40)}: must be a finite number of seconds from "
            f"{INTERVAL_S[0]:.0f} to {INTERVAL_S[1]:.0f}"
        )
    return seconds


def timeout_seconds(value: str) -> float:
    """`--timeout`: a finite number of seconds above 0 and at most 86400 (one day)."""
    seconds = _seconds(value)
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise StatusError(
            f"--timeout {text(value, 40)}: must be a finite number of seconds above 0 and at most "
            f"{MAX_TIMEOUT_S:.0f}"
        )
    return seconds


def _seconds(value: str) -> float:
    try:
        seconds = float(value) if value == value.strip() and len(value) <= 40 else math.nan
    except ValueError:
        seconds = math.nan
    return seconds if math.isfinite(seconds) else math.nan


# --- What the fleet's objects say.


def is_ready(pod: dict[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _list(read: Reader, path: str, selector: str) -> list[dict[str, Any]]:
    return list_all(read, path, selector)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _dict(value: Any) -> dict[str, Any]:
    """A mapping field of an object from the cluster; empty when absent or not a mapping."""
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    """An integer field of an object from the cluster; `default` when absent or not an integer."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return default
    try:
        return int(value) if len(str(value)) <= 18 else default
    except ValueError:
        return default


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
    reasons: tuple[str, ...] = ()
    """Why each pod or group is not ready, one entry each, from the API (`pod_reason`)."""
    revisions: tuple[str, ...] = ()
    """During an upgrade or a canary (more than one revision, or a canary's DisaggregatedSet):
    ready pods per revision per role, one entry per DisaggregatedSet revision (`_revisions`)."""
    traffic: str | None = None
    """The route's split when it has more than one backend (`_traffic`), else None."""

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
            *(f"revision   {revision}" for revision in self.revisions),
            *([f"traffic    {self.traffic}"] if self.traffic is not None else []),
            *(f"why        {reason}" for reason in self.reasons),
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


# Reasons a container waits that say what is wrong (kubelet's; pkg/kubelet/images and
# pkg/kubelet/kuberuntime): the image cannot be pulled, the container cannot be created, it crashes.
_WAITING_PROBLEMS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
MAX_REASONS = 20


def pod_reason(pod: dict[str, Any]) -> str:
    """Why a pod is not Ready, from its status as the API reports it: Pending with the scheduler's
    message (unallocatable claims included), image pull errors, crash loops with the last
    termination reason, containers running but not ready (a failing readiness or startup probe)."""
    status = _dict(pod.get("status"))
    phase = text(status.get("phase") or "Unknown", 40)
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    scheduled = conditions.get("PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        why = text(scheduled.get("reason") or "not scheduled", 60)
        message = text(scheduled.get("message") or "", 300)
        return f"{phase}, {why}" + (f": {message}" if message else "")
    containers = [
        c
        for key in ("initContainerStatuses", "containerStatuses")
        for c in status.get(key) or []
        if isinstance(c, dict)
    ]
    for container in containers:
        name = text(container.get("name") or "?", 60)
        state = _dict(container.get("state"))
        waiting = _dict(state.get("waiting"))
        if waiting and waiting.get("reason") in _WAITING_PROBLEMS:
            reason = text(waiting["reason"], 60)
            if reason == "CrashLoopBackOff":
                last = _dict(_dict(container.get("lastState")).get("terminated"))
                ended = text(last.get("reason") or "unknown", 60)
                code = _int(last.get("exitCode"), -1)
                restarts = _int(container.get("restartCount"), 0)
                return (
                    f"container {name}: CrashLoopBackOff ({restarts} restarts; last ended: {ended}, "
                    f"exit code {code})"
                )
            message = text(waiting.get("message") or "", 300)
            return f"container {name}: {reason}" + (f": {message}" if message else "")
        terminated = _dict(state.get("terminated"))
        if terminated and _int(terminated.get("exitCode"), 0) != 0:
            ended = text(terminated.get("reason") or "Error", 60)
            return f"container {name}: terminated: {ended}, exit code {_int(terminated.get('exitCode'), -1)}"
    for container in status.get("containerStatuses") or []:
        if (
            isinstance(container, dict)
            and "running" in _dict(container.get("state"))
            and not container.get("ready")
        ):
            name = text(container.get("name") or "?", 60)
            probe = "startup probe" if container.get("started") is False else "readiness probe"
            return f"container {name}: running, not ready ({probe} not passing)"
    if scheduled is None and phase == "Pending":
        return "Pending: not scheduled yet"
    ready = conditions.get("Ready") or {}
    why = text(ready.get("reason") or phase, 60)
    message = text(ready.get("message") or "", 200)
    return why + (f": {message}" if message else "")


def _reasons(pods: list[dict[str, Any]], missing: list[str]) -> tuple[str, ...]:
    """One line per not-ready pod (name: reason), then per group short of pods, at most MAX_REASONS."""
    lines = list(missing)
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name"))):
        if not is_ready(pod):
            lines.append(
                f"pod {text((pod.get('metadata') or {}).get('name') or '?', 100)}: {pod_reason(pod)}"
            )
    if len(lines) > MAX_REASONS:
        lines = [*lines[:MAX_REASONS], f"... and {len(lines) - MAX_REASONS} more not ready"]
    return tuple(lines)


def _desired_groups(read: Reader, ns: str, name: str, role: dict[str, Any], spec: dict[str, Any]) -> int:
    """A role's desired groups: its `replicas`, or for an autoscaled role (`scaling.mode:
    External`), whose `replicas` the controller ignores (the CRD still defaults it to 1), its
    DisaggregatedSetRoleScaler's (`<set>-<role>`, whose `/scale` the autoscaler writes:
    specReplicasPath `.spec.replicas` in the LWS CRD); 1 while the scaler does not exist yet,
    the count LWS seeds it with."""
    if _dict(role.get("scaling")).get("mode") != "External":
        return _int(spec.get("replicas"), 1)
    scaler_name = f"{name}-{role.get('name')}"
    scaler = read(f"/apis/{DS_API}/namespaces/{quote(ns)}/{ROLE_SCALERS}/{quote(scaler_name)}", None)
    return _int(_dict(_dict(scaler).get("spec")).get("replicas"), 1)


def _roles_and_reasons(
    read: Reader, config: StackConfig
) -> tuple[tuple[RoleGroups, ...] | None, tuple[str, ...]]:
    """Groups per role: a group is ready when all `size` pods of it (one LeaderWorkerSet group,
    by its LWS name and group index) are Ready; desired is the DisaggregatedSet's replicas. With
    them, why each pod or group that is not ready is not."""
    ns, name = config.serving.namespace, config.serving.name
    ds = read(f"/apis/{DS_API}/namespaces/{quote(ns)}/disaggregatedsets/{quote(name)}", None)
    pods = _list(read, f"/api/v1/namespaces/{quote(ns)}/pods", _selector(pool_selector(config)))
    if ds is None:
        # No groups to count, but pods of the pool (made before its CRD went away, or by hand)
        # still say why they wait.
        return None, _reasons(pods, [])
    result = []
    counted: list[dict[str, Any]] = []
    missing: list[str] = []
    roles = _dict(ds.get("spec")).get("roles")
    for role in roles if isinstance(roles, list) else []:
        if not isinstance(role, dict):
            continue
        spec = _dict(role.get("spec"))
        size = _int((spec.get("leaderWorkerTemplate") or {}).get("size"), 1)
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
        desired = _desired_groups(read, ns, name, role, spec)
        counted += mine
        if len(mine) < desired * size:
            missing.append(
                f"{text(role.get('name'), 60)}: {len(mine)} of {desired * size} pods exist "
                f"({desired} groups of {size}; the LWS controller creates them: "
                f"kubectl describe disaggregatedset -n {ns} {name})"
            )
        result.append(
            RoleGroups(
                role=text(role.get("name"), 60),
                ready=ready,
                desired=desired,
                pods_ready=sum(1 for p in mine if is_ready(p)),
                pods=len(mine),
            )
        )
    return tuple(result), _reasons(counted, missing)


def _leader(read: Reader, config: StackConfig, now: datetime) -> str:
    names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
    lease = read(
        f"/apis/coordination.k8s.io/v1/namespaces/{quote(names.namespace)}/leases/{quote(names.leader_lease)}",
        None,
    )
    if lease is None:
        return f"none (no Lease {names.leader_lease} yet)"
    spec = lease.get("spec") or {}
    holder = text(spec.get("holderIdentity") or "", 80)
    if not holder:
        return f"none (Lease {names.leader_lease} has no holder)"
    renewed = _time(spec.get("renewTime"))
    acquired = _time(spec.get("acquireTime")) or renewed
    duration = _int(spec.get("leaseDurationSeconds"), 15)
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
        why = text(conditions["Failed"].get("reason") or conditions["Failed"].get("message") or "", 120)
        return (
            f"failed ({why}; kubectl logs -n {config.serving.namespace} job/{job_name(config)})"
            if why
            else "failed"
        )
    return "running"


def _revisions(read: Reader, config: StackConfig) -> tuple[str, ...]:
    """Ready pods per revision per role of the stable DisaggregatedSet and of its canary
    (`<name>-canary`, layers/serving/canary.py), by the labels the DisaggregatedSet controller
    puts on every pod (layers/serving/specs.py); empty unless there is more than one revision or
    a canary, i.e. outside an upgrade or a canary. Each entry: `<set> <revision>: <role>
    <ready>/<pods>, ... pods ready`."""
    ns = config.serving.namespace
    entries: dict[tuple[str, str], dict[str, list[int]]] = {}
    canary = canary_name(config.serving)
    sets = [config.serving.name, canary]
    for name in sets:
        pods = _list(read, f"/api/v1/namespaces/{quote(ns)}/pods", _selector({DS_NAME_LABEL: name}))
        for pod in pods:
            metadata = _dict(pod.get("metadata"))
            if metadata.get("deletionTimestamp"):
                continue
            labels = _dict(metadata.get("labels"))
            revision = text(labels.get(DS_REVISION_LABEL) or "unlabelled", 40)
            counts = entries.setdefault((name, revision), {}).setdefault(
                text(labels.get(DS_ROLE_LABEL) or "?", 40), [0, 0]
            )
            counts[0] += is_ready(pod)
            counts[1] += 1
    if len(entries) < 2 and not any(name == canary for name, _ in entries):
        return ()
    role_order = {"prefill": 0, "decode": 1}
    return tuple(
        f"{name} {revision}: "
        + ", ".join(
            f"{role} {ready}/{total}"
            for role, (ready, total) in sorted(roles.items(), key=lambda r: (role_order.get(r[0], 2), r[0]))
        )
        + " pods ready"
        for (name, revision), roles in sorted(entries.items(), key=lambda e: (sets.index(e[0][0]), e[0][1]))
    )


def _traffic(read: Reader, config: StackConfig) -> str | None:
    """The pool route's split as the cluster has it: each backendRef's share of the weights
    (Gateway API: a backendRef without a weight weighs 1), e.g. `glm52 90%, glm52-canary 10%
    (HTTPRoute glm52)`; None when the route is absent or has one backend."""
    ns, name = config.serving.namespace, config.serving.name
    route = read(f"/apis/gateway.networking.k8s.io/v1/namespaces/{quote(ns)}/httproutes/{quote(name)}", None)
    rules = _dict(_dict(route).get("spec")).get("rules")
    refs = [
        ref
        for rule in (rules if isinstance(rules, list) else [])
        for ref in (_dict(rule).get("backendRefs") or [])
        if isinstance(ref, dict)
    ]
    if len(refs) < 2:
        return None
    weights = [(text(ref.get("name") or "?", 60), max(0, _int(ref.get("weight"), 1))) for ref in refs]
    total = sum(w for _, w in weights)
    shares = ", ".join(f"{ref} {100 * w / total:.0f}%" if total else f"{ref} 0%" for ref, w in weights)
    return f"{shares} (HTTPRoute {name})"


def read_status(read: Reader, config: StackConfig, now: datetime | None = None) -> Status:
    roles, reasons = _roles_and_reasons(read, config)
    return Status(
        revisions=_revisions(read, config),
        traffic=_traffic(read, config),
        serving=config.serving.name,
        namespace=config.serving.namespace,
        roles=roles,
        reasons=reasons,
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
