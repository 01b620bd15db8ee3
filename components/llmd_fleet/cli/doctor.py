"""`llmd-fleet doctor STACK [--deployed]`: check the cluster for what the stack relies on but does
not create (before `pulumi up`), or for what it should now hold (`--deployed`, after it).

What the stack relies on is read from its own render (the same synthesis `render` writes, so a
claim's DeviceClass, the attributes it matches on, each role's requests and shm, the gateway class
and the secrets its pods read are those the deploy will send), then compared with the cluster
through the one cluster client (llmd_fleet/cluster/client.py). One line per check, in check order:

    doctor: <id>: ok|FAIL: found <x>; needs <y>; fix: <command or docs/...#anchor>
    doctor: <id>: skip: <why>
    doctor: <stack>: <N> checks, <F> failed

A skip (the cluster cannot answer it, or the stack does not use it) counts in N, not in F. A 403
is a FAIL naming the permission (docs/troubleshooting.md#permissions gives the minimal
ClusterRole). Every string from the cluster is escaped before it is printed.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import combinations
from typing import Any, Literal
from urllib.parse import quote

from llmd_fleet.cli.doctor_expectations import Expectations, expectations, gib, quantity
from llmd_fleet.cluster.client import ClusterError, Forbidden, list_all, text
from llmd_fleet.conventions import GPU_RESOURCE
from llmd_fleet.platform.dra import GPU_DEVICE_CLASS
from llmd_fleet.versions import versions

Reader = Callable[[str, dict[str, str] | None], Any]
Status = Literal["ok", "FAIL", "skip"]

GPU_DRIVER = GPU_DEVICE_CLASS
"""The NVIDIA DRA driver's name, which is also the name of the DeviceClass its chart installs."""
NIC_DRIVER = "dra.net"
"""DRANET's driver name (llmd_fleet/conventions.py DRANET_RDMA_SELECTOR)."""


def dra_minimum() -> tuple[int, ...]:
    """The Kubernetes minor that serves resource.k8s.io/v1 (DRA GA), the fleet's minimum
    (images/versions.toml [kubernetes].minimum)."""
    return _version(versions().kubernetes.minimum)[:2]


AGENTGATEWAY_MIN = (1, 2, 0)
"""llmd_fleet/layers/gateway/rules.py AGENTGATEWAY_MULTI_PORT_POOLS, for a preinstalled gateway too."""
LWS_CRDS = ("leaderworkersets.leaderworkerset.x-k8s.io", "disaggregatedsets.disaggregatedset.x-k8s.io")
GATEWAY_CRDS = ("gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io")
POOL_CRD = "inferencepools.inference.networking.k8s.io"
# CRD groups the stack's charts bring when it installs the platform: another release owning one
# of these blocks the install.
INSTALLED_GROUPS = (
    "leaderworkerset.x-k8s.io",
    "disaggregatedset.x-k8s.io",
    "gateway.networking.k8s.io",
    "inference.networking.k8s.io",
    "resource.nvidia.com",
    "keda.sh",
    "monitoring.coreos.com",
    "postgresql.cnpg.io",
    "agentgateway.dev",
)
DOCS = "docs/troubleshooting.md"
SCHEMA = "llmd-fleet.doctor/v1"


class DoctorRefused(Exception):
    """A stack doctor cannot check in the mode asked (one line, exit 2)."""


@dataclass(frozen=True)
class Result:
    id: str
    status: Status
    found: str = ""
    needs: str = ""
    fix: str = ""
    why: str = ""

    def line(self) -> str:
        if self.status == "skip":
            return f"doctor: {self.id}: skip: {self.why}"
        return f"doctor: {self.id}: {self.status}: found {self.found}; needs {self.needs}; fix: {self.fix}"

    def as_json(self) -> dict[str, str]:
        if self.status == "skip":
            return {"id": self.id, "status": "skip", "why": self.why}
        return {
            "id": self.id,
            "status": self.status,
            "found": self.found,
            "needs": self.needs,
            "fix": self.fix,
        }


def ok(check_id: str, found: str, needs: str, fix: str) -> Result:
    return Result(check_id, "ok", found, needs, fix)


