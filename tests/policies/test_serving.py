"""The policy pack: serving pods."""

import re

from tests.policies.helpers import (
    DSET,
    edit_script,
    edited,
    one,
    pod_container,
    role_pod,
    violations,
)


def test_shm_must_be_memory_backed(reference):
    assert violations("serving-shm-memory-backed", reference) == []

    def disk(inputs):
        for volume in role_pod(inputs, "prefill")["spec"]["volumes"]:
            volume.get("emptyDir", {}).pop("medium", None)

    found = violations("serving-shm-memory-backed", edited(reference, one(reference, DSET), disk))
    assert found == [
        "DisaggregatedSet llm-d/glm52 role prefill: container vllm has no memory-backed /dev/shm; the "
        "runtime's 64 MiB default breaks NCCL, DeepEP and torch IPC"
    ]


def test_startup_probe_outlasts_the_model_load(reference):
    assert violations("startup-probe-budget", reference) == []

    def short(inputs):
        pod_container(role_pod(inputs, "decode"), "vllm")["startupProbe"]["failureThreshold"] = 60

    found = violations("startup-probe-budget", edited(reference, one(reference, DSET), short))
    assert found == [
        "DisaggregatedSet llm-d/glm52 role decode: the startup probe gives up after 600 s (0 + 10 x 60) but "
        "VLLM_ENGINE_READY_TIMEOUT_S is 2700 s; the kubelet restarts the pod before the weights are loaded"
    ]


def test_the_grace_period_outlasts_the_drain(reference):
    assert violations("drain-fits-grace-period", reference) == []
    dset = one(reference, DSET)
    script = pod_container(role_pod(dset.inputs, "decode"), "vllm")["command"][2]
    found = re.search(r"--shutdown-timeout (\d+)", script)
    assert found, "the engines drain on SIGTERM"
    drain = int(found.group(1))
    assert drain > 0

    def short(inputs):
        role_pod(inputs, "decode")["spec"]["terminationGracePeriodSeconds"] = drain

    assert violations("drain-fits-grace-period", edited(reference, dset, short)) == [
        f"DisaggregatedSet llm-d/glm52 role decode: terminationGracePeriodSeconds is {drain} but vLLM "
        f"drains in-flight requests for up to {drain} s (--shutdown-timeout) and needs 30 s more to "
        "free the GPUs; the kubelet kills the pod mid-drain and its requests fail"
    ]

    def unset(inputs):
        del role_pod(inputs, "prefill")["spec"]["terminationGracePeriodSeconds"]

    (message,) = violations("drain-fits-grace-period", edited(reference, dset, unset))
    assert message.startswith(
        "DisaggregatedSet llm-d/glm52 role prefill: terminationGracePeriodSeconds is 30 "
    )
    # Without a drain (vLLM aborts at once) the default grace is enough.
    no_drain = edited(
        reference, dset, edit_script("decode", f"--shutdown-timeout {drain}", "--shutdown-timeout 0")
    )
    no_drain = edited(no_drain, one(no_drain, DSET), short)
    assert violations("drain-fits-grace-period", no_drain) == []


def test_memory_limit_covers_the_cpu_kv_tier(reference):
    """The reference stack pins a CPU KV tier per engine (OffloadingConnector inside a
    MultiConnector); a tier the pod's memory limit cannot hold is caught."""
    engine = pod_container(role_pod(one(reference, DSET).inputs, "prefill"), "vllm")
    assert '"kv_connector":"OffloadingConnector"' in engine["command"][2]
    assert violations("kv-tier-memory-limit", reference) == []

    def grow(inputs):
        engine = pod_container(role_pod(inputs, "prefill"), "vllm")
        engine["command"][2] = re.sub(
            r'"cpu_bytes_to_use":\d+', f'"cpu_bytes_to_use":{400 * 2**30}', engine["command"][2]
        )

    found = violations("kv-tier-memory-limit", edited(reference, one(reference, DSET), grow))
    shm, limit = found
    # The OffloadingConnector maps its tier under /dev/shm, so both the volume and the limit fall short.
    assert shm.startswith("DisaggregatedSet llm-d/glm52 role prefill: /dev/shm (")
    assert "smaller than the CPU KV tier vLLM maps there (8 x 400 GiB)" in shm
    assert limit.startswith("DisaggregatedSet llm-d/glm52 role prefill: memory limit")
    assert "CPU KV tier 8 x 400 GiB (OffloadingConnector cpu_bytes_to_use)" in limit


def test_startup_probe_budget_counts_a_fractional_configured_load_in_whole_seconds(reference):
    """Without VLLM_ENGINE_READY_TIMEOUT_S the policy holds the probe to its configured
    `modelLoadMinutes`, which may be fractional: 10.5 min = 630 s is more than the 600 s probe."""

    def short(inputs):
        container = pod_container(role_pod(inputs, "decode"), "vllm")
        container["startupProbe"]["failureThreshold"] = 60
        container["env"] = [e for e in container["env"] if e["name"] != "VLLM_ENGINE_READY_TIMEOUT_S"]

    probe_short = edited(reference, one(reference, DSET), short)
    assert violations("startup-probe-budget", probe_short, {"modelLoadMinutes": 10}) == []
    assert violations("startup-probe-budget", probe_short, {"modelLoadMinutes": 10.5}) == [
        "DisaggregatedSet llm-d/glm52 role decode: the startup probe gives up after 600 s (0 + 10 x 60) but "
        "the configured model load time is 630 s; the kubelet restarts the pod before the weights are loaded"
    ]
