"""The policy pack: policy config, the analyzer protocol end to end, and `llmd-fleet check`."""

import re
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
)
from pulumi_policy.policy import _PolicyAnalyzerServicer

from llmd_fleet.cli.main import run
from llmd_fleet.cli.policy_check import (
    PolicyConfigError,
    reconcile_config,
    resource_urn,
    run_policy_pack,
)
from llmd_fleet.cli.synth import Recorded, synthesize
from llmd_fleet.policies.pack import PACK_NAME, all_policies
from llmd_fleet.versions import Image, versions
from tests.policies.helpers import (
    DSET,
    edit_script,
    edited,
    one,
    stack_dir,
    violations,
    without,
)
from tests.support import REFERENCE_STACK, STACKS_DIR


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
        ({"gpu-budget": {"maxGpus": "lots"}}, "gpu-budget.maxGpus: must be of type integer (got 'lots')"),
        ({"gpu-budget": {"maxGPUs": 1}}, "gpu-budget: unknown properties: maxGPUs"),
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
    # The stack resource carries an output unknown before the update, as in `pulumi up`'s
    # preview; every stack policy still runs (none reads the stack's outputs).
    assert report.not_run == ()
    assert {v.policy for v in report.violations} == {"image-digest"}
    assert all(v.urn.startswith(f"urn:pulumi:{REFERENCE_STACK}::llmd-fleet::") for v in report.violations)

    dset = one(reference, DSET)
    broken = edited(
        without(reference, ":PodDisruptionBudget"),
        dset,
        edit_script("decode", "--block-size 64", "--block-size 32"),
    )
    config = {
        **reference_policy_config,
        "router-pdb": "advisory",
        "serving-role-pdb": "disabled",
        "image-digest": "disabled",
    }
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
    stacks = stack_dir(tmp_path, edit)
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


def test_a_policy_that_could_not_run_fails_the_report_instead_of_counting_as_advisory():
    from llmd_fleet.cli.policy_check import NOT_RUN, PolicyReport, PolicyState, Violation, report_lines

    skipped = Violation(
        "router-pdb",
        NOT_RUN,
        "urn:x",
        "pulumi:pulumi:Stack",
        "s",
        "can't run policy 'router-pdb' ...",
        "",
        "",
    )
    finding = Violation(
        "image-digest", "advisory", "urn:y", "kubernetes:apps/v1:Deployment", "d", "m", "", ""
    )
    report = PolicyReport(
        "llmd-fleet", "0.1.0", (PolicyState("router-pdb", "mandatory", "stack"),), 2, (skipped, finding)
    )
    assert report.not_run == (skipped,) and report.advisory == (finding,) and report.mandatory == ()
    assert report.summary().endswith("0 mandatory, 1 advisory violation(s), 1 not run")
    assert report_lines(report.violations)[0].startswith("[not run]  router-pdb  ")


def test_the_policy_config_is_checked_against_what_the_pack_serves():
    """`check` validates --policy-config before it writes anything, against the pack's policies
    built in-process (pack_analyzer_info): the same names, levels and schemas the pack serves."""
    import grpc  # type: ignore[import-untyped]
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]
    from pulumi.runtime.proto import analyzer_pb2_grpc

    from llmd_fleet.cli.policy_check import PACK_DIR, PolicyPackProcess, pack_analyzer_info

    pack = PolicyPackProcess(PACK_DIR, REFERENCE_STACK)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{pack.port(60)}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            served = analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
    finally:
        pack.stop()
    local = pack_analyzer_info()
    assert len(served.policies) == len(all_policies()) > 0
    assert list(local.policies) == list(served.policies)
    assert dict(local.initialConfig) == dict(served.initialConfig)