def fail(check_id: str, found: str, needs: str, fix: str) -> Result:
    return Result(check_id, "FAIL", found, needs, fix)


def skip(check_id: str, why: str) -> Result:
    return Result(check_id, "skip", why=why)


def check(check_id: str, good: bool, found: str, needs: str, fix: str) -> Result:
    return Result(check_id, "ok" if good else "FAIL", found, needs, fix)


# --- The cluster (what the stack relies on, from its render: cli/doctor_expectations.py).


@dataclass
class Cluster:
    """The cluster as doctor reads it: a reader plus the answers shared by several checks."""

    read: Reader
    _cache: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str) -> Any:
        if path not in self._cache:
            self._cache[path] = self.read(path, None)
        return self._cache[path]

    def items(self, path: str) -> list[dict[str, Any]]:
        key = "list:" + path
        if key not in self._cache:
            self._cache[key] = list_all(self.read, path)
        result: list[dict[str, Any]] = self._cache[key]
        return result


def _labels_match(node: dict[str, Any], selector: tuple[tuple[str, str], ...]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector)


def _name(obj: dict[str, Any]) -> str:
    return text((obj.get("metadata") or {}).get("name") or "?", 80)


def _version(text_value: str) -> tuple[int, ...]:
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text_value)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


def _not_dra(e: Expectations) -> str:
    if e.allocation == "none":
        return "the stack allocates no GPUs"
    return f"the stack allocates GPUs by {e.allocation}, not DRA"


def kubernetes_version(e: Expectations, c: Cluster) -> Result:
    found = c.get("/version") or {}
    git = text(found.get("gitVersion") or "unknown", 40)
    wanted = _version(e.kubernetes_version)[:2]
    floor = max(wanted, dra_minimum()) if e.allocation == "dra" else wanted
    needs = f">= {'.'.join(map(str, floor))}"
    needs += f" (target.kubernetesVersion {e.kubernetes_version}"
    needs += ", resource.k8s.io/v1)" if e.allocation == "dra" else ")"
    have = _version(git)[:2]
    return check(
        "kubernetes-version",
        bool(have) and have >= floor,
        git,
        needs,
        "upgrade the cluster, or set target.kubernetesVersion to what it runs",
    )


def dra_api(e: Expectations, c: Cluster) -> Result:
    if e.allocation != "dra":
        return skip("dra-api", _not_dra(e))
    group = c.get("/apis/resource.k8s.io/v1")
    served = sorted(r.get("name", "") for r in (group or {}).get("resources") or [])
    good = group is not None and "deviceclasses" in served and "resourceslices" in served
    found = "resource.k8s.io/v1 served" if good else "resource.k8s.io/v1 not served"
    return check(
        "dra-api",
        good,
        found,
        "resource.k8s.io/v1 with deviceclasses and resourceslices "
        f"(Kubernetes >= {versions().kubernetes.minimum})",
        f"{DOCS}#dra-api",
    )


def device_classes(e: Expectations, c: Cluster, deployed: bool) -> Result:
    needed = [d for d in e.claim_classes if deployed or d not in e.created_classes]
    if e.allocation != "dra" or not needed:
        return skip("gpu-deviceclass", "the stack's claims name no DeviceClass it does not create")
    if e.installs and not deployed:
        return skip("gpu-deviceclass", "the stack installs the NVIDIA DRA driver, whose chart creates it")
    missing = [d for d in needed if c.get(f"/apis/resource.k8s.io/v1/deviceclasses/{quote(d)}") is None]
    found = "missing " + ", ".join(missing) if missing else "DeviceClass " + ", ".join(needed)
    return check(
        "gpu-deviceclass",
        not missing,
        found,
        "DeviceClass " + ", ".join(needed) + " (the claims name it)",
        f"{DOCS}#gpu-deviceclass",
    )


def _slices(c: Cluster, driver: str) -> list[dict[str, Any]]:
    return [
        s
        for s in c.items("/apis/resource.k8s.io/v1/resourceslices")
        if (s.get("spec") or {}).get("driver") == driver
    ]


