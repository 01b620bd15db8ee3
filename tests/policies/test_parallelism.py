"""The policy pack: parallelism and P/D agreement."""

from collections.abc import Callable

import pulumi_kubernetes as k8s
import pytest

from llmd_fleet.cli.synth import synthesize
from llmd_fleet.policies.rules import _k8s
from tests.policies.helpers import (
    DSET,
    PINNED,
    edit_script,
    edited,
    one,
    pod_container,
    record,
    role_pod,
    violations,
)
from tests.support import REFERENCE_STACK, STACKS_DIR


@pytest.mark.usefixtures("decode_dp_48")
def test_parallelism_catches_dp_that_does_not_match_the_gpus():
    found = violations("parallelism-matches-gpus", list(synthesize(STACKS_DIR, REFERENCE_STACK).resources))
    assert any("role decode" in m and "DP 48" in m and "has 64 GPUs" in m for m in found), found


def test_parallelism_catches_a_pod_with_the_wrong_local_ranks(reference):
    broken = edited(
        reference,
        one(reference, DSET),
        edit_script("prefill", "--data-parallel-size-local 8", "--data-parallel-size-local 4"),
    )
    found = violations("parallelism-matches-gpus", broken)
    assert any("role prefill" in m and "4 local DP rank(s)" in m and "gets 8 GPUs" in m for m in found), found


def test_parallelism_checks_experts_against_ep(reference):
    assert violations("parallelism-matches-gpus", reference, {"expertCount": 256}) == []
    found = violations("parallelism-matches-gpus", reference, {"expertCount": 160})
    assert any("EP = TP x DP = 64" in m for m in found), found


def test_parallelism_counts_device_plugin_gpus_of_a_leaderworkerset():
    def lws(dp: int) -> Callable[[], None]:
        script = (
            "set -e\nexec vllm serve m \\\n  --tensor-parallel-size 2 \\\n"
            f"  --data-parallel-size {dp} \\\n  --data-parallel-size-local 4\n"
        )
        pod = {
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": PINNED,
                        "command": ["/bin/bash", "-c", script],
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ]
            }
        }

        def build() -> None:
            k8s.apiextensions.CustomResource(
                "lws",
                api_version="leaderworkerset.x-k8s.io/v1",
                kind="LeaderWorkerSet",
                metadata={"name": "lws", "namespace": "llm-d"},
                spec={"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": pod}},
            )

        return build

    assert violations("parallelism-matches-gpus", record(lws(8))) == []
    found = violations("parallelism-matches-gpus", record(lws(6)))
    assert found == [
        "LeaderWorkerSet llm-d/lws workers: TP 2 x DP 6 x PP 1 = 12 ranks, but one instance (2 pod(s)) has "
        "16 GPUs"
    ]


def test_pd_agreement_catches_block_size_and_kv_role(reference):
    assert violations("pd-kv-transfer-agreement", reference) == []
    broken = edited(
        reference, one(reference, DSET), edit_script("decode", "--block-size 64", "--block-size 128")
    )
    assert any(
        "--block-size differs: prefill 64, decode 128" in m
        for m in violations("pd-kv-transfer-agreement", broken)
    )
    broken = edited(
        reference,
        one(reference, DSET),
        edit_script("decode", '"kv_role":"kv_consumer"', '"kv_role":"kv_producer"'),
    )
    assert any(
        "decode's NixlConnector has kv_role 'kv_producer'" in m
        for m in violations("pd-kv-transfer-agreement", broken)
    )


def test_pd_agreement_catches_a_sidecar_on_another_transport(reference):
    def edit(inputs):
        sidecar = pod_container(role_pod(inputs, "decode"), _k8s.SIDECAR_CONTAINER)
        sidecar["args"] = [
            a if not a.startswith("--kv-connector=") else "--kv-connector=mooncake" for a in sidecar["args"]
        ]

    found = violations("pd-kv-transfer-agreement", edited(reference, one(reference, DSET), edit))
    assert any("--kv-connector=mooncake" in m for m in found), found
