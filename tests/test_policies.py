"""The CrossGuard policy pack: every rule passes the shipped stacks and catches its mistake, the
analyzer protocol works end to end, and `llmd-fleet check` fails on a broken stack.

Rules are called the way the analyzer calls them: props in engine format taken through a
protobuf Struct, deserialized and wrapped in pulumi_policy's unknown-checking proxies. Violating
fixtures come from the real stack program with one setting changed, or from real Pulumi
resources (pulumi_kubernetes, pulumi_gcp, pulumi_aws) registered under the mock engine.
"""

import copy
import dataclasses
import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]
from pulumi.runtime import mocks
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import unknown_checking_proxy

from llmd_fleet.cli.main import run
from llmd_fleet.cli.policy_check import (
    PolicyConfigError,
    load_policy_config,
    reconcile_config,
    resource_urn,
    run_policy_pack,
)
from llmd_fleet.cli.synth import Recorded, RecordingMocks, synthesize
from llmd_fleet.core.problems import PROJECT
from llmd_fleet.images.spec import image_tag
from llmd_fleet.policies.pack import PACK_NAME, all_policies
from llmd_fleet.policies.rules import _k8s
from llmd_fleet.versions import Image, versions
from tests.conftest import REFERENCE_STACK, REPO, STACKS_DIR, all_stacks

# The cloud SDKs are loaded at run time: they are large enough that type-checking them would
# dominate `make test`, and these tests only register their resources under mocks.
aws: Any = importlib.import_module("pulumi_aws")
gcp: Any = importlib.import_module("pulumi_gcp")

POLICIES = {p.name: p for p in all_policies()}
OPTS = PolicyResourceOptions(
    protect=False,
    ignore_changes=[],
    delete_before_replace=None,
    aliases=[],
    custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
    additional_secret_outputs=[],
)
DSET = "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet"


# ---------------------------------------------------------------------------------------------
# Helpers: analyzer-shaped args, fixtures under the mock engine, edits of recorded resources
# ---------------------------------------------------------------------------------------------


_WIRE: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def _props(inputs: dict[str, Any]) -> Any:
    """Inputs as the analyzer hands them to a rule (Struct round trip, secrets unwrapped, proxied)."""
    cached = _WIRE.get(id(inputs))
    if cached is None or cached[0] is not inputs:
        struct = struct_pb2.Struct()
        struct.update(inputs)
        cached = _WIRE[id(inputs)] = (inputs, json_format.MessageToDict(struct))
    return unknown_checking_proxy(deserialize_properties(copy.deepcopy(cached[1])))


def violations(name: str, resources: list[Recorded], config: dict[str, Any] | None = None) -> list[str]:
    """Messages policy `name` reports over the resources (per resource, or once for the stack)."""
    policy = POLICIES[name]
    found: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    if isinstance(policy, StackValidationPolicy):
        stack = [
            PolicyResource(
                r.type,
                _props(r.inputs),
                resource_urn("test", r.type, r.name),
                r.name,
                OPTS,
                None,
                None,
                [],
                {},
            )
            for r in resources
        ]
        policy.validate(StackValidationArgs(stack, config), report)
    else:
        assert isinstance(policy, ResourceValidationPolicy)
        for r in resources:
            args = ResourceValidationArgs(
                r.type, _props(r.inputs), resource_urn("test", r.type, r.name), r.name, OPTS, None, config
            )
            policy.validate(args, report)
    return found


def record(build: Callable[[], None]) -> list[Recorded]:
    """Register real Pulumi resources under the mock engine and return what was recorded."""
    recorder = RecordingMocks()
    pulumi.runtime.set_mocks(recorder, project=PROJECT, stack="test", preview=False)
    mocks.test(build)()
    return list(recorder.created)


@pytest.fixture(scope="module")
def reference() -> list[Recorded]:
    """Every resource of the reference stack, as `pulumi up` would register it."""
    return list(synthesize(STACKS_DIR, REFERENCE_STACK).resources)


@pytest.fixture(scope="module")
def reference_policy_config() -> dict[str, Any]:
    return load_policy_config(REPO / "policies" / "config" / f"{REFERENCE_STACK}.json")


