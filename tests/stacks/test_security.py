"""Pod Security labels, hardened pods, the EPP's lease RBAC, checkov skip annotations and the
NetworkPolicy enforcement switches of the cloud targets, on the rendered objects of every stack."""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from llmd_fleet.cli.synth import clean, synthesize
from llmd_fleet.core.pod_context import SKIP_PREFIX, Skip, pod_security_labels, skip_annotations
from llmd_fleet.layers.router.component import epp_args, epp_rbac_rules
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.helpers import baseline_violations, restricted_violations
from tests.support import STACKS_DIR, all_stacks, stack_raw_config, vllm_stacks

PSA = "pod-security.kubernetes.io"
LEVELS = ("restricted", "baseline", "privileged")

# --- A small Pod Security Standards evaluator (the checks that matter for these pods) ----------------


def least_level(specs: list[dict[str, Any]]) -> str:
    """The most restrictive Pod Security level that admits every pod spec."""
    if any(restricted_violations(s) for s in specs):
        return "baseline" if not any(baseline_violations(s) for s in specs) else "privileged"
    return "restricted"


def test_the_evaluator_tells_the_levels_apart():
    plain = {"containers": [{"name": "c"}]}
    assert least_level([plain]) == "baseline"
    hardened = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "c",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    }
    assert least_level([hardened]) == "restricted"
    assert least_level([hardened, {**plain, "hostNetwork": True}]) == "privileged"
    ipc_lock = {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]}
    assert least_level([ipc_lock]) == "privileged"


# --- The rendered objects -------------------------------------------------------------------------------


def _serving_pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] == "DisaggregatedSet":
            for role in obj["spec"]["roles"]:
                yield role["name"], role["spec"]["leaderWorkerTemplate"]["workerTemplate"]


def _deployment(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name]
    return found


def _fleet(stack: str) -> tuple[str, str]:
    """The stack's fleet name and serving namespace, from its own config (object names start with
    the fleet name)."""
    serving = parse_config(stack_raw_config(stack)).serving
    return serving.name, serving.namespace


@pytest.mark.parametrize("stack", all_stacks())
def test_every_namespace_enforces_the_least_level_its_pods_need(stack, rendered):
    objects = rendered(stack)
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Namespace"}
    version = f"v{versions().kubernetes.minimum}"
    for name, labels in namespaces.items():
        assert labels[f"{PSA}/enforce"] in LEVELS and labels[f"{PSA}/enforce-version"] == version, name
    serving = [t["spec"] for _, t in _serving_pod_specs(objects)]
    fleet, namespace = _fleet(stack)
    router = [_deployment(objects, f"{fleet}-{n}")["spec"]["template"]["spec"] for n in ("epp", "tokenizer")]
    # The serving namespace holds both; the serving pods decide its level, the router's would pass
    # `restricted` on their own.
    assert least_level(router) == "restricted", [restricted_violations(s) for s in router]
    if stack in vllm_stacks():
        assert least_level(serving) == "privileged"
        assert namespaces[namespace][f"{PSA}/enforce"] == least_level(serving + router)
    else:
        # The simulator's pods pass `restricted`; the namespace enforces `baseline`, what the
        # gateway implementation's proxies (created there at runtime, not rendered) are held to.
        assert least_level(serving) == "restricted", [restricted_violations(s) for s in serving]
        assert namespaces[namespace][f"{PSA}/enforce"] == "baseline"
    # Charts whose pods the stack does not render: the level their chart's pods need (see the comment
    # where each namespace is declared).
    expected = {"lws-system": "baseline", "agentgateway-system": "baseline"}
    expected |= {"gpu-operator": "privileged", "nvidia-dra-driver-gpu": "privileged"}
    for name, level in expected.items():
        if name in namespaces:
            assert namespaces[name][f"{PSA}/enforce"] == level, name


def test_pod_security_labels_audit_what_a_lower_level_would_refuse():
    assert pod_security_labels("restricted") == {
        f"{PSA}/enforce": "restricted",
        f"{PSA}/enforce-version": f"v{versions().kubernetes.minimum}",
    }
    assert pod_security_labels("baseline")[f"{PSA}/warn"] == "restricted"
    privileged = pod_security_labels("privileged")
    assert privileged[f"{PSA}/audit"] == "restricted" and f"{PSA}/warn" not in privileged


def _engine(template: dict[str, Any]) -> dict[str, Any]:
    (engine,) = [c for c in template["spec"]["containers"] if c["name"] == "vllm"]
    return engine


