"""The policy pack: every serving role runs an engine the pack can read (vllm serve, or the simulator)."""

from llmd_fleet.cli.synth import synthesize
from llmd_fleet.policies.rules import _k8s
from tests.policies.helpers import (
    DSET,
    edited,
    one,
    pod_container,
    role_pod,
    violations,
)
from tests.support import STACKS_DIR


def test_every_serving_role_runs_an_engine_the_pack_reads(reference):
    assert violations("serving-engine-identified", reference) == []
    dset = one(reference, DSET)

    def other_engine(inputs):
        engine = pod_container(role_pod(inputs, "prefill"), _k8s.ENGINE_CONTAINER)
        engine["command"] = ["/bin/sh", "-c", "exec sglang serve"]

    assert violations("serving-engine-identified", edited(reference, dset, other_engine)) == [
        "DisaggregatedSet llm-d/glm52 role prefill: runs neither `vllm serve` nor llm-d's inference "
        "simulator (pod label app.kubernetes.io/name=llm-d-inference-sim); this pack's serving rules "
        "read vLLM command lines, so nothing about this role would be checked"
    ]


def test_the_simulator_stack_passes_and_a_simulator_with_gpus_does_not():
    simulated = list(synthesize(STACKS_DIR, "local-sim").resources)
    assert violations("serving-engine-identified", simulated) == []
    dset = one(simulated, DSET)

    def with_gpus(inputs):
        engine = pod_container(role_pod(inputs, "decode"), "simulator")
        engine["resources"]["limits"]["nvidia.com/gpu"] = "8"

    (message,) = violations("serving-engine-identified", edited(simulated, dset, with_gpus))
    assert message.startswith("DisaggregatedSet llm-d/glm52 role decode: runs llm-d's inference simulator")
    assert "8 device-plugin GPU(s)" in message

    def unlabelled(inputs):
        del role_pod(inputs, "prefill")["metadata"]["labels"]["app.kubernetes.io/name"]

    (message,) = violations("serving-engine-identified", edited(simulated, dset, unlabelled))
    assert "role prefill: runs neither `vllm serve`" in message