def one(resources: list[Recorded], type_suffix: str, name: str | None = None) -> Recorded:
    found = [r for r in resources if r.type.endswith(type_suffix) and (name is None or name in r.name)]
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def edited(
    resources: list[Recorded], target: Recorded, edit: Callable[[dict[str, Any]], None]
) -> list[Recorded]:
    """The resources with a deep-copied, edited `target`."""
    inputs = copy.deepcopy(target.inputs)
    edit(inputs)
    return [dataclasses.replace(r, inputs=inputs) if r is target else r for r in resources]


def without(resources: list[Recorded], type_suffix: str) -> list[Recorded]:
    return [r for r in resources if not r.type.endswith(type_suffix)]


def role_pod(dset_inputs: dict[str, Any], role: str) -> dict[str, Any]:
    spec = next(r["spec"] for r in dset_inputs["spec"]["roles"] if r["name"] == role)
    return spec["leaderWorkerTemplate"]["workerTemplate"]


def pod_container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod["spec"]
    return next(c for c in spec.get("containers", []) + spec.get("initContainers", []) if c["name"] == name)


def edit_script(role: str, old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def edit(inputs: dict[str, Any]) -> None:
        engine = pod_container(role_pod(inputs, role), _k8s.ENGINE_CONTAINER)
        assert old in engine["command"][2], old
        engine["command"][2] = engine["command"][2].replace(old, new)

    return edit


def deployment(
    name: str,
    containers: list[dict[str, Any]],
    *,
    replicas: int = 2,
    namespace: str = "llm-d",
    labels: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
    kind: str = "Deployment",
) -> Callable[[], None]:
    """A real pulumi_kubernetes Deployment (or DaemonSet) to register under mocks."""
    labels = labels or {"app": name}

    def build() -> None:
        template = {"metadata": {"labels": labels}, "spec": {"containers": containers, **(pod_spec or {})}}
        meta = k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=labels)
        selector = k8s.meta.v1.LabelSelectorArgs(match_labels=labels)
        if kind == "DaemonSet":
            k8s.apps.v1.DaemonSet(
                name, metadata=meta, spec=cast(Any, {"selector": selector, "template": template})
            )
        else:
            k8s.apps.v1.Deployment(
                name,
                metadata=meta,
                spec=cast(Any, {"replicas": replicas, "selector": selector, "template": template}),
            )

    return build


SMALL = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
PINNED = versions().image("vllm").ref


# ---------------------------------------------------------------------------------------------
# The pack itself
# ---------------------------------------------------------------------------------------------


def test_every_policy_is_documented_with_an_explicit_level():
    assert len(POLICIES) == len(all_policies()) >= 24
    for policy in all_policies():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name), policy.name
        assert policy.enforcement_level in (EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY)
        # One sentence: ends with a period and has no other sentence end inside.
        assert policy.description.endswith(".") and ". " not in policy.description[:-1], policy.name
        assert policy.remediation_steps and len(policy.remediation_steps) > 40, policy.name
        assert policy.severity is not None
        for prop, spec in (policy.config_schema.properties if policy.config_schema else {}).items():
            assert "default" in spec and spec.get("description"), (policy.name, prop)


def test_conventions_match_the_components():
    from llmd_fleet.layers.serving import pod

    assert pod.ENGINE_NAME == _k8s.ENGINE_CONTAINER and pod.SIDECAR_NAME == _k8s.SIDECAR_CONTAINER


PACKAGED_PACK = REPO / "components" / "llmd_fleet" / "policies"


@pytest.mark.parametrize("pack_dir", [REPO / "policies", PACKAGED_PACK], ids=["checkout", "packaged"])
def test_pack_entry_points_only_serve_the_pack(pack_dir):
    main = (pack_dir / "__main__.py").read_text()
    assert "serve()" in main and "def " not in main and "PolicyPack(" not in main
    project = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text())
    assert project["version"] == pyproject_version()
    if pack_dir == PACKAGED_PACK:
        # Installed, the pack runs in whatever environment holds the package: no virtualenv option.
        assert project["runtime"] == "python"
    else:
        assert project["runtime"]["name"] == "python"
        assert (pack_dir / project["runtime"]["options"]["virtualenv"]).resolve() == REPO / ".venv"


