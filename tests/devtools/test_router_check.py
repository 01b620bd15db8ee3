"""The router checker's driver (devtools/router_check): the conversations it sends for a
rendered config, how it judges the checker's answers, and the wrapper module it builds. The
checker itself runs the pinned router's code and needs its source (`make check-router`)."""

import io
import tarfile

import pytest
import yaml

from devtools import source_snapshot
from devtools.router_check.build import (
    SourceMissing,
    ensure,
    router_tag,
    wrapper_files,
    wrapper_problem,
)
from devtools.router_check.check import (
    ROLLOUT,
    ROLLOUT_REQUESTS,
    TURNS,
    conversations,
    evaluate,
    rollout_input,
    rollout_problems,
    screener_scope,
    without_gating,
)
from devtools.router_check.check import main as check_main
from devtools.source_snapshot import SnapshotError, SnapshotMissing
from llmd_fleet.layers.router.epp_config import build_epp_config
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config

TOKENIZER = "http://glm52-tokenizer.llm-d.svc:8000"


def _config(raw_config, **router):
    raw_config["router"] = router
    config = parse_config(raw_config)
    epp = build_epp_config(config, plan_fleet(config), TOKENIZER)
    return epp.model_dump(by_alias=True, exclude_none=True)


def _turns(routed, preferred, token=True):
    """A conversation's answer: the first turn unbound, the later ones preferring `preferred`."""
    headers = {"x-session-token": "ZGVjb2RlLTA="} if token else {}
    first = {"routed": routed, "preferred": {"session-affinity-scorer": ""}, "responseHeaders": headers}
    later = {
        "routed": routed,
        "preferred": {"session-affinity-scorer": preferred},
        "responseHeaders": headers,
    }
    return [first] + [later] * (TURNS - 1)


def _result(convs, preferred_for=lambda c: "decode-0"):
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "plugins": [
            {"name": "agent-identity", "type": "agent-identity"},
            {"name": "session-affinity-scorer", "type": "session-affinity-scorer"},
            {"name": "session-token-scorer", "type": "session-affinity-scorer"},
        ],
        "conversations": {c.name: _turns("decode-0", preferred_for(c)) for c in convs},
        **_rollout_result(),
    }


def test_reference_conversations_carry_real_agent_headers(raw_config):
    convs = {c.name: c for c in conversations(_config(raw_config))}
    assert convs["claude-code"].headers.keys() == {"x-claude-code-session-id"}
    assert convs["codex"].headers.keys() == {"session-id"}
    assert convs["opencode"].headers.keys() == {"x-session-affinity"}
    assert all(
        convs[n].keyed for n in ("claude-code", "codex", "codex-legacy", "opencode", "header-x-session-id")
    )
    assert not convs["no-session"].keyed


def test_without_agent_identity_agent_headers_are_no_key(raw_config):
    convs = {c.name: c for c in conversations(_config(raw_config, sessionAffinity={"agentIdentity": False}))}
    assert not convs["claude-code"].keyed and convs["header-x-session-id"].keyed


def test_cookie_conversation(raw_config):
    convs = {c.name: c for c in conversations(_config(raw_config, sessionAffinity={"cookie": "llmd_s"}))}
    assert convs["cookie-llmd_s"].headers == {"cookie": "theme=dark; llmd_s=sess-77"}


def test_evaluate_passes_pinned_turns_and_fails_everything_else(raw_config):
    config = _config(raw_config)
    convs = conversations(config)
    assert evaluate("s", config, convs, _result(convs)) == []
    # A later turn that the session key does not keep on the first turn's endpoint.
    drift = _result(convs, lambda c: "decode-1" if c.name == "codex" else "decode-0")
    assert [p for p in evaluate("s", config, convs, drift) if "codex:" in p]
    assert evaluate("s", config, convs, {"loaderError": "strict decoding error"}) == [
        "s: the router's config loader refuses the config: strict decoding error"
    ]
    broken = _result(convs)
    broken["plugins"][0]["error"] = 'json: unknown field "x"'
    assert evaluate("s", config, convs, broken) == [
        's: plugin agent-identity (agent-identity): json: unknown field "x"'
    ]
    untokened = _result(convs)
    for name in untokened["conversations"]:
        untokened["conversations"][name][0]["responseHeaders"] = {}
    assert all("no session token" in p for p in evaluate("s", config, convs, untokened))


def test_wrapper_requires_the_pinned_router():
    files = wrapper_files()
    assert wrapper_problem(router_tag(), files) is None
    assert wrapper_problem("v9.9.9", files) is not None


