"""Object identity (docs/bad-input.md): every rendered object's (apiVersion, kind, namespace, name)
is unique, checked before anything is written; a config that declares one object twice is refused
naming the settings that collide."""

import copy
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmd_fleet.cli.render import object_identity_problems
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.cli.synth import Synthesis, synthesize_validated
from llmd_fleet.plan.fleet import plan_fleet
from tests.support import REPO, STACKS_DIR

# The stack with the most sections: autoscaling (KEDA installed) and the Responses layer.
STACK = "onprem-h100-autoscale"


@pytest.fixture(scope="module")
def synthesis() -> Synthesis:
    stack_file = read_stack_file(STACKS_DIR, STACK)
    config = stack_config(stack_file)
    return synthesize_validated(stack_file, config, plan_fleet(config))


def test_every_stack_object_is_unique(synthesis):
    assert object_identity_problems(synthesis) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_object_declared_twice_is_refused_before_output(synthesis, data):
    """Across the class: whichever rendered object a second declaration repeats (under another
    logical name, as two sections would), the render names it and refuses."""
    kubernetes = [r for r in synthesis.resources if r.custom and r.type.startswith("kubernetes:")]
    original = data.draw(st.sampled_from(kubernetes))
    twin = dataclasses.replace(original, name=f"{original.name}-twin")
    declared = dataclasses.replace(synthesis, resources=(*synthesis.resources, twin))
    problems = object_identity_problems(declared)
    assert len(problems) == 1
    name = (original.inputs.get("metadata") or {}).get("name") or original.inputs.get("name")
    assert str(name) in problems[0][1] and "must be unique" in problems[0][1]


def _edited_stack(tmp_path: Path, edit: Any) -> Path:
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    config = copy.deepcopy(document)
    edit(config["config"])
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(config))
    return stacks


def _set(section: str, path: tuple[str, ...], value: str) -> Any:
    def edit(config: dict[str, Any]) -> None:
        node = config[f"llmd-fleet:{section}"]
        for name in path[:-1]:
            node = node[name]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "keys", "obj"),
    [
        (
            _set("serving", ("autoscaling", "kedaNamespace"), "llm-d"),
            "llmd-fleet:serving.autoscaling.kedaNamespace, llmd-fleet:serving.namespace",
            "Namespace llm-d",
        ),
        (
            _set("responses", ("name",), "glm52"),
            "llmd-fleet:responses.name, llmd-fleet:serving.name",
            "HTTPRoute llm-d/glm52",
        ),
        (
            _set("responses", ("name",), "glm52-epp"),
            "llmd-fleet:responses.name, llmd-fleet:serving.name",
            "Deployment llm-d/glm52-epp",
        ),
    ],
    ids=["keda-namespace-is-serving-namespace", "responses-name-is-serving-name", "responses-is-the-epp"],
)
def test_two_sections_declaring_one_object_exit_2_naming_both_keys(tmp_path, edit, keys, obj):
    out = tmp_path / "build"
    out.mkdir()
    (out / "keep.txt").write_text("earlier output\n")
    (out / ".llmd-fleet-render").write_text("")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = subprocess.run(
        [
            *(sys.executable, "-m", "llmd_fleet.cli.main"),
            *("--stacks-dir", str(_edited_stack(tmp_path, edit)), "render", STACK, "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2, result.stderr
    problem_lines = result.stderr.splitlines()[1:]
    assert len(problem_lines) == 1 and problem_lines[0].strip().startswith(f"{keys}: ")
    assert obj in problem_lines[0] and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