def pyproject_version() -> str:
    import tomllib

    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_the_pack_is_built_in_one_place():
    from llmd_fleet.policies import pack

    source = Path(pack.__file__).read_text()
    assert source.count("PolicyPack(") == 1 and "def serve()" in source


@pytest.mark.parametrize("stack", all_stacks())
def test_shipped_stacks_have_no_mandatory_violation(stack):
    resources = list(synthesize(STACKS_DIR, stack).resources)
    config_file = REPO / "policies" / "config" / f"{stack}.json"
    config = load_policy_config(config_file) if config_file.is_file() else {}
    for policy in all_policies():
        if policy.enforcement_level == EnforcementLevel.MANDATORY:
            settings = config.get(policy.name)
            assert (
                violations(policy.name, resources, settings if isinstance(settings, dict) else None) == []
            ), policy.name


def test_the_reference_stack_has_a_gpu_budget(reference_policy_config):
    assert reference_policy_config["gpu-budget"]["maxGpus"] == 544


# ---------------------------------------------------------------------------------------------
# Parallelism and P/D agreement
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def decode_dp_48(monkeypatch) -> None:
    """The real program, given a plan whose decode DP (48) does not fill its 8 x 8 GPUs (the
    config layer would refuse such a role, so the plan is edited after it)."""
    import llmd_fleet.cli.main
    import llmd_fleet.cli.synth
    from llmd_fleet.plan.fleet import plan_fleet as real_plan_fleet

    def plan_fleet(config):
        plan = real_plan_fleet(config)
        roles = tuple(
            dataclasses.replace(r, data_parallel=48) if r.name == "decode" else r for r in plan.roles
        )
        return dataclasses.replace(plan, roles=roles)

    # Both entry points plan: synthesize() (used by tests) and the command line.
    monkeypatch.setattr(llmd_fleet.cli.synth, "plan_fleet", plan_fleet)
    monkeypatch.setattr(llmd_fleet.cli.main, "plan_fleet", plan_fleet)


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


# ---------------------------------------------------------------------------------------------
# GPUs, NICs, budget
# ---------------------------------------------------------------------------------------------


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
        "dra-nic-gpu-alignment", list(synthesize(_stack_dir(tmp_path, edit), REFERENCE_STACK).resources)
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


def p5_node_group(nodes: int, **extra: Any) -> aws.eks.NodeGroup:
    """A p5.48xlarge managed node group of `nodes` nodes (plus any NodeGroup arguments)."""
    return aws.eks.NodeGroup(
        "p5",
        cluster_name="c",
        node_role_arn="arn:aws:iam::0:role/n",
        subnet_ids=["s"],
        instance_types=["p5.48xlarge"],
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=nodes, max_size=nodes, min_size=0),
        **extra,
    )


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


# ---------------------------------------------------------------------------------------------
# Router
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Serving pods
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Supply chain
# ---------------------------------------------------------------------------------------------


def test_images_come_from_the_version_matrix(reference, monkeypatch):
    assert violations("image-pinned", reference) == []
    latest = [{"name": "vllm", "image": "docker.io/vllm/vllm-openai:latest", "resources": SMALL}]
    assert violations("image-pinned", record(deployment("latest", latest))) == [
        "Deployment llm-d/latest: container vllm image docker.io/vllm/vllm-openai:latest uses the moving "
        "tag 'latest'"
    ]
    stray = [{"name": "x", "image": "docker.io/library/busybox:1.36", "resources": SMALL}]
    (message,) = violations("image-pinned", record(deployment("stray", stray)))
    assert "busybox:1.36 is not pinned in images/versions.toml" in message
    assert (
        violations(
            "image-pinned",
            record(deployment("stray", stray)),
            {"additionalImages": ["docker.io/library/busybox:1.36"]},
        )
        == []
    )
    lws = one(reference, "helm.sh/v3:Release", "lws")
    found = violations("image-pinned", edited(reference, lws, lambda i: i.update(version="0.10.0")))
    assert found == [
        "Helm release lws-system/lws: chart oci://registry.k8s.io/lws/charts/lws 0.10.0 differs from the "
        "version matrix (0.11.1)"
    ] or any("0.10.0 differs from the version matrix" in m for m in found), found