def _devices(slices: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(node, device) of every device of the slices."""
    return [
        (str((s.get("spec") or {}).get("nodeName") or ""), d)
        for s in slices
        for d in (s.get("spec") or {}).get("devices") or []
        if isinstance(d, dict)
    ]


def _attribute(device: dict[str, Any], name: str) -> Any:
    """A device attribute by its qualified name (`resource.kubernetes.io/pcieRoot`) or, for the
    driver's own domain, its short name; the value of whichever type field it has."""
    attributes = device.get("attributes") or {}
    value = attributes.get(name)
    if value is None and "/" in name:
        value = attributes.get(name.rsplit("/", 1)[1])
    if isinstance(value, dict):
        for kind in ("string", "bool", "int", "version"):
            if kind in value:
                return value[kind]
    return None


def _driver_version(devices: list[tuple[str, dict[str, Any]]]) -> str:
    found = sorted({str(v) for _, d in devices if (v := _attribute(d, "driverVersion")) is not None})
    return f", driver version {text(', '.join(found), 60)}" if found else ", driver version not published"


def resource_slices(
    e: Expectations, c: Cluster, deployed: bool, check_id: str, driver: str, what: str
) -> Result:
    if e.allocation != "dra":
        return skip(check_id, _not_dra(e))
    if check_id == "nic-resourceslices" and not any(x != GPU_DEVICE_CLASS for x in e.claim_classes):
        return skip(check_id, "the stack's claims request no NICs")
    if e.installs and not deployed:
        return skip(
            check_id, f"the stack installs the {driver} driver; doctor --deployed checks its ResourceSlices"
        )
    devices = _devices(_slices(c, driver))
    if check_id == "nic-resourceslices":
        devices = [(n, d) for n, d in devices if _attribute(d, "rdma") is True]
    nodes = {n for n, _ in devices}
    per_pod = max((r.gpus for r in e.roles), default=0)
    pods = sum(r.pods for r in e.roles)
    found = f"{len(devices)} {what} on {len(nodes)} nodes{_driver_version(devices)}"
    needs = f"{what} from {driver} on {pods} nodes ({per_pod} per node)"
    return check(
        check_id,
        len(nodes) >= pods and len(devices) >= pods * per_pod,
        found,
        needs,
        f"{DOCS}#resourceslices",
    )


def match_attributes(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.allocation != "dra" or not e.match_attributes:
        return skip("pcie-root-attribute", "the stack's claims match on no device attribute")
    if e.installs and not deployed:
        return skip("pcie-root-attribute", "the stack installs the DRA drivers; doctor --deployed checks it")
    parts = []
    good = True
    for driver, what in ((GPU_DRIVER, "GPUs"), (NIC_DRIVER, "NICs")):
        devices = _devices(_slices(c, driver))
        if driver == NIC_DRIVER:
            devices = [(n, d) for n, d in devices if _attribute(d, "rdma") is True]
        for attribute in e.match_attributes:
            having = sum(1 for _, d in devices if _attribute(d, attribute) is not None)
            good = good and bool(devices) and having == len(devices)
            parts.append(f"{attribute.rsplit('/', 1)[-1]} on {having} of {len(devices)} {what}")
    return check(
        "pcie-root-attribute",
        good,
        ", ".join(parts),
        "every GPU and NIC to publish " + ", ".join(e.match_attributes) + " (the claims match on it)",
        f"{DOCS}#pcie-root-attribute",
    )


def device_plugin(e: Expectations, c: Cluster) -> Result:
    nodes = [n for n in c.items("/api/v1/nodes") if any(_labels_match(n, r.node_selector) for r in e.roles)]
    advertised = [
        n
        for n in nodes
        if quantity(((n.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0)) > 0
    ]
    if e.allocation == "dra":
        return check(
            "gpu-device-plugin",
            not advertised,
            f"{GPU_RESOURCE} allocatable on {len(advertised)} of {len(nodes)} GPU nodes",
            f"the GPU device plugin off on DRA nodes (no {GPU_RESOURCE} allocatable)",
            f"{DOCS}#gpu-device-plugin",
        )
    if e.allocation == "device-plugin":
        per_pod = max((r.gpus for r in e.roles), default=0)
        enough = [n for n in advertised if quantity(n["status"]["allocatable"][GPU_RESOURCE]) >= per_pod]
        pods = sum(r.pods for r in e.roles)
        return check(
            "gpu-device-plugin",
            len(enough) >= pods,
            f"{len(enough)} nodes with {per_pod} {GPU_RESOURCE} allocatable",
            f"{pods} nodes with {per_pod} {GPU_RESOURCE} allocatable (acceleratorAllocation device-plugin)",
            f"{DOCS}#gpu-device-plugin",
        )
    return skip("gpu-device-plugin", "the stack allocates no GPUs")


def lws_crds(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.installs and not deployed:
        return skip("lws-crds", "the stack installs LWS, whose chart brings the CRDs")
    missing = []
    for name in LWS_CRDS:
        crd = c.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        served = [
            v.get("name") for v in ((crd or {}).get("spec") or {}).get("versions") or [] if v.get("served")
        ]
        if crd is None or "v1" not in served:
            missing.append(name.split(".")[0])
    found = "missing " + ", ".join(missing) if missing else "LeaderWorkerSet and DisaggregatedSet v1 served"
    return check(
        "lws-crds",
        not missing,
        found,
        f"the LeaderWorkerSet and DisaggregatedSet CRDs at v1 (LWS >= {versions().chart('lws').version})",
        f"{DOCS}#lws",
    )


def lws_controller(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.installs and not deployed:
        return skip("lws-controller", "the stack installs the LWS controller")
    # The controller serves its own admission webhooks (upstream config/webhook: LeaderWorkerSet
    # mutating and validating, DisaggregatedSet validating): registered, they say it is installed.
    hooks: dict[str, str] = {}
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for config in c.items(f"/apis/admissionregistration.k8s.io/v1/{kind}"):
            for hook in config.get("webhooks") or []:
                groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
                for group in groups & {"disaggregatedset.x-k8s.io", "leaderworkerset.x-k8s.io"}:
                    hooks[text(hook.get("name") or "?", 80)] = group
    serves_ds = "disaggregatedset.x-k8s.io" in hooks.values()
    serves_lws = "leaderworkerset.x-k8s.io" in hooks.values()
    found = f"webhooks {', '.join(sorted(hooks)[:4])}" if hooks else "no LWS webhooks registered"
    return check(
        "lws-controller",
        serves_lws and serves_ds,
        found,
        "the LWS controller's webhooks for LeaderWorkerSet and DisaggregatedSet (the controller running)",
        f"{DOCS}#lws",
    )


def _bundle(crd: dict[str, Any] | None, annotation: str) -> str:
    return text(((crd or {}).get("metadata") or {}).get("annotations", {}).get(annotation) or "unknown", 30)


def gateway_crds(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.implementation == "gke-l7-rilb" or (e.installs and not deployed):
        return skip("gateway-crds", "the stack installs the Gateway API CRDs, or GKE provides them")
    pinned_api = versions().manifest("gateway-api").version
    pinned_pool = versions().manifest("inference-extension").version
    found, good = [], True
    for name in GATEWAY_CRDS:
        crd = c.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if crd is None:
            good = False
            found.append(f"no {name.split('.')[0]}")
        else:
            bundle = _bundle(crd, "gateway.networking.k8s.io/bundle-version")
            good = good and bool(_version(bundle)) and _version(bundle) >= _version(pinned_api)
            found.append(f"{name.split('.')[0]} {bundle}")
    pool = c.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{POOL_CRD}")
    served = [
        v.get("name") for v in ((pool or {}).get("spec") or {}).get("versions") or [] if v.get("served")
    ]
    if pool is None or "v1" not in served:
        good = False
        found.append("no InferencePool v1")
    else:
        found.append(f"inferencepools v1 {_bundle(pool, 'inference.networking.k8s.io/bundle-version')}")
    return check(
        "gateway-crds",
        good,
        ", ".join(found),
        f"Gateway API >= {pinned_api}, InferencePool v1 (inference extension {pinned_pool})",
        f"{DOCS}#gateway-crds",
    )


def gateway_class(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.gateway_class is None:
        return skip("gatewayclass", "the stack renders no Gateway")
    if (e.creates_gateway_class or e.installs) and not deployed:
        return skip("gatewayclass", "the stack installs the gateway, whose chart creates the GatewayClass")
    found = c.get(f"/apis/gateway.networking.k8s.io/v1/gatewayclasses/{quote(e.gateway_class)}")
    controller = text(((found or {}).get("spec") or {}).get("controllerName") or "", 80)
    return check(
        "gatewayclass",
        found is not None,
        f"GatewayClass {e.gateway_class} ({controller})" if found else f"no GatewayClass {e.gateway_class}",
        f"GatewayClass {e.gateway_class} (gateway.implementation {e.implementation})",
        f"{DOCS}#gatewayclass",
    )


def _image(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference (`host:port/path/name:tag@digest`)."""
    reference = image.split("@", 1)[0]
    last = reference.rsplit("/", 1)[-1]
    if ":" in last:
        return reference[: -len(last)] + last.split(":", 1)[0], last.split(":", 1)[1]
    return reference, ""


def gateway_version(e: Expectations, c: Cluster, deployed: bool) -> Result:
    if e.implementation != "agentgateway":
        return skip(
            "gateway-version",
            f"the version rule is agentgateway's (gateway.implementation {e.implementation})",
        )
    if e.installs and not deployed:
        return skip(
            "gateway-version", f"the stack installs agentgateway {versions().chart('agentgateway').version}"
        )
    found = []
    for deployment in c.items("/apis/apps/v1/deployments"):
        pod = (((deployment.get("spec") or {}).get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or []:
            repository, tag = _image(str(container.get("image") or ""))
            if "agentgateway" in repository:
                found.append((_name(deployment), text(tag or "untagged", 40)))
    minimum = ".".join(map(str, AGENTGATEWAY_MIN))
    good = bool(found) and all(_version(v) and _version(v) >= AGENTGATEWAY_MIN for _, v in found)
    shown = ", ".join(f"{n} {v}" for n, v in found[:4]) if found else "no agentgateway Deployment"
    return check(
        "gateway-version",
        good,
        shown,
        f"agentgateway >= {minimum} (multi-port InferencePools; "
        f"pinned {versions().chart('agentgateway').version})",
        f"{DOCS}#gateway-version",
    )


def nodes(e: Expectations, c: Cluster) -> Result:
    if not e.roles:
        return skip("node-capacity", "the stack renders no serving pods")
    all_nodes = c.items("/api/v1/nodes")
    slices = _devices(_slices(c, GPU_DRIVER)) if e.allocation == "dra" else []
    gpus_on: dict[str, int] = {}
    for node_name, _ in slices:
        gpus_on[node_name] = gpus_on.get(node_name, 0) + 1
    fits: list[set[str]] = []
    for role in e.roles:
        fitting = set()
        for node in all_nodes:
            if not _labels_match(node, role.node_selector):
                continue
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            gpus = (
                gpus_on.get(_name(node), 0)
                if e.allocation == "dra"
                else int(quantity(allocatable.get(GPU_RESOURCE, 0)))
            )
            if (
                quantity(allocatable.get("cpu", 0)) >= role.cpu
                and quantity(allocatable.get("memory", 0)) >= role.memory
                and gpus >= role.gpus
            ):
                fitting.add(_name(node))
        fits.append(fitting)
    parts = [f"{len(f)} nodes fit a {r.role} pod" for r, f in zip(e.roles, fits, strict=True)]
    # One serving pod per node: every role's pods can be placed at once when each set of roles
    # has at least as many fitting nodes as pods (Hall's condition; a stack has a few roles).
    good = all(
        len(set().union(*(fits[i] for i in subset))) >= sum(e.roles[i].pods for i in subset)
        for size in range(1, len(e.roles) + 1)
        for subset in combinations(range(len(e.roles)), size)
    )
    pods = sum(r.pods for r in e.roles)
    total_fit = set().union(*fits)
    wants = "; ".join(f"{r.role} {r.pods} x ({r.gpus} GPUs, {r.cpu} CPU, {gib(r.memory)})" for r in e.roles)
    return check(
        "node-capacity",
        good,
        ", ".join(parts) + f" ({len(total_fit)} distinct)",
        f"{pods} nodes, one pod each: {wants}",
        f"{DOCS}#node-capacity",
    )


def shm(e: Expectations, c: Cluster) -> Result:
    roles = [r for r in e.roles if r.shm > 0]
    if not roles:
        return skip("shm", "the stack's pods mount no memory-backed /dev/shm")
    parts, good = [], True
    for role in roles:
        nodes_ = [n for n in c.items("/api/v1/nodes") if _labels_match(n, role.node_selector)]
        biggest = max(
            (quantity(((n.get("status") or {}).get("allocatable") or {}).get("memory", 0)) for n in nodes_),
            default=Decimal(0),
        )
        fits = role.shm <= role.memory and role.shm <= biggest
        good = good and fits
        parts.append(
            f"{role.role} shm {gib(role.shm)} in a {gib(role.memory)} pod, nodes up to {gib(biggest)}"
        )
    return check(
        "shm",
        good,
        ", ".join(parts),
        "each role's shm within its pod's memory and the node's allocatable memory",
        f"{DOCS}#shm",
    )


def secrets(e: Expectations, c: Cluster, deployed: bool) -> Result:
    wanted = [s for s in e.secrets_read if deployed or s not in e.secrets_created]
    if not wanted:
        return skip("secrets", "the stack's pods read no Secret it does not create")
    missing = [
        s for s in wanted if c.get(f"/api/v1/namespaces/{quote(e.namespace)}/secrets/{quote(s)}") is None
    ]
    found = "missing " + ", ".join(missing) if missing else ", ".join(wanted)
    return check(
        "secrets",
        not missing,
        found,
        f"Secrets {', '.join(wanted)} in {e.namespace}",
        f"kubectl create secret generic -n {e.namespace} <name> ... ({DOCS}#secrets)",
    )


def crd_owners(e: Expectations, c: Cluster) -> Result:
    if not e.installs:
        return skip("crd-owners", "the stack installs no chart (target.platform preinstalled)")
    owned = []
    for crd in c.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
        group = str(((crd.get("spec") or {}).get("group")) or "")
        release = ((crd.get("metadata") or {}).get("annotations") or {}).get("meta.helm.sh/release-name")
        if group in INSTALLED_GROUPS and release and release not in e.releases:
            owned.append(f"{_name(crd)} ({text(release, 40)})")
    return check(
        "crd-owners",
        not owned,
        "owned by another release: " + ", ".join(owned[:5]) if owned else "none owned elsewhere",
        "no CRD the stack's charts install owned by another Helm release",
        f"uninstall that release, or set target.platform: preinstalled ({DOCS}#crd-owners)",
    )


def serving_objects(e: Expectations, c: Cluster) -> Result:
    ds = c.get(
        f"/apis/disaggregatedset.x-k8s.io/v1/namespaces/{quote(e.namespace)}/disaggregatedsets/{quote(e.serving)}"
    )
    pool = c.get(
        f"/apis/inference.networking.k8s.io/v1/namespaces/{quote(e.namespace)}/inferencepools/{quote(e.serving)}"
    )
    found = ", ".join(
        f"{what} {'present' if obj is not None else 'absent'}"
        for what, obj in (("DisaggregatedSet", ds), ("InferencePool", pool))
    )
    return check(
        "serving-objects",
        ds is not None and pool is not None,
        found,
        f"DisaggregatedSet and InferencePool {e.namespace}/{e.serving}",
        f"pulumi up --stack {e.stack}",
    )


def pods_scheduled(e: Expectations, c: Cluster) -> Result:
    pods = c.items(f"/api/v1/namespaces/{quote(e.namespace)}/pods")
    pending = []
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                pending.append((pod, text(condition.get("message") or condition.get("reason") or "", 160)))
    found = f"{len(pods) - len(pending)} of {len(pods)} pods scheduled"
    if pending:
        found += f"; {_name(pending[0][0])}: {pending[0][1]}"
    return check(
        "pods-scheduled",
        bool(pods) and not pending,
        found,
        f"every pod of {e.namespace} scheduled",
        f"llmd-fleet status {e.stack} ({DOCS}#pending-pods)",
    )


def gateway_address(e: Expectations, c: Cluster) -> Result:
    if e.gateway is None:
        return skip("gateway-address", "the stack renders no Gateway")
    gateway = c.get(
        f"/apis/gateway.networking.k8s.io/v1/namespaces/{quote(e.namespace)}/gateways/{quote(e.gateway)}"
    )
    addresses = [
        text(a.get("value") or "", 60) for a in ((gateway or {}).get("status") or {}).get("addresses") or []
    ]
    found = (
        "no Gateway"
        if gateway is None
        else ("address " + ", ".join(addresses) if addresses else "no address")
    )
    return check(
        "gateway-address",
        bool(addresses),
        found,
        f"an address on Gateway {e.namespace}/{e.gateway}",
        f"{DOCS}#gateway-address",
    )


def quotas(e: Expectations) -> Result:
    return skip("quotas", f"not checkable: {e.kind} quotas are the cloud's, not the cluster's")


def run_checks(e: Expectations, read: Reader, deployed: bool) -> list[Result]:
    """Every check in check order; a 403 is that check's FAIL naming the permission."""
    c = Cluster(read)
    steps: list[tuple[str, Callable[[], Result]]] = [
        ("kubernetes-version", lambda: kubernetes_version(e, c)),
        ("dra-api", lambda: dra_api(e, c)),
        ("gpu-deviceclass", lambda: device_classes(e, c, deployed)),
        (
            "gpu-resourceslices",
            lambda: resource_slices(e, c, deployed, "gpu-resourceslices", GPU_DRIVER, "GPUs"),
        ),
        (
            "nic-resourceslices",
            lambda: resource_slices(e, c, deployed, "nic-resourceslices", NIC_DRIVER, "RDMA NICs"),
        ),
        ("pcie-root-attribute", lambda: match_attributes(e, c, deployed)),
        ("gpu-device-plugin", lambda: device_plugin(e, c)),
        ("lws-crds", lambda: lws_crds(e, c, deployed)),
        ("lws-controller", lambda: lws_controller(e, c, deployed)),
        ("gateway-crds", lambda: gateway_crds(e, c, deployed)),
        ("gatewayclass", lambda: gateway_class(e, c, deployed)),
        ("gateway-version", lambda: gateway_version(e, c, deployed)),
        ("node-capacity", lambda: nodes(e, c)),
        ("shm", lambda: shm(e, c)),
        ("secrets", lambda: secrets(e, c, deployed)),
        ("crd-owners", lambda: crd_owners(e, c)),
    ]
    if deployed:
        steps += [
            ("serving-objects", lambda: serving_objects(e, c)),
            ("pods-scheduled", lambda: pods_scheduled(e, c)),
            ("gateway-address", lambda: gateway_address(e, c)),
        ]
        if e.creates_cluster:
            steps.append(("quotas", lambda: quotas(e)))
    results = []
    for check_id, step in steps:
        try:
            results.append(step())
        except (AttributeError, TypeError, ValueError, KeyError):
            # An object of a shape no API server serves (a list where a mapping belongs): the
            # check cannot judge it, and says so rather than ending the command.
            results.append(
                fail(
                    check_id,
                    "an answer of an unexpected shape from the API server",
                    "objects as the Kubernetes API defines them",
                    f"{DOCS}#{check_id}",
                )
            )
        except Forbidden as exc:
            results.append(
                fail(
                    check_id,
                    f"HTTP 403 on {exc.permission}",
                    f"permission to {exc.permission}",
                    f"{DOCS}#permissions",
                )
            )
    return results


def summary(stack: str, results: list[Result]) -> str:
    failed = sum(1 for r in results if r.status == "FAIL")
    return f"doctor: {stack}: {len(results)} checks, {failed} failed"


def as_json(stack: str, deployed: bool, results: list[Result]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "stack": stack,
        "mode": "deployed" if deployed else "before-deploy",
        "checks": [r.as_json() for r in results],
        "total": len(results),
        "failed": sum(1 for r in results if r.status == "FAIL"),
    }


__all__ = [
    "ClusterError",
    "DoctorRefused",
    "Expectations",
    "Result",
    "as_json",
    "expectations",
    "run_checks",
    "summary",
]
