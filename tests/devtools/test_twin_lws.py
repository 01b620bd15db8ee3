"""The twin's LWS controller (devtools/twin/lws.py, lws_checks.py): its source snapshot and build
inputs, the `-config` file and webhook configurations the twin gives it, the figure lines `make
e2e` prints and their "not run" path, and the pure readings of pods and groups. None of these
tests needs Go, the snapshot or a running twin; `make e2e` runs the controller itself."""

import base64
import io
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import source_snapshot
from devtools.twin import cluster, lws, lws_checks
from devtools.twin.kube import ApiError
from devtools.twin.manifests import Report
from llmd_fleet.versions import versions

REPO = Path(__file__).resolve().parents[2]
COMMIT = versions().twin.lws


# --- the pinned source -------------------------------------------------------------------------


def test_the_pinned_release_is_the_chart_s_and_the_one_the_crds_are_vendored_from():
    chart = versions().chart("lws").version
    assert lws.pinned_tag() == f"v{chart}"
    sources = (REPO / "schemas" / "crds" / "SOURCES.md").read_text()
    for crd in lws.DS_CRDS:
        row = next(line for line in sources.splitlines() if Path(crd).name in line and line.startswith("|"))
        # The tag of the chart the stacks install, its commit, and the chart's copy of the file.
        assert f"`{lws.pinned_tag()}` (`{COMMIT}`" in row
        assert f"`{crd}`" in row
    assert lws.tarball_name(lws.pinned_tag()) == f"lws-v{chart}.tar.gz"


def _archive(path: Path, commit: str, files: dict[str, bytes], cut: int | None = None) -> Path:
    """A `git archive`-style tarball (pax comment = commit, a top folder) of `files`; `cut`
    truncates the uncompressed tar stream after that many bytes, gzip kept valid."""
    raw = io.BytesIO()
    with tarfile.open(
        fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}
    ) as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(f"lws-{commit[:7]}/{name}")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    data = raw.getvalue()
    if cut is not None:
        data = data[:cut]
    import gzip

    path.write_bytes(gzip.compress(data))
    return path


REQUIRED_FILES = {rel: b"x\n" for rel in lws.REQUIRED}


def test_no_source_is_not_run_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv(lws.SOURCE_ENV, str(tmp_path / "absent"))
    with pytest.raises(lws.SourceMissing, match=r"LLMD_LWS_SOURCE.*does not exist"):
        lws.ensure(shared=tmp_path)
    monkeypatch.delenv(lws.SOURCE_ENV)
    with pytest.raises(lws.SourceMissing, match=r"lws-v1\.2\.3\.tar\.gz does not exist"):
        lws.lws_source(COMMIT, shared=tmp_path, tag="v1.2.3")


def test_a_snapshot_of_another_commit_is_refused(monkeypatch, tmp_path):
    monkeypatch.delenv(lws.SOURCE_ENV, raising=False)
    other = "1" * 40
    _archive(tmp_path / lws.tarball_name(lws.pinned_tag()), other, REQUIRED_FILES)
    with pytest.raises(lws.BuildError, match="the twin pins") as refused:
        lws.lws_source(COMMIT, shared=tmp_path)
    assert not isinstance(refused.value, lws.SourceMissing)


def test_unpack_finds_the_nested_root_and_tolerates_a_cut_after_what_the_build_reads(tmp_path):
    files = {**REQUIRED_FILES, "site/big.png": b"p" * 20000, "test/e2e.go": b"package e2e\n"}
    archive = _archive(tmp_path / "a.tar.gz", COMMIT, files, cut=12000)
    snapshot = source_snapshot.Snapshot(archive, COMMIT, source_snapshot.sha256(archive))
    root, note = lws.unpack(snapshot, tmp_path / "src")
    assert root == tmp_path / "src" / f"lws-{COMMIT[:7]}"
    assert (root / "cmd" / "main.go").is_file()
    assert "ends early" in note and "site/big.png" in note


def test_unpack_refuses_a_cut_before_what_the_build_reads(tmp_path):
    files = {"go.mod": b"module sigs.k8s.io/lws\n", "big.bin": b"b" * 20000, **REQUIRED_FILES}
    archive = _archive(tmp_path / "a.tar.gz", COMMIT, files, cut=8000)
    snapshot = source_snapshot.Snapshot(archive, COMMIT, source_snapshot.sha256(archive))
    with pytest.raises(lws.BuildError, match=r"lacks .*cmd/main.go.*ends early"):
        lws.unpack(snapshot, tmp_path / "src")


