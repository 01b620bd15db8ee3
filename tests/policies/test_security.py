"""The policy pack: security."""

from llmd_fleet.cli.synth import synthesize
from llmd_fleet.policies.rules import _k8s
from tests.policies.helpers import (
    DSET,
    PINNED,
    SMALL,
    deployment,
    edited,
    one,
    pod_container,
    record,
    role_pod,
    stack_dir,
    violations,
)
from tests.support import REFERENCE_STACK


def test_privileged_and_host_network_only_for_drivers():
    privileged = [{"name": "d", "image": PINNED, "securityContext": {"privileged": True}, "resources": SMALL}]
    host = {"hostNetwork": True}
    driver = deployment("dranet", privileged, namespace="kube-system", pod_spec=host, kind="DaemonSet")
    assert violations("no-privileged-or-host-network", record(driver)) == []
    found = violations("no-privileged-or-host-network", record(deployment("app", privileged, pod_spec=host)))
    assert found == [
        "Deployment llm-d/app: hostNetwork is true; only allow-listed node drivers share the host's "
        "namespaces",
        "Deployment llm-d/app: container d is privileged",
    ]
    allowed = {"allowedWorkloads": ["Deployment/llm-d/app"]}
    assert (
        violations(
            "no-privileged-or-host-network", record(deployment("app", privileged, pod_spec=host)), allowed
        )
        == []
    )


def test_secrets_only_by_reference(reference, tmp_path):
    def with_token(config):
        config["llmd-fleet:hfToken"] = {"secure": "v1:AAAAciphertextAAAA"}

    stack = list(synthesize(stack_dir(tmp_path, with_token), REFERENCE_STACK).resources)
    engine = pod_container(role_pod(one(stack, DSET).inputs, "decode"), "vllm")
    assert any(e["name"] == "HF_TOKEN" and "secretKeyRef" in e["valueFrom"] for e in engine["env"])
    assert (
        violations("secrets-by-reference", stack) == []
        and violations("secrets-by-reference", reference) == []
    )
    token = "hf_" + "a1B2" * 9
    literal = [
        {"name": "c", "image": PINNED, "resources": SMALL, "env": [{"name": "HF_TOKEN", "value": token}]}
    ]
    assert violations("secrets-by-reference", record(deployment("leak", literal))) == [
        "Deployment llm-d/leak: container c env HF_TOKEN is a literal value; use valueFrom.secretKeyRef"
    ]
    lws = one(reference, "helm.sh/v3:Release", "lws")
    found = violations(
        "secrets-by-reference", edited(reference, lws, lambda i: i["values"].update(apiToken="s3cr3t"))
    )
    assert found == [
        "Helm release lws-system/lws: apiToken holds a literal credential; reference a Secret instead"
    ]
    leaked = edited(reference, lws, lambda i: i["values"].update(apiToken="s3cr3t"))
    assert violations("secrets-by-reference", leaked, {"allowedNames": ["apiToken"]}) == []


def test_router_and_sidecar_run_as_non_root(reference):
    assert violations("router-sidecar-non-root", reference) == []

    def root(inputs):
        pod_container(role_pod(inputs, "decode"), _k8s.SIDECAR_CONTAINER)["securityContext"] = {
            "runAsUser": 0
        }

    assert violations("router-sidecar-non-root", edited(reference, one(reference, DSET), root)) == [
        "DisaggregatedSet llm-d/glm52 role decode: container routing-proxy may run as root; set "
        "runAsNonRoot: true and a non-zero runAsUser"
    ]


def test_every_container_sets_requests_and_limits(reference):
    assert violations("resources-requests-limits", reference) == []
    bare = [{"name": "c", "image": PINNED, "resources": {"requests": {"rdma/ib": "1"}}}]
    assert violations("resources-requests-limits", record(deployment("bare", bare))) == [
        "Deployment llm-d/bare: container c sets no requests.cpu, requests.memory, limits.memory",
        "Deployment llm-d/bare: container c requests rdma/ib without a limit",
    ]
