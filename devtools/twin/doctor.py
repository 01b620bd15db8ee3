"""`make doctor-twin` (python -m devtools.twin doctor [--shared]): `llmd-fleet doctor` on the
quickstart's twin as a real install leaves it (install.py's stand-ins: 0 failed), then broken (the
GPU DeviceClass, the DisaggregatedSet CRD and the PCIe-root attribute removed: exactly those 3
failed), then `llmd-fleet status` printing the scheduler's message for each Pending pod
(docs/twin.md "doctor on the twin").

The run checks the cluster before a deploy (`doctor`, not `doctor --deployed`); the quickstart
walk (devtools/twin/quickstart.py) applies the same stand-ins, runs the document's `doctor` before
`pulumi up` and its `doctor --deployed` after it, with the Gateway's address set as a controller
would.
"""

import copy
from pathlib import Path
from typing import Any

from devtools.twin.install import prepare

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
    from devtools.twin import manifests, pods
    from devtools.twin.kube import wait_for

    rendered = manifests.render(STACK, cluster_dir(root) / "doctor-rendered")
    needed = [o for o in rendered if o["kind"] in ("Namespace", "DeviceClass", "ResourceClaimTemplate")]
    for obj in needed:
        kube.apply(obj)
    ds = next(o for o in rendered if o["kind"] == "DisaggregatedSet")
    made = pods.lws_pods(ds)
    for pod in made:
        # The pool's labels only: the LWS controller's pod webhook admits a pod labelled as an LWS
        # group member only with the annotations the controller sets (its size, among others).
        labels = pod["metadata"]["labels"]
        for key in [k for k in labels if k.startswith("leaderworkerset.sigs.k8s.io/")]:
            del labels[key]
        kube.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)

    def unschedulable() -> bool:
        for pod in made:
            found = kube.read(pod)
            conditions = (found.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions):
                return False
        return True

    wait_for("the scheduler's verdict on every pod", unschedulable, timeout=PENDING_TIMEOUT_S)
    return len(made)


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