def test_the_wide_ep_build_of_this_matrix_is_pinned_and_a_stale_one_is_not():
    registry = "registry.lab:5000/ml/llmd-fleet/vllm-wide-ep"

    def engine(image: str) -> list[Recorded]:
        return record(deployment("engine", [{"name": "vllm", "image": image, "resources": SMALL}]))

    current = f"{registry}:{image_tag('ib')}"
    assert violations("image-pinned", engine(current)) == []
    assert violations("image-pinned", engine(f"{current}@sha256:{'0' * 64}")) == []
    stale = f"{registry}:v{versions().vllm.version}-ib-000000000000"
    (message,) = violations("image-pinned", engine(stale))
    assert f"image {stale} is not pinned in images/versions.toml" in message
    other = f"registry.lab:5000/ml/llmd-fleet/not-wide-ep:{image_tag('ib')}"
    assert len(violations("image-pinned", engine(other))) == 1


def test_digests_are_advised(reference):
    assert any("pinned by tag only" in m for m in violations("image-digest", reference))
    digest = [{"name": "c", "image": f"{PINNED}@sha256:{'0' * 64}", "resources": SMALL}]
    resources = record(deployment("digest", digest))
    assert violations("image-digest", resources) == [] and violations("image-pinned", resources) == []


# ---------------------------------------------------------------------------------------------
# Security
# ---------------------------------------------------------------------------------------------


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

    stack = list(synthesize(_stack_dir(tmp_path, with_token), REFERENCE_STACK).resources)
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


# ---------------------------------------------------------------------------------------------
# Cloud
# ---------------------------------------------------------------------------------------------


def test_gpu_pools_are_tainted():
    taint = gcp.container.NodePoolNodeConfigTaintArgs(
        key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE"
    )

    def pools(tainted: bool) -> Callable[[], None]:
        def build() -> None:
            gcp.container.NodePool(
                "a3",
                cluster="c",
                node_count=2,
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type="a3-megagpu-8g",
                    guest_accelerators=[
                        gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                            type="nvidia-h100-mega-80gb", count=8
                        )
                    ],
                    taints=[taint] if tainted else None,
                ),
            )
            gcp.container.NodePool(
                "cpu",
                cluster="c",
                node_config=gcp.container.NodePoolNodeConfigArgs(machine_type="n2-standard-8"),
            )
            p5_node_group(
                nodes=1,
                ami_type="AL2023_x86_64_NVIDIA",
                taints=[aws.eks.NodeGroupTaintArgs(key="nvidia.com/gpu", value="true", effect="NO_SCHEDULE")]
                if tainted
                else None,
            )

        return build

    assert violations("gpu-pool-taint", record(pools(True))) == []
    assert violations("gpu-pool-taint", record(pools(False))) == [
        "gcp:container/nodePool:NodePool a3: GPU nodes (a3-megagpu-8g) without the "
        "nvidia.com/gpu:NoSchedule taint",
        "aws:eks/nodeGroup:NodeGroup p5: GPU node group (p5.48xlarge) without the nvidia.com/gpu:NoSchedule "
        "taint",
    ]


