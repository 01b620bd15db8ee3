"""Prometheus' Kubernetes discovery as the replay gives it (devtools/daytwo/discovery.py): the
labels of Prometheus' `discovery/kubernetes` (the module `[tools].promtool` pins) for the pod and
endpointslice roles."""

from typing import Any

import pytest

from devtools.daytwo import discovery


def pod(name: str, ip: str | None, ready: str | None = "True", namespace: str = "llm-d") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "hostIP": "172.18.0.5"}
    if ip:
        status["podIP"] = ip
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"llm-d.ai/role": "decode", "app.kubernetes.io/instance": "glm52"},
            "annotations": {"kubectl.kubernetes.io/default-container": "vllm"},
            "ownerReferences": [
                {"kind": "StatefulSet", "name": "glm52-decode", "controller": True},
                {"kind": "Other", "name": "not-the-controller"},
            ],
        },
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm:1",
                    "ports": [
                        {"name": "rank0", "containerPort": 8200},
                        {"name": "rank1", "containerPort": 8201},
                    ],
                },
                {"name": "no-ports", "image": "busybox"},
            ],
            "initContainers": [
                {
                    "name": "routing-proxy",
                    "image": "sidecar:1",
                    "ports": [{"name": "proxy", "containerPort": 8000}],
                }
            ],
        },
        "status": status,
    }