def test_the_vendored_crds_are_held_to_the_chart_copies_of_the_built_release(tmp_path):
    vendored = REPO / "schemas" / "crds"
    built = lws.Built(tmp_path, COMMIT, None, "")
    for rel in lws.DS_CRDS:
        assert rel.startswith("charts/lws/crds/")
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((vendored / "disaggregatedset.x-k8s.io" / Path(rel).name).read_bytes())
    assert lws.same_crds(built, vendored) == (2, [])
    changed = tmp_path / lws.DS_CRDS[0]
    changed.write_text(
        changed.read_text().replace("app.kubernetes.io/name: lws", "app.kubernetes.io/name: other")
    )
    assert lws.same_crds(built, vendored) == (1, [Path(lws.DS_CRDS[0]).name])


def test_the_version_is_stamped_into_the_binary():
    flags = lws.ldflags(COMMIT)
    assert f"-X sigs.k8s.io/lws/pkg/version.GitCommit={COMMIT}" in flags
    assert flags.startswith("-s -w ")


# --- what the twin gives the controller ---------------------------------------------------------


def test_the_controller_config_keeps_everything_on_loopback_and_off_the_cluster(tmp_path):
    config = lws.controller_config(41234, tmp_path / "certs")
    assert config["apiVersion"] == "config.lws.x-k8s.io/v1alpha1" and config["kind"] == "Configuration"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 41234, "certDir": str(tmp_path / "certs")}
    # Their defaults (:8443, :8081) listen on every interface: both are switched off.
    assert config["metrics"]["bindAddress"] == "0"
    assert config["health"]["healthProbeBindAddress"] == "0"


MANIFESTS = """---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      {name: webhook-service, namespace: system, path: /mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset}
  failurePolicy: Fail
  name: mleaderworkerset.kb.io
  rules: [{apiGroups: [leaderworkerset.x-k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE],
           resources: [leaderworkersets]}]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-disaggregatedset-x-k8s-io-v1-disaggregatedset
  failurePolicy: Fail
  name: vdisaggregatedset.kb.io
  rules: [{apiGroups: [disaggregatedset.x-k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE],
           resources: [disaggregatedsets]}]
  sideEffects: None
"""
MUTATING_PATCH = """- op: replace
  path: /webhooks/1
  value:
    admissionReviewVersions: [v1]
    clientConfig:
      service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
    failurePolicy: Fail
    name: mpod.kb.io
    objectSelector:
      matchExpressions: [{key: leaderworkerset.sigs.k8s.io/name, operator: Exists}]
    rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
    sideEffects: None
"""
KUSTOMIZATION = """resources: [manifests.yaml, service.yaml]
patches:
- path: mutating-patch.yaml
  target: {group: admissionregistration.k8s.io, version: v1, kind: MutatingWebhookConfiguration,
           name: mutating-webhook-configuration}
"""


def _webhook_dir(tmp_path: Path, patch: str = MUTATING_PATCH) -> Path:
    directory = tmp_path / "webhook"
    directory.mkdir()
    (directory / "manifests.yaml").write_text(MANIFESTS)
    (directory / "mutating-patch.yaml").write_text(patch)
    (directory / "kustomization.yaml").write_text(KUSTOMIZATION)
    return directory