def test_gke_cluster_protection_and_private_nodes():
    def clusters(safe: bool) -> Callable[[], None]:
        def build() -> None:
            gcp.container.Cluster(
                "gke",
                location="us-central1-a",
                deletion_protection=None if safe else False,
                private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                    enable_private_nodes=safe
                ),
            )
            gcp.container.NodePool(
                "pool",
                cluster="gke",
                network_config=gcp.container.NodePoolNetworkConfigArgs(enable_private_nodes=safe),
            )

        return build

    safe, unsafe = record(clusters(True)), record(clusters(False))
    assert (
        violations("cluster-deletion-protection", safe) == [] and violations("gke-private-nodes", safe) == []
    )
    assert violations("cluster-deletion-protection", unsafe) == [
        "gcp:container/cluster:Cluster gke: deletionProtection is off, so one `pulumi destroy` or replace "
        "deletes the cluster"
    ]
    assert violations("gke-private-nodes", unsafe) == [
        "gcp:container/cluster:Cluster gke: nodes get public IPs; enable private nodes",
        "gcp:container/nodePool:NodePool pool: networkConfig.enablePrivateNodes is false, so its nodes get "
        "public IPs",
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_eks_cluster_endpoint_protection_and_imdsv2():
    def cluster(safe: bool) -> Callable[[], None]:
        def build() -> None:
            aws.eks.Cluster(
                "eks",
                role_arn="arn:aws:iam::0:role/c",
                deletion_protection=True if safe else None,
                vpc_config=aws.eks.ClusterVpcConfigArgs(
                    subnet_ids=["s"],
                    endpoint_private_access=True,
                    endpoint_public_access=True,
                    public_access_cidrs=["203.0.113.0/24"] if safe else None,
                ),
            )
            aws.ec2.LaunchTemplate(
                "p5",
                metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                    http_tokens="required" if safe else "optional"
                ),
            )

        return build

    safe, unsafe = record(cluster(True)), record(cluster(False))
    for name in ("cluster-deletion-protection", "eks-restricted-endpoint", "eks-imdsv2"):
        assert violations(name, safe) == [], name
    assert violations("cluster-deletion-protection", unsafe) == [
        "aws:eks/cluster:Cluster eks: deletionProtection is off, so one `pulumi destroy` or replace deletes "
        "the cluster"
    ]
    assert violations("eks-restricted-endpoint", unsafe) == [
        "aws:eks/cluster:Cluster eks: the public API endpoint is open to the internet (publicAccessCidrs "
        "unset = 0.0.0.0/0)"
    ]
    assert violations("eks-imdsv2", unsafe) == [
        "aws:ec2/launchTemplate:LaunchTemplate p5: metadataOptions.httpTokens is optional, so IMDSv1 hands "
        "node credentials to any pod that can reach 169.254.169.254"
    ]


# ---------------------------------------------------------------------------------------------
# Policy config, the analyzer protocol end to end, and `llmd-fleet check`
# ---------------------------------------------------------------------------------------------


def _analyzer_info() -> Any:
    servicer = _PolicyAnalyzerServicer(PACK_NAME, "0.0.1", all_policies(), EnforcementLevel.ADVISORY)
    return servicer.GetAnalyzerInfo(None, None)


def test_policy_config_is_reconciled_like_the_cli():
    info = _analyzer_info()
    config = reconcile_config(
        info, {"all": "advisory", "gpu-budget": {"enforcementLevel": "mandatory", "maxGpus": 100}}
    )
    assert config["gpu-budget"] == (
        "mandatory",
        {
            "maxGpus": 100,
            "countNodePools": True,
            "instanceGpus": config["gpu-budget"][1]["instanceGpus"],
            "gpuResources": ["nvidia.com/gpu"],
            "gpuDeviceClasses": ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"],
        },
    )
    assert config["router-replicas"] == ("advisory", {"minReplicas": 2})
    assert reconcile_config(info, None)["image-digest"][0] == "advisory"
    for bad, message in (
        ({"no-such-policy": "disabled"}, "unknown policies: no-such-policy"),
        ({"gpu-budget": {"maxGpus": "lots"}}, "gpu-budget.maxGpus: 'lots' is not of type 'integer'"),
        ({"gpu-budget": {"maxGPUs": 1}}, "Additional properties are not allowed"),
        ({"router-pdb": "sometimes"}, "enforcementLevel must be one of"),
    ):
        with pytest.raises(PolicyConfigError, match=re.escape(message)):
            reconcile_config(info, bad)


def test_the_analyzer_protocol_end_to_end(reference, reference_policy_config):
    """The pack as a subprocess over gRPC: the shipped stack passes; a broken one fails with the
    rule and the resource named; config changes levels and disables rules."""
    report = run_policy_pack(reference, REFERENCE_STACK, policy_config=reference_policy_config)
    assert report.pack == PACK_NAME and report.version == "0.1.0"
    assert [p.name for p in report.policies] == [p.name for p in all_policies()]
    assert {p.kind for p in report.policies} == {"resource", "stack"}
    assert report.mandatory == () and report.violations
    assert {v.policy for v in report.violations} == {"image-digest"}
    assert all(v.urn.startswith(f"urn:pulumi:{REFERENCE_STACK}::llmd-fleet::") for v in report.violations)

    dset = one(reference, DSET)
    broken = edited(
        without(reference, ":PodDisruptionBudget"),
        dset,
        edit_script("decode", "--block-size 64", "--block-size 32"),
    )
    config = {**reference_policy_config, "router-pdb": "advisory", "image-digest": "disabled"}
    report = run_policy_pack(broken, REFERENCE_STACK, policy_config=config)
    # Decode's block size now disagrees with prefill's and with the router's prefix hashing.
    assert [v.policy for v in report.mandatory] == ["pd-kv-transfer-agreement", "router-serving-agreement"]
    pd, router = report.mandatory
    assert pd.policy == "pd-kv-transfer-agreement" and pd.name == dset.name and pd.type == DSET
    assert pd.urn == resource_urn(REFERENCE_STACK, DSET, dset.name)
    assert "--block-size differs: prefill 64, decode 32" in pd.message
    assert pd.line().startswith(f"[mandatory]  pd-kv-transfer-agreement  ({DSET}: {dset.name})  ")
    assert "hashes blocks of 64 tokens" in router.message and router.name == dset.name
    (pdb,) = report.advisory
    assert pdb.policy == "router-pdb" and pdb.name == "router-deployment"


