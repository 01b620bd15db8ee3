"""The parts of `make checkov` that need no checkov: the scan directory (pod templates of
DisaggregatedSets and LeaderWorkerSets as Pods), the verdict on a report, the cached tool
environment's key, and the wiring into make and CI. checkov itself runs in `make checkov` only,
so a missing environment is never reported as a pass."""

import json
from pathlib import Path
from typing import Any

import yaml

from devtools.checkov_scan import env
from devtools.checkov_scan.cli import checkov_command
from devtools.checkov_scan.extract import pod_templates, strip_skips, write_scan_dir
from devtools.checkov_scan.report import NO_REASON, figures, parse, problems
from llmd_fleet.versions import versions
from tests.support import REPO

LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "solo", "namespace": "ns"},
    "spec": {
        "leaderWorkerTemplate": {
            "size": 2,
            "leaderTemplate": {
                "metadata": {"labels": {"r": "leader"}},
                "spec": {"containers": [{"name": "l"}]},
            },
            "workerTemplate": {
                "metadata": {
                    "labels": {"r": "worker"},
                    "annotations": {"checkov.io/skip1": "CKV_K8S_43=why"},
                },
                "spec": {"containers": [{"name": "w"}]},
            },
        }
    },
}


def test_every_pod_template_of_a_disaggregatedset_and_a_leaderworkerset_becomes_a_pod(rendered):
    (dset,) = [o for o in rendered("onprem-h100") if o["kind"] == "DisaggregatedSet"]
    pods = pod_templates(dset)
    assert [p.name for p in pods] == ["glm52-prefill-worker", "glm52-decode-worker"]
    for pod, role in zip(pods, dset["spec"]["roles"], strict=True):
        template = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert pod.pod["kind"] == "Pod" and pod.pod["metadata"]["namespace"] == "llm-d"
        assert pod.pod["spec"] == template["spec"]
        assert pod.pod["metadata"]["annotations"] == template["metadata"]["annotations"]
        assert pod.source == "DisaggregatedSet/llm-d/glm52"
    lws = pod_templates(LWS)
    assert [(p.name, p.pod["metadata"]["labels"]) for p in lws] == [
        ("solo-leader", {"r": "leader"}),
        ("solo-worker", {"r": "worker"}),
    ]
    assert pod_templates({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}) == []


def test_the_scan_directory_holds_the_manifests_and_the_pods(tmp_path):
    manifests = tmp_path / "manifests"
    (manifests / "ns").mkdir(parents=True)
    (manifests / "ns" / "leaderworkerset-solo.yaml").write_text(yaml.safe_dump(LWS))
    (manifests / "ns" / "service-x.yaml").write_text("kind: Service\nmetadata: {name: x}\n")
    out = tmp_path / "scan"
    (out / "stale").mkdir(parents=True)
    pods = write_scan_dir(manifests, out)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml"))
    assert files == [
        "extracted-pods/pod-ns-solo-leader.yaml",
        "extracted-pods/pod-ns-solo-worker.yaml",
        "ns/leaderworkerset-solo.yaml",
        "ns/service-x.yaml",
    ]
    assert not (out / "stale").exists() and len(pods) == 2
    worker = yaml.safe_load((out / "extracted-pods/pod-ns-solo-worker.yaml").read_text())
    assert worker["metadata"]["annotations"] == {"checkov.io/skip1": "CKV_K8S_43=why"}
    bare = tmp_path / "bare"
    write_scan_dir(manifests, bare, without_skips=True)
    assert (
        "annotations"
        not in yaml.safe_load((bare / "extracted-pods/pod-ns-solo-worker.yaml").read_text())["metadata"]
    )


def test_strip_skips_keeps_other_annotations():
    document = {
        "metadata": {"annotations": {"checkov.io/skip1": "CKV_K8S_8=x", "team": "a"}},
        "list": [{"b": 1}],
    }
    assert strip_skips(document) == {"metadata": {"annotations": {"team": "a"}}, "list": [{"b": 1}]}


