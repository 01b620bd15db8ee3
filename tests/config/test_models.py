"""`llmd-fleet:models`: several models behind one gateway. The reference stack parses into one
view per model; bad entries and adapters are refused naming their key, exit 2."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.plan.fleet import PlanError
from llmd_fleet.stack.model import model_views
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.stack.plans import plan_model_shares
from tests.support import problems_by_key, stack_raw_config

MULTI = "onprem-h100-multimodel"


@pytest.fixture
def multi_raw() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(MULTI))


def test_multimodel_stack_has_one_view_per_model(multi_raw):
    config = parse_config(multi_raw)
    views = model_views(config)
    assert [v.serving.name for v in views] == ["glm52", "subagent"]
    assert [v.model.id for v in views] == ["zai-org/GLM-5.2-FP8", "deepseek-ai/DeepSeek-V2-Lite-Chat"]
    # The sub-agent model is sized for its own traffic, the main model for the stack's.
    assert views[0].workload == config.workload
    assert views[1].workload.agents == 48
    assert [a.name for a in views[1].model.lora_adapters] == ["team-review", "team-sql"]
    assert all(not v.models for v in views)
    # The first model stands in the single-model sections.
    assert config.serving.name == "glm52" and config.model == views[0].model


def test_single_model_view_is_the_config_itself(raw_config):
    config = parse_config(raw_config)
    assert model_views(config) == (config,)
    assert config.models == ()


def _entry(raw: dict[str, Any], index: int) -> dict[str, Any]:
    entry: dict[str, Any] = raw["models"][index]
    return entry


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda r: _entry(r, 1).update(name="glm52"), "llmd-fleet:models[1].name", "already models[0].name"),
        (lambda r: _entry(r, 1)["serving"].update(name="x"), "llmd-fleet:models[1].serving.name", "not set"),
        (
            lambda r: _entry(r, 1)["serving"].update(namespace="other"),
            "llmd-fleet:models[1].serving.namespace",
            "models[0]'s namespace 'llm-d'",
        ),
        (
            lambda r: _entry(r, 1)["serving"]["roles"]["decode"].update(instances=0),
            "llmd-fleet:models[1].serving.roles.decode.instances",
            ">= 1 instances",
        ),
        (
            lambda r: _entry(r, 1)["model"]["loraAdapters"][0].update(rank=12),
            "llmd-fleet:models[1].model.loraAdapters[0].rank",
            "8, 16, 32",
        ),
        (
            lambda r: _entry(r, 1)["model"]["loraAdapters"][1].update(name="team-review"),
            "llmd-fleet:models[1].model.loraAdapters[1].name",
            "already served",
        ),
        (
            lambda r: _entry(r, 1)["model"]["loraAdapters"][0].update(source="not a repo"),
            "llmd-fleet:models[1].model.loraAdapters[0].source",
            "Hugging Face repository id",
        ),
        (
            lambda r: _entry(r, 1)["model"]["loraAdapters"][0].pop("revision"),
            "llmd-fleet:models[1].model.loraAdapters[0].revision",
            "required",
        ),
        (
            lambda r: _entry(r, 1)["serving"]["roles"]["prefill"].pop("all2allBackend"),
            "llmd-fleet:models[1].serving.roles.prefill.all2allBackend",
            "allgather_reducescatter",
        ),
        (lambda r: _entry(r, 0).update(color="red"), "llmd-fleet:models[0].color", "unknown key"),
        (lambda r: r.update(models=[]), "llmd-fleet:models", "at least 1"),
        (lambda r: r.update(model={}), "llmd-fleet:model", "not with llmd-fleet:models"),
        (
            lambda r: r.update(observability={"prometheus": "install"}),
            "llmd-fleet:observability.prometheus",
            "must not be install",
        ),
        (
            lambda r: r.update(gateway={"implementation": "istio"}),
            "llmd-fleet:gateway.implementation",
            "must be agentgateway",
        ),
        (
            lambda r: _entry(r, 1)["serving"].update(
                canary={"weight": 10, "modelRevision": "0123456789abcdef0123456789abcdef01234567"}
            ),
            "llmd-fleet:models[1].serving.canary",
            "not yet with several models",
        ),
    ],
    ids=[
        "duplicate-name",
        "serving-name",
        "namespace",
        "instances",
        "rank",
        "adapter-name",
        "adapter-source",
        "adapter-revision",
        "lora-ep-all2all",
        "unknown-key",
        "empty",
        "single-model-section",
        "prometheus-install",
        "istio",
        "canary",
    ],
)
def test_bad_models_entries_name_their_key(multi_raw, edit, key, words):
    edit(multi_raw)
    problems = problems_by_key(multi_raw)
    assert key in problems, problems
    assert words in problems[key], problems[key]


def test_a_stack_that_does_not_fit_names_models_and_node_group(multi_raw):
    multi_raw["fleet"]["nodeGroups"]["h100"]["count"] = 69
    with pytest.raises(PlanError) as info:
        plan_model_shares(parse_config(multi_raw))
    ((key, message),) = info.value.problems
    assert key == "llmd-fleet:fleet.nodeGroups.h100.count"
    assert message.startswith(
        "the models need 70 nodes of node group h100 (glm52 68, subagent 2) but it has 69"
    )


def test_each_model_is_planned_on_its_share(multi_raw):
    shares = plan_model_shares(parse_config(multi_raw))
    assert [(s.name, s.client_name, s.adapters) for s in shares] == [
        ("glm52", "zai-org/GLM-5.2-FP8", ()),
        ("subagent", "deepseek-v2-lite-chat", ("team-review", "team-sql")),
    ]
    assert [s.plan.nodes for s in shares] == [68, 2]
    # Each sees only the nodes the other models leave: the sub-agent's 2 of the group's 70.
    assert [u.nodes for u in shares[1].plan.node_groups] == [2]


def test_cli_refuses_a_bad_entry_with_exit_2(tmp_path: Path, capsys, multi_raw):
    document = yaml.safe_load(Path(f"stacks/Pulumi.{MULTI}.yaml").read_text())
    document["config"]["llmd-fleet:models"][1]["model"]["loraAdapters"][0]["rank"] = 7
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(document))
    assert run(["--stacks-dir", str(tmp_path), "plan", "bad"]) == 2
    err = capsys.readouterr().err
    assert "llmd-fleet:models[1].model.loraAdapters[0].rank: must be one of 1, 8, 16" in err
    assert "Traceback" not in err


def test_placeholder_adapters_are_refused_for_deploy(capsys):
    assert run(["check", MULTI, "--for-deploy"]) == 2
    err = capsys.readouterr().err
    for index in (0, 1):
        assert f"error: llmd-fleet:models[1].model.loraAdapters[{index}].source is a placeholder" in err


def test_adapters_need_a_model_the_plan_describes(multi_raw):
    model = _entry(multi_raw, 1)["model"]
    model["id"] = "example-org/undescribed-moe"
    with pytest.raises(PlanError) as info:
        plan_model_shares(parse_config(multi_raw))
    problems = dict(info.value.problems)
    assert "only for a model with a card" in problems["llmd-fleet:models[1].model.loraAdapters"]


def test_every_models_picker_pair_must_fit_the_cpu_pool():
    from llmd_fleet.plan.system_nodes import allocatable, node_shape, picker_pairs_problems, pool_of

    gke = parse_config(stack_raw_config("gke-h100"))
    pool = pool_of(gke)
    assert pool is not None
    where, machine, nodes = pool
    shape = node_shape(machine)
    assert shape is not None
    _, memory = allocatable(shape)
    fits = [("a", 2, 1, 1), ("b", 2, 1, 1)]
    assert picker_pairs_problems(gke, fits) == []
    # One model alone is the single-model rule's (plan/fleet.py); the onprem pool is unknown.
    assert picker_pairs_problems(gke, fits[:1]) == []
    assert picker_pairs_problems(parse_config(stack_raw_config("onprem-h100")), fits) == []
    too_many = picker_pairs_problems(gke, [("a", nodes + 1, 1, 1), ("b", 2, 1, 1)])
    assert [p.key for p in too_many] == [where]
    assert f"model a's {nodes + 1} endpoint-picker replicas need {nodes + 1} nodes" in too_many[0].message
    per_replica = int(memory * nodes / 4) + 1  # four replicas in all: more than the pool holds
    ((problem_key, message),) = picker_pairs_problems(
        gke, [("a", 2, 1, per_replica), ("b", 2, 1, per_replica)]
    )
    assert problem_key == where and "the models' endpoint pickers request" in message


def test_a_model_list_longer_than_a_gateway_direct_response_is_refused(multi_raw):
    # GET /v1/models is answered by the gateway from the rendered list (agentgateway's direct
    # response takes at most 4096 bytes): 16 adapters with long names do not fit.
    adapters = multi_raw["models"][1]["model"]["loraAdapters"]
    template = adapters[0]
    adapters[:] = [
        {
            **template,
            "name": f"team-{i:02d}-" + "a" * 90,
            "source": f"example-org/adapter-{i:02d}-" + "b" * 60,
        }
        for i in range(16)
    ]
    problems = problems_by_key(multi_raw)
    assert list(problems) == ["llmd-fleet:models"]
    assert "make a" in problems["llmd-fleet:models"] and "at most 4096 bytes" in problems["llmd-fleet:models"]
    # Two adapters of the same shape fit.
    adapters[2:] = []
    parse_config(multi_raw)
