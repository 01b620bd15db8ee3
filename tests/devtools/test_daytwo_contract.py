"""`make e2e`'s controller lines from the day-two replay (devtools/daytwo/contract.py), the
revisions by `pulumi up` (devtools/daytwo/deploy.py) and e2e's `--without-day-two-checks`. Pure:
`make day-two` and `make e2e` run them against the twin."""

import re
from pathlib import Path
from typing import Any

import pytest

from devtools import prebuild
from devtools.daytwo import contract, deploy
from devtools.twin import cluster, e2e, lws_checks, lws_steps
from devtools.twin import pods as twin_pods
from devtools.twin.engine_report import Step
from tests.devtools.test_twin_lws import SHAPES
from tests.support import REPO

LWS = lws_checks.LWS_NAME
GROUP = lws_checks.GROUP_INDEX


def _pod(name: str, lws: str, group: str, node: str, uid: str, owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid, "labels": {LWS: lws, GROUP: group}}
    if owner:
        meta["ownerReferences"] = [{"controller": True, "kind": "StatefulSet", "uid": owner}]
    return {"metadata": meta, "spec": {"nodeName": node}}


def _owned(kind: str, uid: str, owner_kind: str, owner_uid: str, owner_name: str) -> dict[str, Any]:
    ref = {"controller": True, "kind": owner_kind, "uid": owner_uid, "name": owner_name}
    return {"kind": kind, "metadata": {"uid": uid, "ownerReferences": [ref]}}


def test_the_controller_line_counts_only_pods_whose_owner_chain_ends_at_the_set() -> None:
    owners = [
        _owned("StatefulSet", "sts-p", "LeaderWorkerSet", "lws-p", "glm52-prefill"),
        _owned("LeaderWorkerSet", "lws-p", "DisaggregatedSet", "ds", "glm52"),
        _owned("StatefulSet", "sts-other", "LeaderWorkerSet", "lws-o", "other"),
        _owned("LeaderWorkerSet", "lws-o", "DisaggregatedSet", "ds2", "another-set"),
    ]
    pods = [
        _pod("p-0", "glm52-prefill", "0", "kind-001", "u0", owner="sts-p"),
        _pod("p-1", "glm52-prefill", "1", "kind-002", "u1", owner="sts-p"),
        _pod("stray", "other", "0", "kind-003", "u2", owner="sts-other"),
    ]
    line, created = contract.controller_line(
        pods, owners, "glm52", {"prefill": 3}, {"prefill": 1}, {"prefill": 2}, 61.6
    )
    assert created == 2
    assert line == (
        "controller: pods created by the LWS controller 2/3 (3 prefill in 2 groups of 1; 62 s to all Ready)"
    )
    assert re.match(SHAPES["controller"], line)


def test_the_rollout_line_is_e2e_s_format_with_the_replay_s_figures() -> None:
    replaced = contract.replaced_pods(
        {"a": "prefill", "b": "prefill", "c": "decode", "d": "prefill"},
        {"b", "new"},
        "decode",
        {"prefill": 3, "decode": 6},
    )
    assert replaced == {"prefill": (2, 3)}
    line = contract.rollout_line(3, 3, 3, 142.9, 180, True, replaced, "glm52-decode", 40)
    assert line == (
        "rollout: decode minimum ready 3 of 3 instances, 143 s (planned minimum 3; 180 samples; completed; "
        "2 of 3 prefill pods replaced (the controller's revision is one hash over every role's template, "
        "so a decode-only change rolls every role); PodDisruptionBudget glm52-decode allowed no eviction "
        "in 40 of 180 samples (a rollout deletes, it does not evict))"
    )
    assert re.match(SHAPES["rollout"], line)
    quiet = contract.rollout_line(2, 3, 3, 10, 5, False, {"prefill": (0, 3)}, None, 0)
    assert quiet.endswith("NOT completed; 0 of 3 prefill pods replaced; no PodDisruptionBudget for the role)")