def _writable_dirs(spec: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """Mount paths of the container's writable emptyDir volumes."""
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    return [
        m["mountPath"]
        for m in container.get("volumeMounts", ())
        if m["name"] in empty_dirs and not m.get("readOnly")
    ]


def _under(path: str, directories: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


@pytest.mark.parametrize("stack", vllm_stacks())
def test_serving_pods_are_hardened(stack, rendered):
    templates = list(_serving_pod_specs(rendered(stack)))
    assert {role for role, _ in templates} == {"prefill", "decode"}
    for role, template in templates:
        spec = template["spec"]
        assert spec["automountServiceAccountToken"] is False, role
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, role
        engine = _engine(template)
        context = engine["securityContext"]
        assert context["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK", "SYS_RAWIO"]}, role
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        # Root because added capabilities take effect only for UID 0 (llmd_fleet/layers/serving/pod.py).
        assert context["runAsUser"] == 0
        assert "privileged" not in context


@pytest.mark.parametrize("stack", vllm_stacks())
def test_everything_the_engine_writes_is_on_an_emptydir(stack, rendered):
    """With a read-only root, every cache, HOME and /tmp must be writable volumes: otherwise the
    engine fails after its 45-minute load, not at start."""
    for role, template in _serving_pod_specs(rendered(stack)):
        spec, engine = template["spec"], _engine(template)
        writable = _writable_dirs(spec, engine)
        assert _under("/tmp", writable) and _under("/dev/shm", writable), (role, writable)
        env = {e["name"]: e.get("value") for e in engine["env"]}
        for name in (
            "HOME",
            "HF_HOME",
            "HF_HUB_CACHE",
            "VLLM_CACHE_ROOT",
            "TRITON_CACHE_DIR",
            "CUDA_CACHE_PATH",
        ):
            assert env.get(name) and _under(env[name], writable), (role, name, env.get(name))
        assert _under(env["FLASHINFER_WORKSPACE_BASE"], writable)


@pytest.mark.parametrize("stack", all_stacks())
def test_router_pods_are_hardened(stack, rendered):
    objects = rendered(stack)
    fleet, _ = _fleet(stack)
    tokenizer = _deployment(objects, f"{fleet}-tokenizer")["spec"]["template"]["spec"]
    (render,) = tokenizer["containers"]
    assert render["securityContext"]["readOnlyRootFilesystem"] is True
    assert (
        render["securityContext"]["runAsNonRoot"] is True and render["securityContext"]["runAsUser"] >= 10000
    )
    assert render["livenessProbe"]["httpGet"]["path"] == "/health"
    assert tokenizer["automountServiceAccountToken"] is False
    env = {e["name"]: e.get("value") for e in render["env"]}
    writable = _writable_dirs(tokenizer, render)
    assert _under("/tmp", writable) and _under(env["HOME"], writable) and _under(env["HF_HOME"], writable)
    epp = _deployment(objects, f"{fleet}-epp")["spec"]["template"]["spec"]
    (picker,) = epp["containers"]
    assert picker["securityContext"]["readOnlyRootFilesystem"] is True
    assert picker["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert picker["livenessProbe"] and picker["readinessProbe"]


def test_the_epp_lease_rbac_names_the_lease_the_epp_elects_on():
    config = parse_config(stack_raw_config())
    names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
    # llm-d-router derives the lease from --pool-namespace and --pool-name.
    args = epp_args(config, names, experimental=False)
    assert f"--pool-name={names.pool}" in args and f"--pool-namespace={names.namespace}" in args
    assert "--ha-enable-leader-election" in args
    assert names.leader_lease == "epp-llm-d-glm52.llm-d.ai"
    leases = [r for r in epp_rbac_rules(config) if r["resources"] == ["leases"]]
    by_name = [r for r in leases if "resourceNames" in r]
    unnamed = [r for r in leases if "resourceNames" not in r]
    assert by_name == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [names.leader_lease],
            "verbs": ["get", "update"],
        }
    ]
    # RBAC cannot restrict create by name; nothing else is granted on every lease.
    assert [r["verbs"] for r in unnamed] == [["create"]]


@pytest.mark.parametrize("stack", all_stacks())
def test_skip_annotations_are_numbered_and_carry_reasons(stack, rendered):
    found = 0
    for obj in rendered(stack):
        holders = [obj["metadata"]] + [t["metadata"] for _, t in _serving_pod_specs([obj])]
        for metadata in holders:
            skips = {
                k: v for k, v in (metadata.get("annotations") or {}).items() if k.startswith(SKIP_PREFIX)
            }
            if not skips:
                continue
            assert sorted(skips) == sorted(f"{SKIP_PREFIX}{n}" for n in range(1, len(skips) + 1))
            for value in skips.values():
                check, reason = value.split("=")  # checkov splits at '=': exactly one
                assert re.fullmatch(r"CKV2?_K8S_\d+", check) and len(reason) > 20, value
            found += len(skips)
    assert found, "the serving pods and the router always keep some explained failures"


@pytest.mark.parametrize("stack", vllm_stacks())
def test_the_tcpxo_sidecar_skips_exist_only_where_the_sidecar_does(stack, rendered):
    for role, template in _serving_pod_specs(rendered(stack)):
        names = {
            c["name"] for c in (*template["spec"]["containers"], *template["spec"].get("initContainers", ()))
        }
        checks = {
            v.split("=")[0]
            for k, v in template["metadata"]["annotations"].items()
            if k.startswith(SKIP_PREFIX)
        }
        assert {"CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_25"} <= checks, role
        assert ("tcpxo-daemon" in names) == ("CKV_K8S_37" in checks) == stack.startswith("gke-"), role


def test_skip_annotations_refuse_what_checkov_would_misread():
    assert skip_annotations([Skip("CKV_K8S_43", "a reason"), Skip("CKV2_K8S_6", "another")]) == {
        "checkov.io/skip1": "CKV_K8S_43=a reason",
        "checkov.io/skip2": "CKV2_K8S_6=another",
    }
    for bad in (
        [Skip("CKV_K8S_43", "x=y")],
        [Skip("CKV_K8S_43", " ")],
        [Skip("CKV_AWS_1", "reason")],
        [Skip("CKV_K8S_43", "a"), Skip("CKV_K8S_43", "b")],
    ):
        with pytest.raises(ValueError):
            skip_annotations(bad)


def test_eks_turns_on_the_vpc_cni_network_policy_agent():
    synthesis = synthesize(STACKS_DIR, "eks-h100")
    addons = {
        clean(r.inputs)["addonName"]: clean(r.inputs)
        for r in synthesis.resources
        if r.type == "aws:eks/addon:Addon"
    }
    assert json.loads(addons["vpc-cni"]["configurationValues"]) == {"enableNetworkPolicy": "true"}
    assert all("configurationValues" not in a for name, a in addons.items() if name != "vpc-cni")