def _stack_dir(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text())
    edit(document["config"])
    (stacks / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(yaml.safe_dump(document))
    return stacks


@pytest.mark.usefixtures("decode_dp_48")
def test_check_fails_a_deliberately_broken_stack(tmp_path, crd_dir, capsys, monkeypatch):
    """A router with one replica, a fleet beyond its GPU budget, the engine image tagged latest
    and a decode DP that does not fill its GPUs: `check` names each rule and resource, exit 1."""

    def edit(config):
        config["llmd-fleet:router"] = {"replicas": 1}
        config["llmd-fleet:fleet"]["nodeGroups"]["h100"]["count"] = 76
        config["llmd-fleet:serving"]["roles"]["decode"]["instances"] = 6

    monkeypatch.setitem(
        versions().images, "vllm", Image(repository="docker.io/vllm/vllm-openai", tag="latest")
    )
    stacks = _stack_dir(tmp_path, edit)
    code = run(
        [
            "--stacks-dir",
            str(stacks),
            "check",
            REFERENCE_STACK,
            "--out",
            str(tmp_path / "out"),
            "--crd-dir",
            str(crd_dir),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("[mandatory]")]
    expected = {
        "router-replicas": "Deployment llm-d/glm52-epp runs 1 replica(s)",
        "gpu-budget": "workloads request 608 GPUs, over the stack's budget of 544",
        "image-pinned": (
            "DisaggregatedSet llm-d/glm52 role prefill: container vllm image "
            "docker.io/vllm/vllm-openai:latest"
        ),
        "parallelism-matches-gpus": "DisaggregatedSet llm-d/glm52 role decode: TP 1 x DP 48",
    }
    for rule, text in expected.items():
        assert any(f"  {rule}  (" in line and text in line for line in lines), (rule, out)
    assert "(kubernetes:apps/v1:Deployment: router-deployment)" in out
    assert f"config/{REFERENCE_STACK}.json)" in out


def test_check_rejects_a_bad_policy_config(tmp_path, crd_dir, capsys):
    bad = tmp_path / "policy.json"
    bad.write_text("{not json")
    code = run(
        [
            "check",
            REFERENCE_STACK,
            "--out",
            str(tmp_path / "out"),
            "--crd-dir",
            str(crd_dir),
            "--policy-config",
            str(bad),
        ]
    )
    assert code == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was rendered


AUTOSCALE_STACK = "onprem-h100-autoscale"
SCALED_OBJECT = "keda.sh/v1alpha1:ScaledObject"


@pytest.fixture(scope="module")
def autoscaled() -> list[Recorded]:
    """Every resource of the autoscaled variant of the reference stack."""
    return list(synthesize(STACKS_DIR, AUTOSCALE_STACK).resources)


def test_autoscaling_budget_counts_every_role_at_its_maximum_and_the_surge(autoscaled):
    # prefill up to 5 x 32 GPUs, decode up to 5 x 64, plus one decode instance of surge: 544.
    assert violations("autoscaling-within-gpu-budget", autoscaled, {"maxGpus": 544}) == []
    (message,) = violations("autoscaling-within-gpu-budget", autoscaled, {"maxGpus": 512})
    assert message.startswith(
        "at their autoscaling maxima the workloads request 480 GPUs plus 64 for a rolling update's "
        "surge, 544 in all, over the stack's budget of 512"
    )
    assert "role prefill: up to 5 instances, 20 pods x 8" in message
    assert "role decode: up to 5 instances, 40 pods x 8" in message
    # gpu-budget counts the External roles (which render no replicas) at the same maxima.
    assert violations("gpu-budget", autoscaled, {"maxGpus": 544}) == []
    (message,) = violations("gpu-budget", autoscaled, {"maxGpus": 512})
    assert "surges 8 pods x 8 GPUs on top of the 480 GPUs in use, up to 544" in message
    (message,) = violations("gpu-budget", autoscaled, {"maxGpus": 448})
    assert "DisaggregatedSet llm-d/glm52: 480 (prefill 20 pods x 8, decode 40 pods x 8)" in message


def test_autoscaling_budget_counts_the_preflight_before_serving_not_beside_it(autoscaled):
    # The preflight's 16 GPUs run before any role starts, so the maxima alone fill the 544.
    job = one(autoscaled, ":Job", "glm52-preflight")
    assert violations("autoscaling-within-gpu-budget", autoscaled, {"maxGpus": 544}) == []

    def ungated(inputs: dict[str, Any]) -> None:
        del inputs["metadata"]["annotations"]["llmd-fleet.io/runs-before"]

    (message,) = violations(
        "autoscaling-within-gpu-budget", edited(autoscaled, job, ungated), {"maxGpus": 544}
    )
    assert "request 496 GPUs plus 64 for a rolling update's surge, 560 in all" in message
    assert "Job llm-d/glm52-preflight: 2 pods x 8" in message


def test_index_holders_count_autoscaled_roles_at_their_maxima(autoscaled):
    # 5 x 32 prefill + 5 x 64 decode rank endpoints x 2 tiers = 960 holders at the maxima; the
    # plan sizes podCacheSize 1200. At the starting 3 + 4 instances 704 would do.
    assert violations("router-index-holders", autoscaled) == []
    config_map = one(autoscaled, ":ConfigMap", "router-config")

    def shrink(inputs: dict[str, Any]) -> None:
        for key, text in inputs["data"].items():
            inputs["data"][key] = text.replace("podCacheSize: 1200", "podCacheSize: 900")

    (message,) = violations("router-index-holders", edited(autoscaled, config_map, shrink))
    assert "keeps 900 holders per block key, but 480 rank endpoints x 2 tier(s) = 960" in message


def test_autoscaling_budget_reads_the_scaled_objects_maximum(autoscaled):
    prefill = one(autoscaled, SCALED_OBJECT, "prefill")
    raised = edited(autoscaled, prefill, lambda inputs: inputs["spec"].update(maxReplicaCount=6))
    (message,) = violations("autoscaling-within-gpu-budget", raised, {"maxGpus": 544})
    assert "512 GPUs plus 64" in message and "role prefill: up to 6 instances, 24 pods x 8" in message
    # KEDA's own default maximum (100) when the ScaledObject sets none.
    unset = edited(autoscaled, prefill, lambda inputs: inputs["spec"].pop("maxReplicaCount"))
    (message,) = violations("autoscaling-within-gpu-budget", unset, {"maxGpus": 544})
    assert "role prefill: up to 100 instances, 400 pods x 8" in message


def test_autoscaling_budget_refuses_an_external_role_nothing_bounds(autoscaled):
    unbounded = [r for r in autoscaled if not (r.type.endswith(SCALED_OBJECT) and "decode" in r.name)]
    (message,) = violations("autoscaling-within-gpu-budget", unbounded, {"maxGpus": 544})
    assert message == (
        "DisaggregatedSet llm-d/glm52 role decode: scales externally (scaling.mode External) but no "
        "ScaledObject or HorizontalPodAutoscaler targets its DisaggregatedSetRoleScaler glm52-decode, "
        "so nothing bounds how many instances it may run"
    )


def test_autoscaling_budget_does_not_apply_to_fixed_roles(reference):
    # No External role: the gpu-budget rule covers the fleet.
    assert violations("autoscaling-within-gpu-budget", reference, {"maxGpus": 8}) == []
    assert violations("autoscaling-within-gpu-budget", reference) == []


# ---------------------------------------------------------------------------------------------
# Every serving role runs an engine the pack can read (vllm serve, or the simulator)
# ---------------------------------------------------------------------------------------------


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
