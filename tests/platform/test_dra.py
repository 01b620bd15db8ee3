"""DRA claims: per-GPU PCIe-root pairing for each fabric shape, whole-node fallback, pod wiring."""

from pathlib import Path

import pulumi
import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.cli.synth import RecordingMocks, clean
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.serving.component import ModelServing
from llmd_fleet.layers.serving.pod import serving_pod_template
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.platform.accelerators import AcceleratorPlatform
from llmd_fleet.platform.dra import (
    DRANET_RDMA_CLASS,
    DRANET_RDMA_SELECTOR,
    GPU_DEVICE_CLASS,
    PCIE_ROOT,
    ClaimShape,
    claim_template_spec,
)
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import ENGINE_IMAGE, REFERENCE_STACK, start_mock_engine, vllm_stacks


def _pairs(spec):
    requests = {r["name"]: r["exactly"] for r in spec["devices"]["requests"]}
    return requests, spec["devices"].get("constraints", [])


@pytest.mark.parametrize(
    ("nics", "nic_class", "per_gpu"),
    [(8, DRANET_RDMA_CLASS, 1), (32, "efa.networking.k8s.aws", 4)],
    ids=["hgx-h100-1-cx7-per-gpu", "p5-4-efa-per-gpu"],
)
def test_each_gpu_is_paired_with_its_own_nics(nics, nic_class, per_gpu):
    spec = claim_template_spec(
        ClaimShape(gpus=8, nics=nics, nic_device_class=nic_class, topology="pcie-root-per-gpu")
    )
    requests, constraints = _pairs(spec)
    assert len(constraints) == 8
    for i, constraint in enumerate(constraints):
        # One constraint per GPU/NIC pair, never one across all devices.
        assert constraint == {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT}
        assert requests[f"gpu-{i}"] == {"deviceClassName": GPU_DEVICE_CLASS, "count": 1}
        assert requests[f"nic-{i}"] == {"deviceClassName": nic_class, "count": per_gpu}
    assert sum(r["count"] for r in requests.values() if r["deviceClassName"] == nic_class) == nics


def test_whole_node_fallback_claims_everything_without_constraints():
    spec = claim_template_spec(
        ClaimShape(gpus=8, nics=8, nic_device_class=DRANET_RDMA_CLASS, topology="whole-node")
    )
    requests, constraints = _pairs(spec)
    assert constraints == []
    assert requests == {
        "gpus": {"deviceClassName": GPU_DEVICE_CLASS, "count": 8},
        "nics": {"deviceClassName": DRANET_RDMA_CLASS, "allocationMode": "All"},
    }


def test_gpu_only_claim_when_nics_come_another_way():
    spec = claim_template_spec(
        ClaimShape(gpus=8, nics=8, nic_device_class=None, topology="pcie-root-per-gpu")
    )
    assert spec == {
        "devices": {
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": 8}}]
        }
    }


def test_uneven_nics_cannot_be_paired(raw_config):
    raw_config["fleet"]["nodeGroups"]["h100"]["nicsPerNode"] = 12
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert "whole-node" in dict(caught.value.problems)["llmd-fleet:fleet.nodeGroups.h100.nicsPerNode"]


def test_dra_and_rdma_device_plugin_are_exclusive(raw_config):
    raw_config["fleet"]["nodeGroups"]["h100"]["rdmaResource"] = "rdma/ib"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert (
        "one allocation mechanism"
        in dict(caught.value.problems)["llmd-fleet:fleet.nodeGroups.h100.rdmaResource"]
    )


def _engine(template):
    return template["spec"]["containers"][0]


@pytest.mark.parametrize("allocation", ["dra", "device-plugin"])
def test_exactly_one_gpu_mechanism_per_pod(raw_config, allocation):
    from llmd_fleet.layers.serving.pod import PodInputs

    group = raw_config["fleet"]["nodeGroups"]["h100"]
    group["acceleratorAllocation"] = allocation
    if allocation == "device-plugin":
        group["rdmaResource"] = "rdma/ib"
    config = parse_config(raw_config)
    for role in plan_fleet(config).roles:
        template = serving_pod_template(config, role, PodInputs("glm52", {}, None, ENGINE_IMAGE))
        resources = _engine(template)["resources"]
        has_claims = bool(template["spec"].get("resourceClaims")) and bool(resources.get("claims"))
        has_plugin = "nvidia.com/gpu" in resources["limits"] or "rdma/ib" in resources["limits"]
        assert has_claims != has_plugin
        assert has_claims == (allocation == "dra")