def test_webhook_configurations_call_the_controller_on_loopback_with_the_twins_ca(tmp_path):
    ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    configs = lws.webhook_configurations(_webhook_dir(tmp_path), "https://127.0.0.1:41234", ca)
    assert [(c["kind"], c["metadata"]["name"]) for c in configs] == [
        ("MutatingWebhookConfiguration", "lws-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "lws-validating-webhook-configuration"),
    ]
    hooks = {w["name"]: w for c in configs for w in c["webhooks"]}
    assert set(hooks) == {"mleaderworkerset.kb.io", "mpod.kb.io", "vdisaggregatedset.kb.io"}
    for webhook in hooks.values():
        client = webhook["clientConfig"]
        assert set(client) == {"url", "caBundle"}  # no service reference left
        assert client["url"].startswith("https://127.0.0.1:41234/")
        assert base64.b64decode(client["caBundle"]) == ca
        assert webhook["failurePolicy"] == "Fail"
    assert hooks["vdisaggregatedset.kb.io"]["clientConfig"]["url"].endswith(
        "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
    )
    # Upstream's patch narrows the pod webhook to LWS pods: nothing else in the twin goes through it.
    assert hooks["mpod.kb.io"]["objectSelector"] == {
        "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
    }
    # The source manifests are left as they were.
    assert "service" in yaml.safe_load_all(MANIFESTS).__next__()["webhooks"][0]["clientConfig"]


def test_an_unknown_webhook_patch_is_refused(tmp_path):
    directory = _webhook_dir(tmp_path, "- op: add\n  path: /webhooks/0/timeoutSeconds\n  value: 5\n")
    with pytest.raises(lws.BuildError, match="only `replace /webhooks/<i>`"):
        lws.webhook_configurations(directory, "https://127.0.0.1:1", b"ca")


# --- figure lines and the not-run path -----------------------------------------------------------

SHAPES = {
    "controller": r"^controller: pods created by the LWS controller (\d+)/(\d+)( .*)?$",
    "rollout": r"^rollout: decode minimum ready (\d+) of (\d+) instances, (\d+) s( .*)?$",
    "disruption": (
        r"^disruption: (\w+) second eviction refused \(HTTP 429\) while group (\S+) was down \(.+\)$"
    ),
    "node loss": r"^node loss: group (\S+) recreated .+$",
    "scale": r"^scale: (\w+) (\d+) -> (\d+) -> (\d+)( .*)?$",
}


def test_figure_lines_have_the_shapes_a_script_reads():
    lines = [
        lws_checks.controller_line(68, 68, "28 prefill in 7 groups of 4"),
        lws_checks.rollout_line(4, 5, 71.4, "planned minimum 4"),
        lws_checks.disruption_line("decode", "glm52-0-abcdef12-decode-3", "the first eviction ..."),
        lws_checks.node_loss_line("glm52-0-abcdef12-decode-3", "with a spare node: ..."),
        lws_checks.scale_line("prefill", 2, 3, "groups through ..."),
    ]
    for line, (word, shape) in zip(lines, SHAPES.items(), strict=True):
        assert line.startswith(f"{word}: ")
        assert re.match(shape, line), line
    assert re.match(SHAPES["controller"], lines[0]).groups()[:2] == ("68", "68")  # type: ignore[union-attr]
    assert re.match(SHAPES["rollout"], lines[1]).groups()[:3] == ("4", "5", "71")  # type: ignore[union-attr]
    assert re.match(SHAPES["disruption"], lines[2]).groups() == ("decode", "glm52-0-abcdef12-decode-3")  # type: ignore[union-attr]
    assert re.match(SHAPES["scale"], lines[4]).groups()[:4] == ("prefill", "2", "3", "2")  # type: ignore[union-attr]


def test_not_run_lines_name_every_figure_and_why():
    lines = lws_checks.not_run_lines("no source")
    assert lines == [
        f"{word}: not run: no source"
        for word in ("controller", "rollout", "disruption", "node loss", "scale")
    ]


def _state(components: list[str]) -> cluster.State:
    return cluster.State(stack="onprem-h100", ports={}, components=components)


def test_without_the_source_the_checks_say_not_run_and_the_stand_in_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(lws.SOURCE_ENV, str(tmp_path / "absent"))
    report = Report()
    kube: Any = None  # not reached: nothing is started without a source
    assert lws_checks.start_controller(_state(["etcd", "kube-apiserver", "kwok"]), kube, report) is None
    assert not report.failures  # a missing source is no failure: `make e2e` exits 0
    assert [line.split(": not run: ")[0] for line in report.lines] == list(SHAPES)
    assert all("LLMD_LWS_SOURCE" in line for line in report.lines)
    assert ("DisaggregatedSet pods", "made by the twin's stand-in for the LWS controller") in report.figures
    out = capsys.readouterr().out
    assert "\ncontroller: not run: " in "\n" + out  # printed at the start of a line


def test_api_server_only_says_not_run(monkeypatch):
    report = Report()
    kube: Any = None
    assert lws_checks.start_controller(_state(["etcd", "kube-apiserver"]), kube, report) is None
    assert all(": not run: API server only" in line for line in report.lines) and len(report.lines) == 5
    assert not report.failures


def test_an_unusable_snapshot_is_a_failure_and_the_stand_in_still_runs(monkeypatch, tmp_path):
    bad = tmp_path / "lws.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("go.mod"), io.BytesIO(b""))
    monkeypatch.setenv(lws.SOURCE_ENV, str(bad))
    report = Report()
    kube: Any = None
    assert lws_checks.start_controller(_state(["etcd", "kube-apiserver", "kwok"]), kube, report) is None
    assert report.failures and "not a `git archive` tarball" in report.failures[0]
    assert all(": not run: the LWS controller could not be built" in line for line in report.lines)


# --- pods, groups and owners (pure) --------------------------------------------------------------


def _pod(name: str, lws_name: str, group: int, index: int, ready: bool = True, owner: str = "sts-uid",
         deleting: bool = False) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {
            lws_checks.LWS_NAME: lws_name,
            lws_checks.GROUP_INDEX: str(group),
            lws_checks.WORKER_INDEX: str(index),
        },
        "ownerReferences": [{"kind": "StatefulSet", "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": "n"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_a_group_serves_only_with_every_pod_ready():
    pods = [_pod(f"d-0-{i}", "d", 0, i) for i in range(4)]
    pods += [_pod(f"d-1-{i}", "d", 1, i, ready=i != 2) for i in range(4)]
    pods += [_pod(f"d-2-{i}", "d", 2, i) for i in range(3)]  # incomplete
    pods += [_pod("d-3-0", "d", 3, 0, deleting=True)]
    pods += [_pod(f"p-0-{i}", "p", 0, i) for i in range(4)]
    roles = {"d": "decode", "p": "prefill"}
    assert lws_checks.ready_groups(pods, roles, "decode", 4) == 1
    assert lws_checks.ready_groups(pods, roles, "prefill", 4) == 1
    assert set(lws_checks.groups(pods)) == {("d", "0"), ("d", "1"), ("d", "2"), ("p", "0")}
    assert lws_checks.group_name(("d", "1")) == "d-1"


def test_pods_count_as_the_controllers_only_through_its_owner_chain():
    def obj(uid: str, kind: str, name: str, owner: tuple[str, str, str] | None) -> dict[str, Any]:
        refs = [{"kind": owner[0], "name": owner[1], "uid": owner[2], "controller": True}] if owner else []
        return {"kind": kind, "metadata": {"uid": uid, "name": name, "ownerReferences": refs}}

    ds = ("DisaggregatedSet", "glm52", "ds-uid")
    objects = [
        obj("lws-uid", "LeaderWorkerSet", "glm52-0-abc-decode", ds),
        obj(
            "leader-sts",
            "StatefulSet",
            "glm52-0-abc-decode",
            ("LeaderWorkerSet", "glm52-0-abc-decode", "lws-uid"),
        ),
        obj("leader-pod", "Pod", "glm52-0-abc-decode-0", ("StatefulSet", "x", "leader-sts")),
        obj(
            "worker-sts", "StatefulSet", "glm52-0-abc-decode-0", ("Pod", "glm52-0-abc-decode-0", "leader-pod")
        ),
    ]
    by_uid = {o["metadata"]["uid"]: o for o in objects}
    worker = _pod("glm52-0-abc-decode-0-1", "glm52-0-abc-decode", 0, 1, owner="worker-sts")
    leader = by_uid["leader-pod"]
    stray = _pod("made-by-hand", "glm52-0-abc-decode", 0, 2, owner="unknown")
    orphan = {"metadata": {"uid": "o", "name": "o"}}
    assert lws_checks.owned_by_set(worker, by_uid, "glm52")
    assert lws_checks.owned_by_set(leader, by_uid, "glm52")
    assert not lws_checks.owned_by_set(worker, by_uid, "other")
    assert not lws_checks.owned_by_set(stray, by_uid, "glm52")
    assert not lws_checks.owned_by_set(orphan, by_uid, "glm52")


def test_the_planned_minimum_is_replicas_less_max_unavailable():
    def spec(replicas: int, unavailable: Any) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": unavailable}},
        }

    assert lws_checks.planned_minimum(spec(5, 1)) == 4
    assert lws_checks.planned_minimum(spec(5, "30%")) == 4  # 1.5 rounded down
    assert lws_checks.planned_minimum(spec(1, 2)) == 0
    assert lws_checks.planned_minimum({"replicas": 3}) == 2  # LWS's default maxUnavailable is 1


def test_the_rollout_changes_the_decode_template_alone():
    ds: dict[str, Any] = {
        "spec": {
            "roles": [
                {"name": "prefill", "spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {}}}}},
                {"name": "decode", "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {}}}}},
            ]
        }
    }
    changed = lws_checks.decode_only_change(ds, "decode", "1")
    decode = changed["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert decode["metadata"]["annotations"] == {lws_checks.ROLLOUT_ANNOTATION: "1"}
    assert changed["spec"]["roles"][0] == ds["spec"]["roles"][0]
    assert "metadata" not in ds["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]


# --- disruption budgets and the Eviction API ----------------------------------------------------


def test_only_the_budgets_of_deployments_are_read_as_deployment_budgets() -> None:
    from devtools.twin.pods import deployment_budgets

    def pdb(name: str, labels: dict[str, str], namespace: str = "llm-d") -> dict[str, Any]:
        return {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
        }

    epp = {
        "kind": "Deployment",
        "metadata": {"name": "epp", "namespace": "llm-d"},
        "spec": {"template": {"metadata": {"labels": {"app": "epp", "tier": "router"}}}},
    }
    router = pdb("epp", {"app": "epp"})
    serving = pdb("glm52-decode", {lws_checks.DS_NAME: "glm52", lws_checks.DS_ROLE: "decode"})
    elsewhere = pdb("epp", {"app": "epp"}, namespace="other")
    assert deployment_budgets([epp, router, serving, elsewhere]) == [router]


class _EvictingKube:
    """Answers an eviction as the API server does: 201, or 429 with the budget's cause."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.sent.append((method, path, body))
        if self.refuse:
            raise ApiError(
                429,
                {
                    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                    "details": {
                        "causes": [{"reason": "DisruptionBudget", "message": "needs 39 healthy pods"}]
                    },
                },
                f"{method} {path}",
            )
        return {"kind": "Status", "status": "Success"}


def test_an_eviction_is_posted_to_the_pod_s_eviction_subresource_and_a_refusal_read() -> None:
    pod = {"metadata": {"name": "glm52-decode-3-5", "namespace": "llm-d"}}
    kube: Any = _EvictingKube(refuse=True)
    code, why = lws_checks.eviction(kube, pod)
    assert code == 429
    assert why == "Cannot evict pod as it would violate the pod's disruption budget.; needs 39 healthy pods"
    ((method, path, body),) = kube.sent
    assert (method, path) == ("POST", "/api/v1/namespaces/llm-d/pods/glm52-decode-3-5/eviction")
    assert body["apiVersion"] == "policy/v1" and body["kind"] == "Eviction" and "deleteOptions" not in body
    kube = _EvictingKube(refuse=False)
    assert lws_checks.eviction(kube, pod, dry_run=True) == (201, "")
    assert kube.sent[0][2]["deleteOptions"] == {"dryRun": ["All"]}


class _ListingKube:
    """Lists PodDisruptionBudgets as the API server does: items without apiVersion and kind."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        assert (api_version, kind, namespace) == ("policy/v1", "PodDisruptionBudget", "llm-d")
        return self.items


def test_a_role_s_budget_is_found_by_the_controller_labels_and_can_be_read_back() -> None:
    def item(name: str, role: str, set_name: str = "glm52") -> dict[str, Any]:
        labels = {lws_checks.DS_NAME: set_name, lws_checks.DS_ROLE: role}
        return {
            "metadata": {"name": name, "namespace": "llm-d"},
            "spec": {"selector": {"matchLabels": labels}},
        }

    ds = {
        "metadata": {"name": "glm52", "namespace": "llm-d"},
        "spec": {"roles": [{"name": "decode", "spec": {"leaderWorkerTemplate": {"size": 8}}}]},
    }
    kube: Any = _ListingKube([item("other-decode", "decode", "other"), item("glm52-decode", "decode")])
    fleet = lws_checks.Fleet(kube, ds)
    budget = fleet.budget("decode")
    assert budget is not None and budget["metadata"]["name"] == "glm52-decode"
    assert (budget["apiVersion"], budget["kind"]) == ("policy/v1", "PodDisruptionBudget")
    assert fleet.budget("prefill") is None
