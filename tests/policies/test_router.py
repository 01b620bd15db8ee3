"""The policy pack: router."""

from collections.abc import Callable
from typing import Any

import pulumi_kubernetes as k8s

from tests.policies.helpers import (
    DSET,
    edit_script,
    edited,
    one,
    record,
    violations,
    without,
)


def test_router_replicas(reference):
    assert violations("router-replicas", reference) == []
    epp = one(reference, "apps/v1:Deployment", "router-deployment")
    assert violations("router-replicas", edited(reference, epp, lambda i: i["spec"].update(replicas=1))) == [
        "Deployment llm-d/glm52-epp runs 1 replica(s) of the endpoint picker; at least 2 keep routing alive "
        "through a node loss or rollout"
    ]


def test_router_pdb(reference):
    assert violations("router-pdb", reference) == []
    assert violations("router-pdb", without(reference, ":PodDisruptionBudget")) == [
        "Deployment llm-d/glm52-epp: no PodDisruptionBudget selects the endpoint-picker pods"
    ]
    pdb = one(reference, ":PodDisruptionBudget", "router-pdb")
    found = violations("router-pdb", edited(reference, pdb, lambda i: i["spec"].update(minAvailable=0)))
    assert found == [
        "Deployment llm-d/glm52-epp: PodDisruptionBudget llm-d/glm52-epp lets a drain evict all 2 "
        "endpoint-picker pods"
    ]


def _epp_args(edit: Callable[[list[str]], list[str]]) -> Callable[[dict[str, Any]], None]:
    def apply(inputs):
        epp = inputs["spec"]["template"]["spec"]["containers"][0]
        epp["args"] = edit(epp["args"])

    return apply


def test_router_leader_election(reference):
    assert violations("router-leader-election", reference) == []
    epp = one(reference, "apps/v1:Deployment", "router-deployment")
    active_active = edited(
        reference, epp, _epp_args(lambda a: [x for x in a if x != "--ha-enable-leader-election"])
    )
    # Precise prefix routing keeps active-active replicas consistent ...
    assert violations("router-leader-election", active_active) == []

    # ... an approximate prefix scorer does not.
    def approximate(inputs):
        inputs["data"]["epp.yaml"] = inputs["data"]["epp.yaml"].replace(
            "prefixMatchInfoProducerName: precise-prefix-cache-producer",
            "prefixMatchInfoProducerName: approx-prefix-cache-producer",
        )

    broken = edited(active_active, one(active_active, ":ConfigMap", "router-config"), approximate)
    assert violations("router-leader-election", broken) == [
        "Deployment llm-d/glm52-epp: 2 replicas run active-active without --ha-enable-leader-election, but "
        "the config routes on an approximate per-replica prefix index"
    ]


def test_inference_pool_fails_open(reference):
    assert violations("inference-pool-fail-open", reference) == []

    def build() -> None:
        k8s.apiextensions.CustomResource(
            "pool",
            api_version="inference.networking.k8s.io/v1",
            kind="InferencePool",
            metadata={"name": "pool", "namespace": "llm-d"},
            spec={
                "targetPorts": [{"number": 8000}],
                "selector": {"matchLabels": {"app": "vllm"}},
                "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
            },
        )

    assert violations("inference-pool-fail-open", record(build)) == [
        "InferencePool llm-d/pool: endpointPickerRef.failureMode is FailClose; the gateway stops serving "
        "whenever the endpoint picker fails over"
    ]


def test_router_serving_agreement_on_rank_ports(reference):
    assert violations("router-serving-agreement", reference) == []
    pool = one(reference, ":InferencePool")
    found = violations(
        "router-serving-agreement",
        edited(reference, pool, lambda i: i["spec"].update(targetPorts=[{"number": 8000}])),
    )
    assert any(
        "targetPorts 8000 but DisaggregatedSet llm-d/glm52 role decode" in m and "8000-8007 (8 ports)" in m
        for m in found
    ), found


def test_router_serving_agreement_on_kv_events(reference):
    configmap = one(reference, ":ConfigMap", "router-config")
    found = violations(
        "router-serving-agreement",
        edited(
            reference,
            configmap,
            lambda i: i["data"].update(
                {"epp.yaml": i["data"]["epp.yaml"].replace("socketPort: 5557", "socketPort: 5556")}
            ),
        ),
    )
    assert any("rank 0 publishes KV events on port 5557" in m and "socketPort 5556" in m for m in found), (
        found
    )
    found = violations(
        "router-serving-agreement",
        edited(
            reference,
            one(reference, DSET),
            edit_script("decode", "tcp://*:'\"${KV_EVENTS_BASE}\"'", "tcp://*:5557"),
        ),
    )
    assert any("role decode: KV-event endpoint tcp://*:5557 is a fixed port" in m for m in found), found
