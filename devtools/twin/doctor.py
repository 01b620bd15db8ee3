"""What `make doctor-twin` puts into the quickstart's twin: only what a real install of the
platform leaves behind, each stand-in listed (docs/twin.md "doctor on the twin").

- the twin's own nodes, ResourceSlices and the `gpu.nvidia.com` DeviceClass (devtools/twin/nodes.py);
- the vendored CRDs (schemas/crds/), as the charts and release manifests would install them;
- the LWS CRDs and webhooks: the real controller's when it runs (built from its source snapshot),
  else stand-ins with upstream's webhook names and rules (config/webhook/manifests.yaml at the
  pinned commit);
- the GatewayClass CRD of the pinned Gateway API release (schemas/crds vendors only the kinds the
  stacks render), the GatewayClass `agentgateway` and the gateway controller's Deployment at the
  pinned version (kwok marks its pods ready; nothing runs).

The run checks the cluster before a deploy (`doctor`, not `doctor --deployed`); the quickstart
walk (devtools/twin/quickstart.py) applies the same stand-ins, runs the document's `doctor` before
`pulumi up` and its `doctor --deployed` after it, with the Gateway's address set as a controller
would.

`prepared_objects` is also the cluster the offline doctor tests read (tests/cli/test_doctor.py),
so the twin and the tests check the same picture.
"""

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from devtools.twin.nodes import twin_objects
from llmd_fleet.config.stack import StackConfig
from llmd_fleet.versions import versions

GATEWAY_NAMESPACE = "agentgateway-system"
GATEWAY_CONTROLLER = "agentgateway.dev/agentgateway"
# The agentgateway controller image repository; the tag is the pinned chart version
# (images/versions.toml [charts.agentgateway]): doctor reads the version from the tag.
GATEWAY_IMAGE = "cr.agentgateway.dev/controller"

STANDINS = (
    "the GatewayClass CRD of the pinned Gateway API release (schemas/crds has rendered kinds only)",
    "GatewayClass agentgateway (the gateway chart's)",
    f"Deployment {GATEWAY_NAMESPACE}/agentgateway at the pinned version (kwok runs its pod)",
)
LWS_STANDINS = (
    "the LeaderWorkerSet CRD and the LWS webhooks (no LWS source snapshot: upstream's names and rules)",
)


@functools.cache
def _vendored_crds(root: Path) -> tuple[dict[str, Any], ...]:
    """The CRDs of schemas/crds (parsed once; callers get copies)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = []
    for path in sorted((root / "schemas" / "crds").rglob("*.yaml")):
        for document in yaml.load_all(path.read_bytes(), Loader=loader):
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                crds.append(document)
    return tuple(crds)


def lws_standins() -> list[dict[str, Any]]:
    """The LeaderWorkerSet CRD (its served version) and upstream's webhook configurations, by
    name and rules only (no service: nothing answers them)."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }

    def hook(name: str, group: str, resource: str) -> dict[str, Any]:
        return {
            "name": name,
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [resource],
                }
            ],
        }

    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [hook("mleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets")],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [
            hook("vleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets"),
            hook("vdisaggregatedset.kb.io", "disaggregatedset.x-k8s.io", "disaggregatedsets"),
        ],
    }
    return [crd, mutating, validating]


APPROVAL = "api-approved.kubernetes.io"


def _gateway_approval() -> str:
    from devtools.twin import cluster

    for crd in _vendored_crds(cluster.PROJECT_ROOT):
        if crd["spec"]["group"] == "gateway.networking.k8s.io":
            return str(crd["metadata"]["annotations"][APPROVAL])
    raise KeyError("no vendored Gateway API CRD carries the approval annotation")