def by_address(groups: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    out = {}
    for g in groups:
        (address,) = g["targets"]
        out[address] = g["labels"]
    return out


def test_pod_role_one_target_per_container_port_and_one_per_portless_container() -> None:
    targets = by_address(discovery.pod_groups([pod("d0", "10.244.0.10"), pod("d1", None)]))
    # No address, no targets (pod.go buildPod); containers, then initContainers.
    assert sorted(targets) == ["10.244.0.10", "10.244.0.10:8000", "10.244.0.10:8200", "10.244.0.10:8201"]
    rank1 = targets["10.244.0.10:8201"]
    assert rank1 == {
        "__meta_kubernetes_namespace": "llm-d",
        "__meta_kubernetes_pod_name": "d0",
        "__meta_kubernetes_pod_ip": "10.244.0.10",
        "__meta_kubernetes_pod_ready": "true",
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_node_name": "gpu-node-1",
        "__meta_kubernetes_pod_host_ip": "172.18.0.5",
        "__meta_kubernetes_pod_uid": "uid-d0",
        "__meta_kubernetes_pod_label_llm_d_ai_role": "decode",
        "__meta_kubernetes_pod_labelpresent_llm_d_ai_role": "true",
        "__meta_kubernetes_pod_label_app_kubernetes_io_instance": "glm52",
        "__meta_kubernetes_pod_labelpresent_app_kubernetes_io_instance": "true",
        "__meta_kubernetes_pod_annotation_kubectl_kubernetes_io_default_container": "vllm",
        "__meta_kubernetes_pod_annotationpresent_kubectl_kubernetes_io_default_container": "true",
        "__meta_kubernetes_pod_controller_kind": "StatefulSet",
        "__meta_kubernetes_pod_controller_name": "glm52-decode",
        "__meta_kubernetes_pod_container_name": "vllm",
        "__meta_kubernetes_pod_container_image": "vllm:1",
        "__meta_kubernetes_pod_container_init": "false",
        "__meta_kubernetes_pod_container_port_name": "rank1",
        "__meta_kubernetes_pod_container_port_number": "8201",
        "__meta_kubernetes_pod_container_port_protocol": "TCP",
    }
    assert targets["10.244.0.10:8000"]["__meta_kubernetes_pod_container_init"] == "true"
    assert "__meta_kubernetes_pod_container_port_name" not in targets["10.244.0.10"]


@pytest.mark.parametrize(("condition", "label"), [("True", "true"), ("False", "false"), (None, "unknown")])
def test_pod_ready_is_the_ready_condition_lowercased(condition: str | None, label: str) -> None:
    assert discovery.pod_ready(pod("d0", "10.0.0.1", ready=condition)) == label


SERVICE: dict[str, Any] = {
    "metadata": {
        "name": "glm52-epp",
        "namespace": "llm-d",
        "labels": {"app.kubernetes.io/component": "router"},
    },
    "spec": {
        "selector": {"llm-d.ai/role": "decode"},
        "ports": [
            {"name": "grpc", "port": 9002, "targetPort": 8200},
            {"name": "http-metrics", "port": 9090, "targetPort": "proxy"},
            {"name": "unknown", "port": 9999, "targetPort": "nope"},
        ],
    },
}


def test_endpointslice_role_labels_the_slice_service_and_pod() -> None:
    pods = [
        pod("d0", "10.244.0.10"),
        pod("d1", "10.244.0.11", ready="False"),
        pod("x", "10.0.0.9", namespace="o"),
    ]
    targets = by_address(discovery.endpointslice_groups([SERVICE], pods))
    # Ports by number and by a container port's name; a name no container has gives no endpoint.
    assert sorted(targets) == ["10.244.0.10:8000", "10.244.0.10:8200", "10.244.0.11:8000", "10.244.0.11:8200"]
    metrics = targets["10.244.0.10:8000"]
    assert metrics["__meta_kubernetes_endpointslice_port_name"] == "http-metrics"
    assert metrics["__meta_kubernetes_endpointslice_port"] == "8000"
    assert metrics["__meta_kubernetes_endpointslice_address_target_kind"] == "Pod"
    assert metrics["__meta_kubernetes_endpointslice_address_target_name"] == "d0"
    assert metrics["__meta_kubernetes_endpointslice_endpoint_conditions_ready"] == "true"
    assert metrics["__meta_kubernetes_endpointslice_label_kubernetes_io_service_name"] == "glm52-epp"
    assert metrics["__meta_kubernetes_service_name"] == "glm52-epp"
    assert metrics["__meta_kubernetes_service_label_app_kubernetes_io_component"] == "router"
    assert metrics["__meta_kubernetes_service_labelpresent_app_kubernetes_io_component"] == "true"
    assert metrics["__meta_kubernetes_pod_name"] == "d0"
    # The container port the Service port lands on.
    assert metrics["__meta_kubernetes_pod_container_name"] == "routing-proxy"
    assert metrics["__meta_kubernetes_pod_container_port_name"] == "proxy"
    assert metrics["__meta_kubernetes_pod_container_init"] == "true"
    assert targets["10.244.0.11:8200"]["__meta_kubernetes_endpointslice_endpoint_conditions_ready"] == "false"


def test_a_service_without_selector_has_no_endpoints_here() -> None:
    headless = {**SERVICE, "spec": {**SERVICE["spec"], "selector": {}}}
    assert discovery.endpointslice_groups([headless], [pod("d0", "10.244.0.10")]) == []


def test_job_groups_follow_the_jobs_role_and_namespaces() -> None:
    pods = [pod("d0", "10.244.0.10"), pod("o0", "10.0.0.9", namespace="other")]
    job = {"job_name": "j", "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": ["llm-d"]}}]}
    assert {g["labels"]["__meta_kubernetes_pod_name"] for g in discovery.job_groups(job, pods, [])} == {"d0"}
    every = {"job_name": "j", "kubernetes_sd_configs": [{"role": "pod"}]}
    assert {g["labels"]["__meta_kubernetes_pod_name"] for g in discovery.job_groups(every, pods, [])} == {
        "d0",
        "o0",
    }
    slices = {
        "job_name": "s",
        "kubernetes_sd_configs": [{"role": "endpointslice", "namespaces": {"names": ["o"]}}],
    }
    assert discovery.job_groups(slices, pods, [SERVICE]) == []


@pytest.mark.parametrize(
    "sd",
    [
        {"role": "endpoints"},
        {"role": "node"},
        {"role": "pod", "selectors": [{"role": "pod", "label": "a=b"}]},
        {"role": "pod", "attach_metadata": {"node": True}},
    ],
)
def test_discovery_the_replay_does_not_give_is_an_error_naming_the_job(sd: dict[str, Any]) -> None:
    with pytest.raises(discovery.DiscoveryError, match="job podMonitor/x/y/0"):
        discovery.job_groups({"job_name": "podMonitor/x/y/0", "kubernetes_sd_configs": [sd]}, [], [])
