"""The policy pack: gPUs, NICs, budget."""

import copy
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, cast

import pulumi_kubernetes as k8s
import pytest

from llmd_fleet.cli.synth import synthesize
from llmd_fleet.policies.rules import _k8s
from tests.policies.helpers import (
    DSET,
    PINNED,
    deployment,
    edited,
    one,
    p5_node_group,
    pod_container,
    record,
    role_pod,
    stack_dir,
    violations,
    without,
)
from tests.support import REFERENCE_STACK

# The cloud SDKs are loaded at run time: they are large enough that type-checking them would
# dominate `make test`, and these tests only register their resources under mocks.
aws: Any = importlib.import_module("pulumi_aws")
gcp: Any = importlib.import_module("pulumi_gcp")


def test_single_gpu_mechanism(reference):
    assert violations("gpu-allocation-single-mechanism", reference) == []

    def both(inputs):
        engine = pod_container(role_pod(inputs, "decode"), _k8s.ENGINE_CONTAINER)
        engine["resources"]["limits"]["nvidia.com/gpu"] = "8"

    found = violations("gpu-allocation-single-mechanism", edited(reference, one(reference, DSET), both))
    assert any(
        "role decode: takes 8 GPU(s) from the device plugin" in m and "accelerators" in m for m in found
    ), found

    operator = one(reference, "helm.sh/v3:Release", "gpu-operator")
    found = violations(
        "gpu-allocation-single-mechanism",
        edited(reference, operator, lambda i: i["values"]["devicePlugin"].update(enabled=True)),
    )
    assert any("installs the NVIDIA DRA driver" in m and "gpu-operator" in m for m in found), found


def test_nic_alignment_passes_pairs_and_catches_one_root_for_all():
    def template(devices: dict[str, Any]) -> Callable[[], None]:
        def build() -> None:
            k8s.resource.v1.DeviceClass(
                "nic-class",
                metadata={"name": "rdma-nic.example"},
                spec={"selectors": [{"cel": {"expression": 'device.driver == "dra.net"'}}]},
            )
            k8s.resource.v1.ResourceClaimTemplate(
                "claim",
                metadata={"name": "claim", "namespace": "llm-d"},
                spec=cast(Any, {"spec": {"devices": devices}}),
            )

        return build

    paired: dict[str, Any] = {
        "requests": [
            r
            for i in range(8)
            for r in (
                {"name": f"gpu-{i}", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}},
                {"name": f"nic-{i}", "exactly": {"deviceClassName": "rdma-nic.example", "count": 1}},
            )
        ],
        "constraints": [
            {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
            for i in range(8)
        ],
    }
    assert violations("dra-nic-gpu-alignment", record(template(paired))) == []
    one_root = {
        "requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}},
            {"name": "nics", "exactly": {"deviceClassName": "rdma-nic.example", "count": 8}},
        ],
        "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }
    found = violations("dra-nic-gpu-alignment", record(template(one_root)))
    assert found == [
        "ResourceClaimTemplate llm-d/claim: one resource.kubernetes.io/pcieRoot constraint binds 8 GPUs "
        "(gpus) but a node has 1 GPU(s) per PCIe root, so the claim can never be allocated; pair each GPU "
        "with its NIC(s) in its own constraint"
    ]
    unpaired = {**paired, "constraints": cast(list[Any], paired["constraints"])[:7]}
    assert violations("dra-nic-gpu-alignment", record(template(unpaired))) == [
        "ResourceClaimTemplate llm-d/claim: NIC request nic-7 shares no resource.kubernetes.io/pcieRoot "
        "constraint with a GPU request, so the scheduler may hand the pod a NIC on another PCIe root than "
        "its GPU"
    ]


