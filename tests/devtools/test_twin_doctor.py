"""`make doctor-twin`'s own steps without a twin: what it breaks, how it reads doctor's lines, and
the LWS stand-ins made acceptable to an API server."""

from typing import Any

from devtools.twin import doctor as twin_doctor
from devtools.twin import install
from devtools.twin.kube import ApiError
from devtools.twin.nodes import twin_objects
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.platform.dra import PCIE_ROOT
from tests.support import STACKS_DIR


class FakeKube:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.deleted: list[tuple[str, str]] = []
        self.applied: list[dict[str, Any]] = []

    def delete(self, obj: dict[str, Any]) -> None:
        key = (obj["kind"], obj["metadata"]["name"])
        self.deleted.append(key)
        self.objects.pop(key, None)

    def read(self, obj: dict[str, Any]) -> Any:
        key = (obj["kind"], obj["metadata"]["name"])
        if key not in self.objects:
            raise ApiError(404, {"message": "not found"}, "GET")
        return self.objects[key]

    def apply(self, obj: dict[str, Any]) -> None:
        self.applied.append(obj)
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj

    def list(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _), o in self.objects.items() if k == kind]


def test_break_twin_removes_exactly_the_three_things() -> None:
    config = stack_config(read_stack_file(STACKS_DIR, twin_doctor.STACK))
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": twin_doctor.DS_CRD},
    }
    kube = FakeKube([*twin_objects(config.fleet.node_groups), crd])
    twin_doctor.break_twin(kube)
    assert kube.deleted == [
        ("DeviceClass", "gpu.nvidia.com"),
        ("CustomResourceDefinition", twin_doctor.DS_CRD),
    ]
    slices = kube.list("resource.k8s.io/v1", "ResourceSlice")
    gpu = [s for s in slices if s["spec"]["driver"] == "gpu.nvidia.com"]
    nic = [s for s in slices if s["spec"]["driver"] == "dra.net"]
    assert len(gpu) == len(nic) == 2
    assert all(PCIE_ROOT not in d["attributes"] for s in gpu for d in s["spec"]["devices"])
    assert all(PCIE_ROOT in d["attributes"] for s in nic for d in s["spec"]["devices"])
    assert [a["spec"]["driver"] for a in kube.applied] == ["gpu.nvidia.com", "gpu.nvidia.com"]


def test_failed_ids_read_doctor_lines() -> None:
    lines = [
        "doctor: kubernetes-version: ok: found v9.9.9; needs >= 9.9; fix: x",
        "doctor: gpu-deviceclass: FAIL: found missing gpu.nvidia.com; needs y; fix: z",
        "doctor: crd-owners: skip: the stack installs no chart",
        "doctor: lws-crds: FAIL: found missing disaggregatedsets; needs y; fix: z",
        "doctor: quickstart-h100: 16 checks, 2 failed",
    ]
    assert twin_doctor.failed_ids(lines) == ["gpu-deviceclass", "lws-crds"]


def test_lws_standins_are_complete_webhooks() -> None:
    for obj in install._applicable(install.lws_standins()):
        for hook in obj.get("webhooks") or []:
            assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
            assert hook["admissionReviewVersions"] == ["v1"]