def gatewayclass_crd() -> dict[str, Any]:
    """The GatewayClass CRD of the Gateway API release the stack pins (schemas/crds vendors only the
    kinds the stacks render): its name, served version and bundle annotation, no schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "gatewayclasses.gateway.networking.k8s.io",
            # The approval annotation of the Gateway API's protected group, as the vendored
            # Gateway CRD of the same release carries it.
            "annotations": {
                "gateway.networking.k8s.io/bundle-version": versions().manifest("gateway-api").version,
                APPROVAL: _gateway_approval(),
            },
        },
        "spec": {
            "group": "gateway.networking.k8s.io",
            "names": {"kind": "GatewayClass", "plural": "gatewayclasses", "singular": "gatewayclass"},
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def gateway_standins() -> list[dict[str, Any]]:
    """The GatewayClass and the controller Deployment an agentgateway install leaves."""
    version = versions().chart("agentgateway").version
    labels = {"app.kubernetes.io/name": "agentgateway"}
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "agentgateway"},
            "spec": {"controllerName": GATEWAY_CONTROLLER},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "agentgateway", "namespace": GATEWAY_NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "controller", "image": f"{GATEWAY_IMAGE}:{version}"}],
                        # kwok's fake nodes: the pod is scheduled there and marked ready.
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            },
        },
    ]


def prepared_objects(config: StackConfig, root: Path, lws_running: bool = False) -> list[dict[str, Any]]:
    """Everything doctor expects of a prepared cluster for `config`, fresh copies each call."""
    objects = [
        *twin_objects(config.fleet.node_groups),
        *_vendored_crds(root),
        *([] if lws_running else lws_standins()),
        gatewayclass_crd(),
        *gateway_standins(),
    ]
    return copy.deepcopy(objects)


# --- `make doctor-twin` (python -m devtools.twin doctor [--shared]).

STACK = "quickstart-h100"
BROKEN = ("gpu-deviceclass", "pcie-root-attribute", "lws-crds")
"""The checks the broken twin must fail, exactly, in check order."""
DS_CRD = "disaggregatedsets.disaggregatedset.x-k8s.io"
PENDING_TIMEOUT_S = 60.0


class DoctorTwinError(Exception):
    """A step of the proof did not come out as required (one line)."""


def _doctor(kubeconfig: Path, root: Path) -> tuple[int, list[str]]:
    """`llmd-fleet doctor STACK` as a user runs it, against the twin: exit code and lines."""
    import subprocess

    done = subprocess.run(
        [str(root / ".venv" / "bin" / "llmd-fleet"), "doctor", STACK, "--kubeconfig", str(kubeconfig)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode not in (0, 1) or done.stderr.strip():
        raise DoctorTwinError(f"doctor exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.returncode, done.stdout.splitlines()


def failed_ids(lines: list[str]) -> list[str]:
    """The ids of doctor's FAIL lines, in order."""
    return [line.split(":")[1].strip() for line in lines if ": FAIL: " in line]