def test_nic_alignment_flags_the_whole_node_topology_of_a_real_stack(tmp_path):
    def edit(config):
        config["llmd-fleet:fleet"]["nodeGroups"]["h100"]["nicTopology"] = "whole-node"

    found = violations(
        "dra-nic-gpu-alignment", list(synthesize(stack_dir(tmp_path, edit), REFERENCE_STACK).resources)
    )
    assert any("NIC request nics shares no resource.kubernetes.io/pcieRoot constraint" in m for m in found), (
        found
    )


def test_gpu_pods_tolerate_the_gpu_taint():
    gpu = {"name": "c", "image": PINNED, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    tolerated = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert (
        violations("gpu-pods-tolerate-gpu-taint", record(deployment("ok", [gpu], pod_spec=tolerated))) == []
    )
    assert violations("gpu-pods-tolerate-gpu-taint", record(deployment("bad", [gpu]))) == [
        "Deployment llm-d/bad: requests GPUs but does not tolerate the nvidia.com/gpu taint"
    ]


def test_gpu_budget_on_workloads(reference):
    assert violations("gpu-budget", reference, {"maxGpus": 544}) == []
    assert violations("gpu-budget", reference) == []  # no budget configured
    (message,) = violations("gpu-budget", reference, {"maxGpus": 512})
    assert message.startswith("workloads request 544 GPUs, over the stack's budget of 512")
    assert "DisaggregatedSet llm-d/glm52: 544 (prefill 28 pods x 8, decode 40 pods x 8)" in message


def test_gpu_budget_counts_the_preflight_before_serving_not_beside_it(reference):
    job = one(reference, ":Job", "glm52-preflight")
    # The reference's 544 GPUs are all serving's: the preflight's 16 run before it, on their own.
    assert violations("gpu-budget", reference, {"maxGpus": 544}) == []
    found = violations("gpu-budget", reference, {"maxGpus": 8})
    assert (
        "Job llm-d/glm52-preflight requests 16 GPUs before DisaggregatedSet glm52 starts, over the stack's "
        "budget of 8"
    ) in found

    # Without the runs-before claim (gateServing false) the Job runs beside the full fleet.
    def ungated(inputs: dict[str, Any]) -> None:
        del inputs["metadata"]["annotations"]["llmd-fleet.io/runs-before"]

    (message,) = violations("gpu-budget", edited(reference, job, ungated), {"maxGpus": 544})
    assert message.startswith("workloads request 560 GPUs, over the stack's budget of 544")
    assert "Job llm-d/glm52-preflight: 16 (spec.template 2 pods x 8)" in message

    # A claim to run before a workload the stack does not have counts for nothing.
    def elsewhere(inputs: dict[str, Any]) -> None:
        inputs["metadata"]["annotations"]["llmd-fleet.io/runs-before"] = "DisaggregatedSet/other"

    assert violations("gpu-budget", edited(reference, job, elsewhere), {"maxGpus": 544})


def test_preflight_job_passes_as_rendered(reference):
    assert violations("preflight-job", reference) == []
    # Not applicable to a stack without one.
    assert violations("preflight-job", without(reference, ":Job")) == []


def test_preflight_job_must_request_the_serving_claim_shape(reference):
    job = one(reference, ":Job", "glm52-preflight")

    def gpus_only(inputs: dict[str, Any]) -> None:
        inputs["spec"]["template"]["spec"]["resourceClaims"] = [
            {"name": "accelerators", "resourceClaimTemplateName": "gpus-only"}
        ]

    template = one(reference, ":ResourceClaimTemplate")
    narrower = copy.deepcopy(template.inputs)
    narrower["metadata"]["name"] = "gpus-only"
    narrower["spec"]["spec"]["devices"] = {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}}]
    }
    resources = [
        *edited(reference, job, gpus_only),
        dataclasses.replace(template, name="gpus-only", inputs=narrower),
    ]
    found = violations("preflight-job", resources)
    assert len(found) == 2  # once per serving role
    assert found[0] == (
        "Job llm-d/glm52-preflight: its pods request 8 x gpu.nvidia.com, DisaggregatedSet llm-d/glm52 role "
        "prefill requests 8 x gpu.nvidia.com, 8 x rdma-nic.llmd-fleet.io; the preflight must test the "
        "devices the serving pods get"
    )

    def no_claim_for_the_probe(inputs: dict[str, Any]) -> None:
        inputs["spec"]["template"]["spec"]["containers"][0]["resources"].pop("claims")

    (message,) = violations("preflight-job", edited(reference, job, no_claim_for_the_probe))
    assert message.startswith("Job llm-d/glm52-preflight: pod claims accelerators are given to no container")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: s.pop("activeDeadlineSeconds"), "activeDeadlineSeconds is unset; a preflight must end"),
        (
            lambda s: s.update(activeDeadlineSeconds=86400),
            "activeDeadlineSeconds is 86400; a preflight must end",
        ),
        (lambda s: s.pop("backoffLimit"), "backoffLimit is unset (Kubernetes retries 6 times); at most 3"),
        (lambda s: s.update(backoffLimit=10), "backoffLimit is 10; at most 3"),
    ],
)
def test_preflight_job_is_bounded(reference, edit, expected):
    job = one(reference, ":Job", "glm52-preflight")
    (message,) = violations("preflight-job", edited(reference, job, lambda inputs: edit(inputs["spec"])))
    assert message.startswith(f"Job llm-d/glm52-preflight: {expected}")