def test_no_source_is_not_run_and_says_why(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LLMD_ROUTER_SOURCE", str(tmp_path / "absent"))
    with pytest.raises(SourceMissing, match="does not exist"):
        ensure()
    assert check_main(["onprem-h100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("router check: not run: ") and "all pass" not in out


def test_a_tarball_that_is_no_git_archive_is_refused(tmp_path):
    plain = tmp_path / "llm-d-router-v9.9.9.tar.gz"
    with tarfile.open(plain, "w:gz") as tar:
        info = tarfile.TarInfo("go.mod")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SnapshotError, match="not a `git archive` tarball") as refused:
        source_snapshot.find("LLMD_NO_SUCH_VARIABLE", plain.name, "v9.9.9", shared=tmp_path)
    # Present but unusable is a failure, not a check that could not run.
    assert not isinstance(refused.value, SnapshotMissing)


def test_a_prefixed_git_archive_unpacks_to_the_repository_root(tmp_path):
    commit = "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26"
    archive = tmp_path / "llm-d-router-v9.9.9.tar.gz"
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as tar:
        folder = tarfile.TarInfo("llm-d-router-v9.9.9")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        body = b"module github.com/llm-d/llm-d-router\n"
        info = tarfile.TarInfo("llm-d-router-v9.9.9/go.mod")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    snapshot = source_snapshot.find("LLMD_NO_SUCH_VARIABLE", archive.name, "v9.9.9", shared=tmp_path)
    snapshot.export(tmp_path / "router-src")
    assert (tmp_path / "router-src" / "go.mod").read_bytes() == body
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name, "router-src"]


def test_a_git_archive_tarball_gives_its_commit_and_unpacks_safely(tmp_path):
    commit = "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26"
    archive = tmp_path / "llm-d-router-v9.9.9.tar.gz"
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as tar:
        body = b"module github.com/llm-d/llm-d-router\n"
        info = tarfile.TarInfo("go.mod")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        escape = tarfile.TarInfo("../outside")
        escape.size = 1
        tar.addfile(escape, io.BytesIO(b"x"))
    snapshot = source_snapshot.find("LLMD_NO_SUCH_VARIABLE", archive.name, "v9.9.9", shared=tmp_path)
    assert snapshot.commit == commit and len(snapshot.digest) == 64
    with pytest.raises(tarfile.OutsideDestinationError):
        snapshot.export(tmp_path / "src")
    assert not (tmp_path / "outside").exists()


def _rollout_result(**overrides):
    """What the checker returns when the screener does its job on `ROLLOUT`."""
    steps = []
    for name, _, allowed in ROLLOUT:
        share = ROLLOUT_REQUESTS // max(1, len(allowed))
        steps.append(
            {
                "name": name,
                "failClosed": 0 if allowed else ROLLOUT_REQUESTS,
                "mixed": 0,
                "revisions": {rev: share for rev in sorted(allowed)},
            }
        )
    for name, change in overrides.items():
        next(s for s in steps if s["name"] == name).update(change)
    return {"rollout": steps}


def test_rollout_check_passes_a_screener_that_never_pairs_revisions():
    assert rollout_problems("s", _rollout_result()) == []


@pytest.mark.parametrize(
    ("step", "change", "expected"),
    [
        ("both covered", {"mixed": 3}, "3 requests saw two revisions"),
        ("old decode gone", {"failClosed": 0, "revisions": {"a": 200}}, "did not fail closed"),
        ("both covered", {"revisions": {"a": 200, "b": 0}}, "served revisions ['a']"),
        ("steady", {"failClosed": 5}, "(5 failed closed)"),
    ],
)
def test_rollout_check_fails_each_way_a_screener_can_go_wrong(step, change, expected):
    problems = rollout_problems("s", _rollout_result(**{step: change}))
    assert len(problems) == 1 and expected in problems[0] and step in problems[0]


def test_rollout_steps_are_labelled_as_the_controller_labels_pods(raw_config):
    config = _config(raw_config)
    scope = screener_scope(config)
    assert scope == {"disaggregatedset.x-k8s.io/name": raw_config["serving"]["name"]}
    pods = [p for step in rollout_input(scope) for p in step["pods"]]
    assert all(p["labels"]["disaggregatedset.x-k8s.io/name"] == raw_config["serving"]["name"] for p in pods)
    assert {p["labels"]["disaggregatedset.x-k8s.io/role"] for p in pods} == {"prefill", "decode"}
    gated = yaml.safe_load(without_gating(yaml.safe_dump(config)))
    screener = next(p for p in gated["plugins"] if p["type"] == "disaggregatedset-rollout-screener")
    assert screener["parameters"]["revisionGating"] == {"mode": "disabled"}