def prepare(kube: Any, lws_running: bool) -> list[str]:
    """Apply the stand-ins a real install leaves (the twin made the rest); their descriptions."""
    from devtools.twin.engine import ensure_platform

    ensure_platform(kube)
    from devtools.twin.kube import wait_for

    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GATEWAY_NAMESPACE}})
    crd = gatewayclass_crd()
    kube.apply(crd)

    def established() -> bool:
        conditions = (kube.read(crd).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("the GatewayClass CRD Established", established, timeout=60)
    made = [*gateway_standins(), *([] if lws_running else _applicable(lws_standins()))]
    for obj in made:
        kube.apply(obj)
    return [*STANDINS, *([] if lws_running else LWS_STANDINS)]


def _applicable(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The LWS stand-ins as an API server takes them: each webhook needs a client config, and
    nothing answers it, so it is ignored on failure (the stand-in admits everything)."""
    for obj in objects:
        for hook in obj.get("webhooks") or []:
            hook.update(
                {
                    "clientConfig": {"url": "https://127.0.0.1:9/never"},
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 1,
                }
            )
    return objects


def break_twin(kube: Any) -> None:
    """Remove the GPU DeviceClass, the DisaggregatedSet CRD and the PCIe-root attribute of every
    GPU (the slices re-applied without it, by the field manager that made them)."""
    from devtools.twin import nodes
    from devtools.twin.kube import wait_for
    from llmd_fleet.platform.dra import PCIE_ROOT

    kube.delete(nodes.gpu_device_class())
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": DS_CRD},
    }
    kube.delete(crd)
    for item in kube.list("resource.k8s.io/v1", "ResourceSlice"):
        if item["spec"].get("driver") != nodes.GPU_DRIVER:
            continue
        stripped = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": item["metadata"]["name"]},
            "spec": copy.deepcopy(item["spec"]),
        }
        for device in stripped["spec"]["devices"]:
            device.get("attributes", {}).pop(PCIE_ROOT, None)
        kube.apply(stripped)

    def gone() -> bool:
        from devtools.twin.kube import ApiError

        try:
            kube.read(crd)
        except (ApiError, KeyError):
            return True
        return False

    wait_for("the DisaggregatedSet CRD deleted", gone, timeout=60)


def pending_pods(kube: Any, root: Path) -> int:
    """The stack's serving pods from its rendered DisaggregatedSet's templates (its API is gone, so
    the twin creates them, with the pool's labels), with the namespace, NIC DeviceClass and claim
    template `pulumi up` creates: the scheduler cannot allocate their claims. Waits until it has
    said so for each."""
    from devtools.twin import e2e
    from devtools.twin.kube import wait_for

    rendered = e2e.render(STACK, cluster_dir(root) / "doctor-rendered")
    needed = [o for o in rendered if o["kind"] in ("Namespace", "DeviceClass", "ResourceClaimTemplate")]
    for obj in needed:
        kube.apply(obj)
    ds = next(o for o in rendered if o["kind"] == "DisaggregatedSet")
    pods = e2e.lws_pods(ds)
    for pod in pods:
        # The pool's labels only: the LWS controller's pod webhook admits a pod labelled as an LWS
        # group member only with the annotations the controller sets (its size, among others).
        labels = pod["metadata"]["labels"]
        for key in [k for k in labels if k.startswith("leaderworkerset.sigs.k8s.io/")]:
            del labels[key]
        kube.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)

    def unschedulable() -> bool:
        for pod in pods:
            found = kube.read(pod)
            conditions = (found.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions):
                return False
        return True

    wait_for("the scheduler's verdict on every pod", unschedulable, timeout=PENDING_TIMEOUT_S)
    return len(pods)


def cluster_dir(root: Path) -> Path:
    from devtools.twin import cluster

    return cluster.twin_dir(root)


def _status(kubeconfig: Path, root: Path) -> list[str]:
    import subprocess

    done = subprocess.run(
        [str(root / ".venv" / "bin" / "llmd-fleet"), "status", STACK, "--kubeconfig", str(kubeconfig)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 1:
        raise DoctorTwinError(f"status exited {done.returncode} (1: not ready): {done.stderr.strip()[-300:]}")
    return done.stdout.splitlines()


def run(shared: bool, root: Path) -> int:
    """Prepare (or share) the quickstart's twin, doctor must pass; break it, doctor must fail
    exactly BROKEN; status must print the scheduler's message for the Pending pods."""
    import time

    from devtools.twin import cluster, lws
    from devtools.twin.kube import ApiError
    from devtools.twin.quickstart import Quiet, prepare_twin

    started = time.monotonic()
    if shared and not cluster.state_path(root).is_file():
        # The walk kept no twin (it did not run: no language host snapshot, or it failed): the run
        # starts its own, as when run alone, rather than leave doctor unproven.
        print("doctor-twin: --shared: the quickstart walk kept no twin; starting its own")
        shared = False
    if not shared:
        # Its own twin is the quickstart's, whose stand-ins need the LWS controller's source for
        # the CRDs they patch; without the snapshot the run says so, as the other twin steps do.
        try:
            lws.lws_source(lws.pinned_commit())
        except lws.SourceMissing as exc:
            print(f"doctor-twin: not run: {exc}")
            return 0
    if shared:
        state = cluster.load_state(root)
        kube = cluster.client(root, state)
        lws_running = lws.COMPONENT in state.pids
        print(
            f"doctor-twin: sharing the twin the quickstart walk left ({len(kube.list('v1', 'Node'))} nodes)"
        )
    else:
        report = Quiet()
        kube, controller = prepare_twin(report)
        lws_running = controller is not None
    kubeconfig = cluster.twin_dir(root) / "kubeconfig"
    try:
        for standin in prepare(kube, lws_running):
            print(f"doctor-twin: stand-in: {standin}")
        code, lines = _doctor(kubeconfig, root)
        for line in lines:
            print(line)
        if code != 0 or failed_ids(lines):
            raise DoctorTwinError(
                f"doctor on the prepared twin failed {', '.join(failed_ids(lines))} (exit {code})"
            )
        break_twin(kube)
        code, lines = _doctor(kubeconfig, root)
        for line in lines:
            print(f"  {line}")
        failed = failed_ids(lines)
        total = lines[-1].split(": ")[-1].split(" checks")[0] if lines else "?"
        print(f"doctor (broken): {STACK}: {total} checks, {len(failed)} failed: {', '.join(failed)}")
        if tuple(failed) != BROKEN or code != 1:
            raise DoctorTwinError(
                f"the broken twin must fail exactly {', '.join(BROKEN)} (exit 1); got exit {code}"
            )
        count = pending_pods(kube, root)
        why = [line for line in _status(kubeconfig, root) if line.startswith("why ")]
        for line in why:
            print(f"status: {line}")
        scheduler = [line for line in why if ": Pending, Unschedulable: " in line]
        if len(scheduler) != count:
            raise DoctorTwinError(
                f"status printed the scheduler's message for {len(scheduler)} of {count} Pending pods"
            )
    except (DoctorTwinError, ApiError, KeyError, TimeoutError) as error:
        print(f"doctor-twin: FAIL: {error}")
        return 1
    finally:
        cluster.down(root)
    print(f"doctor-twin: passed ({time.monotonic() - started:.0f} s)")
    return 0


def main(argv: list[str]) -> int:
    from devtools.twin import cluster

    return run("--shared" in argv, cluster.PROJECT_ROOT)