def _decode_rollout(max_surge: Any, max_unavailable: Any) -> Callable[[dict[str, Any]], None]:
    def edit(inputs: dict[str, Any]) -> None:
        for role in inputs["spec"]["roles"]:
            if role["name"] == "decode":
                role["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {
                    "maxSurge": max_surge,
                    "maxUnavailable": max_unavailable,
                }

    return edit


def test_gpu_budget_counts_the_surge_of_a_rolling_update(reference):
    dset = one(reference, DSET)
    # The plan replaces decode in place on a full fleet: no surge, within budget.
    assert violations("gpu-budget", reference, {"maxGpus": 544}) == []
    surging = edited(reference, dset, _decode_rollout(1, 0))
    (message,) = violations("gpu-budget", surging, {"maxGpus": 544})
    assert message == (
        "DisaggregatedSet llm-d/glm52 role decode: a rolling update surges 8 pods x 8 GPUs on top of "
        "the 544 GPUs in use, up to 608, over the stack's budget of 544; with maxUnavailable 0 the "
        "rollout waits for pods that cannot be placed and stalls. Set maxSurge 0 and maxUnavailable "
        "1, or budget (and provision) the spare capacity"
    )
    # With a whole spare decode instance in the budget the same surge passes.
    assert violations("gpu-budget", surging, {"maxGpus": 608}) == []
    # A percentage surges ceil(20% of 5) = 1 instance; with maxUnavailable 1 it no longer stalls.
    percent = edited(reference, dset, _decode_rollout("20%", 1))
    (message,) = violations("gpu-budget", percent, {"maxGpus": 544})
    assert "surges 8 pods x 8 GPUs" in message and "stay pending until old ones are gone" in message


def test_gpu_budget_on_cloud_node_pools():
    def pools(nodes: int) -> Callable[[], None]:
        def build() -> None:
            gcp.container.NodePool(
                "a3",
                cluster="c",
                node_count=nodes,
                node_config=gcp.container.NodePoolNodeConfigArgs(machine_type="a3-megagpu-8g"),
            )
            p5_node_group(nodes=4)

        return build

    assert violations("gpu-budget", record(pools(64)), {"maxGpus": 544}) == []
    (message,) = violations("gpu-budget", record(pools(68)), {"maxGpus": 544})
    assert (
        "node pools provision up to 576 GPUs" in message
        and "gcp:container/nodePool:NodePool a3: 68 nodes x 8 GPUs" in message
    )