def _report(failed: list[tuple[str, str]], skipped: list[tuple[str, str, str]], passed: int = 7) -> str:
    def item(check: str, resource: str, **extra: Any) -> dict[str, Any]:
        return {"check_id": check, "resource": resource, "file_path": "/f.yaml", "check_name": "n", **extra}

    return json.dumps(
        {
            "check_type": "kubernetes",
            "results": {
                "failed_checks": [item(c, r) for c, r in failed],
                "skipped_checks": [
                    item(c, r, check_result={"result": "SKIPPED", "suppress_comment": why})
                    for c, r, why in skipped
                ],
                "parsing_errors": [],
            },
            "summary": {"passed": passed, "failed": len(failed), "skipped": len(skipped)},
        }
    )


def test_the_verdict_names_unexplained_unreasoned_and_stale_skips():
    annotated = parse(
        _report(
            failed=[("CKV_K8S_8", "Deployment.ns.a")],
            skipped=[
                ("CKV_K8S_43", "Pod.ns.p", "pinned by tag"),
                ("CKV_K8S_15", "Pod.ns.p", NO_REASON),
                ("CKV_K8S_23", "Pod.ns.p", "root for IPC_LOCK"),
            ],
        )
    )
    bare = parse(
        _report(
            failed=[("CKV_K8S_8", "Deployment.ns.a"), ("CKV_K8S_43", "Pod.ns.p"), ("CKV_K8S_15", "Pod.ns.p")],
            skipped=[],
        )
    )
    found = problems(annotated, bare)
    assert len(found) == 3
    assert found[0].startswith("unexplained failure CKV_K8S_8 on Deployment.ns.a")
    assert "CKV_K8S_15 on Pod.ns.p has no reason" in found[1]
    assert "CKV_K8S_23 on Pod.ns.p explains nothing" in found[2]
    clean = parse(_report(failed=[], skipped=[("CKV_K8S_43", "Pod.ns.p", "pinned by tag")]))
    assert problems(clean, parse(_report(failed=[("CKV_K8S_43", "Pod.ns.p")], skipped=[]))) == []
    line = figures("s", "9.9.9", clean, ["DisaggregatedSet/ns/d -> d-decode-worker"])
    assert line == (
        "checkov 9.9.9 s: 7 passed, 0 failed, 1 skipped "
        "(1 pod template(s) from custom resources included: DisaggregatedSet/ns/d -> d-decode-worker)"
    )


def test_a_report_that_disagrees_with_its_summary_is_refused():
    data = json.loads(_report(failed=[("CKV_K8S_8", "x")], skipped=[]))
    data["summary"]["failed"] = 0
    try:
        parse(json.dumps(data))
    except ValueError as exc:
        assert "summary" in str(exc)
    else:
        raise AssertionError("a mismatched report was accepted")
    assert parse(json.dumps([json.loads(_report([], []))])).passed == 7


def test_the_tool_environment_is_keyed_by_the_pinned_version_and_lives_outside_the_repository(
    monkeypatch, tmp_path
):
    pinned = versions().tools.checkov
    assert env.checkov_version() == pinned
    assert env.env_key(pinned) != env.env_key(pinned + "1")
    assert env.env_key(pinned) != env.env_key(pinned, (3, 12))
    monkeypatch.setenv("LLMD_FLEET_CACHE_DIR", str(tmp_path))
    directory = env.env_dir()
    assert (
        directory.parent == tmp_path and directory.name == f"checkov-{env.env_key(versions().tools.checkov)}"
    )
    assert not directory.is_relative_to(REPO)
    # Never in the project's lock.
    assert '"checkov' not in (REPO / "pyproject.toml").read_text()
    assert 'name = "checkov"' not in (REPO / "uv.lock").read_text()
    assert checkov_command(Path("/x/checkov"), Path("/d"))[1:] == [
        "--directory",
        "/d",
        "--framework",
        "kubernetes",
        "--output",
        "json",
    ]


def test_make_checkov_runs_in_ci_after_the_vllm_check():
    makefile = (REPO / "Makefile").read_text()
    assert "\ncheckov:" in makefile and "python -m devtools.checkov_scan $(STACKS)" in makefile
    # .ci/run runs each step through its timing helper: `step make <target>`.
    steps = [
        line.removeprefix("step ").strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.startswith(("make", "step make"))
    ]
    assert steps.index("make checkov") == steps.index("make check-vllm") + 1