def test_node_loss_lines_name_each_group_the_node_took_and_the_spare_nodes_it_went_to() -> None:
    before = [
        _pod("decode-2", "set-decode", "2", "kind-001", "d2"),
        _pod("decode-2-1", "set-decode", "2", "kind-008", "d21"),
        _pod("prefill-1", "set-prefill", "1", "kind-008", "p1"),
        _pod("decode-0", "set-decode", "0", "kind-002", "d0"),
    ]
    after = [
        _pod("decode-2", "set-decode", "2", "kind-010", "n1"),
        _pod("decode-2-1", "set-decode", "2", "kind-011", "n2"),
        _pod("prefill-1", "set-prefill", "1", "kind-001", "n3"),
        _pod("decode-0", "set-decode", "0", "kind-002", "d0"),
    ]
    lines = contract.node_loss_lines("kind-008", before, after, {"kind-010", "kind-011", "kind-012"}, 45.6)
    assert lines == [
        "node loss: group set-decode-2 recreated with a spare node: 2 pods replaced by 2 new ones after "
        "kind-008 was lost, all Ready in 46 s (2 on the spare kind-010, kind-011)",
        "node loss: group set-prefill-1 recreated with a spare node: 1 pods replaced by 1 new ones after "
        "kind-008 was lost, all Ready in 46 s (0 on the spare none)",
    ]
    assert all(re.match(SHAPES["node loss"], line) for line in lines)


def test_e2e_s_own_rollout_detail_is_unchanged_by_sharing_it() -> None:
    # docs/twin.md's recorded e2e line, rebuilt from its figures.
    detail = lws_checks.rollout_detail(4, 34, True, "decode", {"prefill": (28, 28)}, "glm52-decode", 15)
    assert lws_checks.rollout_line(4, 5, 62, detail) == (
        "rollout: decode minimum ready 4 of 5 instances, 62 s (planned minimum 4; 34 samples; completed; "
        "28 of 28 prefill pods replaced (the controller's revision is one hash over every role's template, "
        "so a decode-only change rolls every role); PodDisruptionBudget glm52-decode allowed no eviction "
        "in 15 of 34 samples (a rollout deletes, it does not evict))"
    )


