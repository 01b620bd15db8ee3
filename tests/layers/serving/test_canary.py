"""The canary revision (`serving.canary`, docs/day-two.md): a second DisaggregatedSet, picker and
InferencePool beside the stable ones, the HTTPRoute's weights, the surge the plan checks, what
bad values are refused with, and what `status` reads during a canary."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.main import guarded_run, run
from llmd_fleet.cli.status import read_status
from llmd_fleet.core.yaml_documents import yaml_documents
from llmd_fleet.layers.serving.canary import canary_config, canary_image
from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import STACKS_DIR, stack_raw_config

BASE = "local-sim"
DOCS = STACKS_DIR.parent / "docs"
POOL_KIND = ("inference.networking.k8s.io", "InferencePool")


def _stack_file(
    tmp_path: Path, nodes: int = 6, canary: dict[str, Any] | None = None, edits: dict[str, Any] | None = None
) -> Path:
    """local-sim with `nodes` kind nodes (it uses 3), `serving.canary` and top-level edits."""
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{BASE}.yaml").read_text())
    config = document["config"]
    config["llmd-fleet:fleet"]["nodeGroups"]["kind"]["count"] = nodes
    if canary is not None:
        config["llmd-fleet:serving"]["canary"] = canary
    for key, value in (edits or {}).items():
        config[f"llmd-fleet:{key}"] = {**config.get(f"llmd-fleet:{key}", {}), **value}
    path = tmp_path / f"Pulumi.{BASE}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _render(tmp_path: Path, name: str, stack: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out = tmp_path / name
    assert run(["render", str(stack), "--out", str(out)]) == 0
    objects = {}
    for path in sorted((out / "manifests").rglob("*.yaml")):
        for doc in yaml_documents(path.read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def _raw(canary: dict[str, Any] | None, nodes: int = 6) -> dict[str, Any]:
    raw = stack_raw_config(BASE)
    raw["fleet"]["nodeGroups"]["kind"]["count"] = nodes
    if canary is not None:
        raw["serving"]["canary"] = canary
    return raw


def test_the_canary_is_a_second_revision_and_the_stable_one_is_untouched(tmp_path: Path) -> None:
    without = _render(tmp_path, "without", _stack_file(tmp_path))
    canary = {"weight": 10, "modelRevision": "canary-1", "instances": {"prefill": 1, "decode": 1}}
    with_canary = _render(tmp_path / "c", "with", _stack_file(tmp_path, canary=canary))
    # Every object of the stable revision is rendered exactly as without a canary, but the route
    # and the stable decode's rollout surge: the canary took the spare nodes it would surge onto.
    # That field is outside the roles' leaderWorkerTemplate, which alone makes the revision (lws
    # v0.10.0 pkg/utils/disaggregatedset/utils.go ComputeRevision): no stable pod is replaced.
    for ident, obj in without.items():
        if ident == ("DisaggregatedSet", "glm52"):
            old, new = obj["spec"]["roles"], with_canary[ident]["spec"]["roles"]
            assert [r["spec"]["leaderWorkerTemplate"] for r in new] == [
                r["spec"]["leaderWorkerTemplate"] for r in old
            ]
            surge = [r["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] for r in new]
            assert surge == [{"maxSurge": 0, "maxUnavailable": 1}] * 2
            assert old[1]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
                "maxSurge": 1,
                "maxUnavailable": 0,
            }
        elif ident != ("HTTPRoute", "glm52"):
            assert with_canary[ident] == obj, ident
    added = sorted(set(with_canary) - set(without))
    assert ("DisaggregatedSet", "glm52-canary") in added
    assert ("InferencePool", "glm52-canary") in added
    assert ("Deployment", "glm52-canary-epp") in added
    assert ("NetworkPolicy", "glm52-canary-model-server") in added
    # No second namespace, token Secret, claim templates or objectives.
    assert not {kind for kind, _ in added} & {
        "Namespace",
        "Secret",
        "ResourceClaimTemplate",
        "InferenceObjective",
    }
    # Its pool selects its own pods only; its picker's rollout screener scopes to its own set.
    pool = with_canary[("InferencePool", "glm52-canary")]
    assert pool["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "glm52-canary"
    assert pool["spec"]["endpointPickerRef"]["name"] == "glm52-canary-epp"
    epp = yaml.safe_load(with_canary[("ConfigMap", "glm52-canary-epp-config")]["data"]["epp.yaml"])
    scopes = [
        p["parameters"]["scope"] for p in epp["plugins"] if p["type"] == "disaggregatedset-rollout-screener"
    ]
    assert scopes == [{"labelSelector": "disaggregatedset.x-k8s.io/name=glm52-canary"}]
    # The canary's revision: model.revision (the tokenizer downloads it) and its instances.
    tokenizer = with_canary[("Deployment", "glm52-canary-tokenizer")]
    assert "--revision=canary-1" in tokenizer["spec"]["template"]["spec"]["containers"][0]["args"]
    roles = {
        r["name"]: r["spec"]["replicas"]
        for r in with_canary[("DisaggregatedSet", "glm52-canary")]["spec"]["roles"]
    }
    assert roles == {"prefill": 1, "decode": 1}
    # The route: both pools, 90/10; without a canary one backend and no weight.
    refs = with_canary[("HTTPRoute", "glm52")]["spec"]["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"]) for r in refs] == [("glm52", 90), ("glm52-canary", 10)]
    assert [(r["group"], r["kind"]) for r in refs] == [POOL_KIND, POOL_KIND]
    assert without[("HTTPRoute", "glm52")]["spec"]["rules"][0]["backendRefs"] == [
        {"group": POOL_KIND[0], "kind": POOL_KIND[1], "name": "glm52"}
    ]


@pytest.mark.parametrize("weight", [0, 100])
def test_the_weights_at_both_ends(weight: int) -> None:
    from llmd_fleet.layers.gateway.component import backend_refs

    config = parse_config(_raw({"weight": weight}))
    assert [r["weight"] for r in backend_refs(config, "glm52")] == [100 - weight, weight]


def test_the_canary_config_changes_only_name_instances_and_revision() -> None:
    config = parse_config(_raw({"weight": 5, "modelRevision": "v2", "instances": {"decode": 2}}))
    canary = canary_config(config)
    assert canary is not None
    assert canary.serving.name == "glm52-canary" and canary.serving.canary is None
    assert canary.model.revision == "v2" and config.model.revision == "main"
    assert (canary.serving.roles.prefill.instances, canary.serving.roles.decode.instances) == (1, 2)
    assert canary.serving.roles.decode.data_parallel == config.serving.roles.decode.data_parallel
    assert canary.model_copy(update={"serving": config.serving, "model": config.model}) == config
    assert canary.router == config.router
    one = canary_config(parse_config(_raw({"weight": 5, "routerReplicas": 1})))
    assert one is not None and one.router.replicas == 1 and config.router.replicas == 2


def test_an_image_tag_canary_runs_the_pinned_image_of_that_tag() -> None:
    pinned = versions().image("inference-sim")
    config = parse_config(_raw({"weight": 5, "imageTag": pinned.tag}))
    assert canary_image(config) == pinned.ref
    assert canary_image(parse_config(_raw({"weight": 5}))) is None


def test_the_plan_shows_the_surge_and_refuses_a_canary_without_room(tmp_path: Path, capsys) -> None:
    plan = plan_fleet(parse_config(_raw({"weight": 10, "instances": {"prefill": 1, "decode": 1}}, nodes=6)))
    assert plan.canary is not None
    assert (plan.canary.nodes, plan.canary.gpus, plan.canary.weight) == (3, 0, 10)
    assert plan.canary.spare_nodes == {"kind": 3}
    # The stable decode surge counts what the canary leaves (none here).
    assert plan.role("decode").max_surge == 0
    with pytest.raises(PlanError) as refused:
        plan_fleet(parse_config(_raw({"weight": 10}, nodes=5)))
    ((path, message),) = refused.value.problems
    assert path == "llmd-fleet:serving.canary.instances"
    assert "node group kind" in message and "has 2 spare" in message and "add 1 nodes" in message
    # The CLI: the section in the plan, the object in --json, and exit 2 without room.
    assert run(["plan", str(_stack_file(tmp_path, canary={"weight": 10}))]) == 0
    out = capsys.readouterr().out
    assert "| traffic | 10% to glm52-canary, 90% to glm52 (HTTPRoute backendRefs weights) |" in out
    assert "| surge | prefill 1x1 + decode 1x2: 3 nodes, 0 GPUs above the stable 3 nodes, 0 GPUs |" in out
    assert run(["plan", str(_stack_file(tmp_path, canary={"weight": 10})), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["canary"]["weight"] == 10 and doc["canary"]["nodes"] == 3
    documented = set(re.findall(r"^\| `(canary[A-Za-z.]*)` \|", (DOCS / "plan-json.md").read_text(), re.M))
    assert {"canary"} | {f"canary.{k}" for k in doc["canary"]} == documented
    assert guarded_run(["plan", str(_stack_file(tmp_path, nodes=4, canary={"weight": 10}))]) == 2
    err = capsys.readouterr().err
    assert "llmd-fleet:serving.canary.instances: the canary needs 3 nodes of node group kind" in err


BAD: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]], str]] = {
    "weight above 100": ({"weight": 101}, {}, "llmd-fleet:serving.canary.weight: must be <= 100"),
    "negative weight": ({"weight": -1}, {}, "llmd-fleet:serving.canary.weight: must be >= 0"),
    "no weight": ({"modelRevision": "v2"}, {}, "llmd-fleet:serving.canary.weight:"),
    "unknown key": ({"weight": 5, "percent": 5}, {}, "llmd-fleet:serving.canary.percent:"),
    "no instances": (
        {"weight": 5, "instances": {"decode": 0}},
        {},
        "llmd-fleet:serving.canary.instances.decode:",
    ),
    "bad revision": ({"weight": 5, "modelRevision": "-x"}, {}, "llmd-fleet:serving.canary.modelRevision:"),
    "unpinned tag": (
        {"weight": 5, "imageTag": "v9.9.9"},
        {},
        "llmd-fleet:serving.canary.imageTag: must be a tag of ghcr.io/llm-d/llm-d-inference-sim pinned",
    ),
    "unverified gateway": (
        {"weight": 5},
        {"gateway": {"implementation": "istio"}},
        "llmd-fleet:serving.canary: needs gateway.implementation agentgateway (got istio)",
    ),
    "long name": (
        {"weight": 5},
        {"serving": {"name": "a" * 20}},
        "llmd-fleet:serving.canary: needs serving.name of at most 17 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_canary_values_are_refused_naming_the_key(case: str, tmp_path: Path, capsys) -> None:
    canary, edits, expected = BAD[case]
    assert guarded_run(["check", str(_stack_file(tmp_path, canary=canary, edits=edits))]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert expected in err, err


def _pod(set_name: str, role: str, revision: str, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{set_name}-{role}-{revision}",
            "labels": {
                "disaggregatedset.x-k8s.io/name": set_name,
                "disaggregatedset.x-k8s.io/role": role,
                "disaggregatedset.x-k8s.io/revision": revision,
            },
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_status_shows_pods_per_revision_per_role_and_the_split() -> None:
    config = parse_config(_raw({"weight": 25}))
    pods = [
        _pod("glm52", "prefill", "aaaa1111", True),
        _pod("glm52", "decode", "aaaa1111", True),
        _pod("glm52", "decode", "aaaa1111", True),
        _pod("glm52-canary", "prefill", "bbbb2222", True),
        _pod("glm52-canary", "decode", "bbbb2222", False),
    ]
    route = {
        "spec": {
            "rules": [
                {"backendRefs": [{"name": "glm52", "weight": 75}, {"name": "glm52-canary", "weight": 25}]}
            ]
        }
    }

    def read(path: str, params: dict[str, str] | None) -> Any:
        if path.endswith("/pods"):
            wanted = dict(kv.split("=") for kv in (params or {})["labelSelector"].split(","))
            return {"items": [p for p in pods if wanted.items() <= p["metadata"]["labels"].items()]}
        if path.endswith("/httproutes/glm52"):
            return route
        return None

    lines = read_status(read, config).lines()
    assert "revision   glm52 aaaa1111: prefill 1/1, decode 2/2 pods ready" in lines
    assert "revision   glm52-canary bbbb2222: prefill 1/1, decode 0/1 pods ready" in lines
    assert "traffic    glm52 75%, glm52-canary 25% (HTTPRoute glm52)" in lines
    # Steady state (one revision, no canary, one backend): neither line.
    pods[:] = pods[:3]
    route["spec"]["rules"][0]["backendRefs"] = [{"name": "glm52"}]
    lines = read_status(read, config).lines()
    assert not [line for line in lines if line.startswith(("revision", "traffic"))]
    # An upgrade in place: two revisions of the stable set.
    pods.append(_pod("glm52", "decode", "cccc3333", False))
    lines = read_status(read, config).lines()
    assert "revision   glm52 cccc3333: decode 0/1 pods ready" in lines