def _objects(root: Path):
    for path in sorted((root / "manifests").rglob("*.yaml")):
        yield yaml.safe_load(path.read_text())


def _pod_templates(obj):
    if obj["kind"] == "DisaggregatedSet":
        for role in obj["spec"]["roles"]:
            yield role["spec"]["leaderWorkerTemplate"]["workerTemplate"]


@pytest.mark.parametrize("stack", vllm_stacks())
def test_every_claim_a_pod_names_exists(stack, tmp_path):
    assert run(["render", stack, "--out", str(tmp_path)]) == 0
    objects = list(_objects(tmp_path))
    templates = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "ResourceClaimTemplate"
    }
    classes = {o["metadata"]["name"] for o in objects if o["kind"] == "DeviceClass"}
    claimed = 0
    for obj in objects:
        for pod in _pod_templates(obj):
            names = {c["name"] for c in pod["spec"].get("resourceClaims", [])}
            for claim in pod["spec"].get("resourceClaims", []):
                assert (obj["metadata"]["namespace"], claim["resourceClaimTemplateName"]) in templates
                claimed += 1
            for container in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
                for claim in container.get("resources", {}).get("claims", []):
                    assert claim["name"] in names
                if container["resources"].get("claims"):
                    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    assert claimed > 0
    # The NIC DeviceClass the claims use is one the stack creates (or a driver ships).
    if stack == REFERENCE_STACK:
        assert DRANET_RDMA_CLASS in classes


@pulumi.runtime.test
def test_platform_installs_drivers_with_device_plugin_off():
    mocks = start_mock_engine(RecordingMocks())
    platform = AcceleratorPlatform(
        "accelerators",
        {
            "driver_root": "/run/nvidia/driver",
            "dra_driver_chart": versions().chart("dra-driver-nvidia-gpu"),
            "gpu_operator": (versions().chart("gpu-operator"), True),
            "nic_driver": ("dranet", versions().chart("dranet"), "kube-system"),
            "nic_device_class": (DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR),
        },
    )

    def check(_):
        releases = {
            clean(r.inputs)["name"]: clean(r.inputs)
            for r in mocks.created
            if r.type == "kubernetes:helm.sh/v3:Release"
        }
        assert releases["gpu-operator"]["values"]["devicePlugin"] == {"enabled": False}
        assert releases["gpu-operator"]["values"]["driver"]["enabled"] is True
        dra = releases["dra-driver-nvidia-gpu"]["values"]
        assert dra["nvidiaDriverRoot"] == "/run/nvidia/driver"
        assert dra["resources"]["computeDomains"] == {"enabled": False}
        assert dra["gpuResourcesEnabledOverride"] is True
        assert releases["dranet"]["version"] == versions().chart("dranet").version
        (device_class,) = [
            clean(r.inputs) for r in mocks.created if r.type == "kubernetes:resource.k8s.io/v1:DeviceClass"
        ]
        assert device_class["metadata"]["name"] == DRANET_RDMA_CLASS
        assert "dra.net" in device_class["spec"]["selectors"][0]["cel"]["expression"]

    return pulumi.Output.all(*[r.urn for r in platform.releases]).apply(check)


@pulumi.runtime.test
def test_serving_shares_one_claim_template_per_node_group(raw_config):
    mocks = start_mock_engine(RecordingMocks())
    config = parse_config(raw_config)
    serving = ModelServing(
        "glm52",
        {"config": config, "plan": plan_fleet(config), "hf_token": None, "engine_image": ENGINE_IMAGE},
    )

    def check(_):
        names = [
            clean(r.inputs)["metadata"]["name"]
            for r in mocks.created
            if r.type.endswith(":ResourceClaimTemplate")
        ]
        assert names == ["h100-8gpu-8nic-pcie"]

    return serving.disaggregated_set.urn.apply(check)


def test_nic_driver_tolerates_the_gpu_taint_where_its_chart_does_not():
    from llmd_fleet.platform.accelerators import nic_driver_values

    # The aws-dranet chart tolerates only CriticalAddonsOnly by default; GPU nodes are tainted.
    assert nic_driver_values("aws-dranet")["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    # Upstream DRANET's DaemonSet already tolerates every NoSchedule taint: no values needed.
    assert nic_driver_values("dranet") == {}