def test_an_upgrade_by_pulumi_up_edits_decode_max_num_seqs_only() -> None:
    config = {"llmd-fleet:serving": {"roles": {"decode": {"maxNumSeqs": 32}, "prefill": {"maxNumSeqs": 8}}}}
    changed = deploy.with_decode_max_num_seqs(config, 24)
    assert changed["llmd-fleet:serving"]["roles"] == {
        "decode": {"maxNumSeqs": 24},
        "prefill": {"maxNumSeqs": 8},
    }
    assert config["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] == 32  # the engine's config kept


@pytest.mark.parametrize(
    ("counts", "problems"),
    [
        ({"update": 1, "same": 30}, []),
        ({"same": 31}, ["engine: update: no resource updated ({'same': 31})"]),
        (
            {"update": 1, "replace": 1, "same": 29},
            ["engine: update: 1 resources replaced (an upgrade updates in place)"],
        ),
    ],
)
def test_an_upgrade_must_update_in_place(counts: dict[str, int], problems: list[str]) -> None:
    assert deploy.upgrade_problems(Step("update", counts, 12.0)) == problems


def test_e2e_refuses_an_unknown_flag_naming_the_allowed_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert e2e.main(["onprem-h100", "--without-day-two"]) == 2
    assert capsys.readouterr().err == (
        "e2e: unknown flag --without-day-two (allowed: --apiserver-only, --keep, --no-engine, "
        "--without-day-two-checks)\n"
    )


def test_ci_runs_e2e_without_the_replayed_checks_and_the_replay_last_after_its_own_builds() -> None:
    steps = [
        line.removeprefix("step ").strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.startswith("step make")
    ]
    assert "make e2e E2E_ARGS=--without-day-two-checks" in steps and "make e2e" not in steps
    assert steps[-1].split(" DAYTWO_ARGS=")[0] == "make day-two"
    # The data-plane runs the replay replaces leave CI (nothing runs twice), and the replay runs
    # every phase: its routing figures with the overload wave, the multi-model and the precise
    # reference phases. The quickstart's own data-plane run stays.
    assert steps[-1] == "make day-two"
    replaced = [s for s in steps if s.split()[1] in ("dataplane-reference", "dataplane-broken")]
    assert replaced == [] and "make dataplane" not in steps
    assert "make dataplane DATAPLANE_STACK=quickstart-h100" in steps
    # The Go lane ends with the builds only the replay uses (its Prometheus and the operator's
    # config generator it starts with, then the external-metrics stand-in its scaling reads):
    # every Go tool an earlier step needs is built before them, so no step but the last waits on
    # the cache's lock for them.
    go_lane = [name for name, _ in prebuild.lanes()[1]]
    assert go_lane[-3:] == [
        "Prometheus",
        "prometheus-operator's config generator",
        "external-metrics stand-in",
    ]


def _prefill_pod(name: str, group: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {LWS: "glm52-0-abc-prefill", GROUP: group}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T21:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": f"kind-{name}"}}


def test_the_replay_s_scale_line_is_e2e_s_format_counting_the_groups_the_hpa_added() -> None:
    before = [_prefill_pod("p0", "0"), _prefill_pod("p1", "1"), _prefill_pod("p2", "2")]
    peak = [*before, _prefill_pod("p3", "3")]
    # The role back at 3; a pod of the removed group still terminating is not a group.
    after = [*before, _prefill_pod("p3", "3", deleting=True)]
    line = contract.scale_contract_line("prefill", before, peak, after, "glm52-prefill", 71.2, 128.6, 3)
    assert line == (
        "scale: prefill 3 -> 4 -> 3 groups through DisaggregatedSetRoleScaler glm52-prefill /scale "
        "written by the HPA controller: +1 group of 1 pods Ready in 71 s, removed in 129 s "
        "(the same groups remain; scaler status.replicas 3)"
    )
    assert re.match(SHAPES["scale"], line).groups()[:4] == ("prefill", "3", "4", "3")  # type: ignore[union-attr]
    stuck = contract.scale_contract_line("prefill", before, peak, peak, "glm52-prefill", 71.2, None, 4)
    assert "not removed (other groups remain; scaler status.replicas 4)" in stuck


def test_e2e_without_the_day_two_checks_leaves_the_scaling_to_the_replay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The External scaling runs in `make e2e` alone and not under --without-day-two-checks,
    where a figure names `make day-two` instead."""
    scaled: list[bool] = []

    class State:
        components = ("kwok",)

    monkeypatch.setattr(cluster, "state_path", lambda: tmp_path / "none")
    monkeypatch.setattr(cluster, "up", lambda *a, **k: State())
    monkeypatch.setattr(cluster, "down", lambda *a, **k: None)
    monkeypatch.setattr(cluster, "twin_dir", lambda: tmp_path)
    monkeypatch.setattr(cluster, "ready_nodes", lambda kube: 0)
    monkeypatch.setattr(e2e, "_crds", lambda kube, report: {})
    monkeypatch.setattr(e2e, "render", lambda stack, out: [])
    monkeypatch.setattr(e2e, "_apply_stack", lambda *a: None)
    monkeypatch.setattr(e2e, "_negative_controls", lambda *a: None)
    monkeypatch.setattr(e2e, "_status", lambda *a, **k: None)
    monkeypatch.setattr(twin_pods, "preflight", lambda *a: None)
    monkeypatch.setattr(twin_pods, "deployments", lambda *a: None)

    class Kube:
        def list(self, *a: Any) -> list[Any]:
            return []

    monkeypatch.setattr(cluster, "client", lambda **k: Kube())
    monkeypatch.setattr(lws_checks, "start_controller", lambda *a: object())
    monkeypatch.setattr(lws_steps, "held_back", lambda objects: [])
    monkeypatch.setattr(lws_steps, "serving", lambda *a: object())
    monkeypatch.setattr(lws_steps, "scale_stack", lambda *a: scaled.append(True))
    alone = e2e.run("onprem-h100", False, False, engine=False, day_two_checks=True)
    assert scaled == [True] and lws_checks.DAY_TWO_SCALE not in alone.figures
    in_ci = e2e.run("onprem-h100", False, False, engine=False, day_two_checks=False)
    assert scaled == [True] and lws_checks.DAY_TWO_SCALE in in_ci.figures
    assert "`make day-two`" in lws_checks.DAY_TWO_SCALE[1]
