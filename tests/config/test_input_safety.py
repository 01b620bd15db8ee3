"""Bad input of every class is refused with one clear message, and nothing the config accepts can
change what the container runs (docs/bad-input.md lists the classes and what the user sees)."""

import copy
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from devtools.vllm_check.extract import launch, stub_bin
from llmd_fleet.cli.main import run
from llmd_fleet.cli.outdir import OUTPUT_MARKER
from llmd_fleet.config.errors import unit_of
from llmd_fleet.config.grammar import (
    DEFAULT_HOST_DATA_ROOT,
    git_revision_problem,
    hf_repo_id_problem,
    host_path_problem,
    served_name_problem,
)
from llmd_fleet.config.model import ModelConfig
from llmd_fleet.config.vllm_registry import REASONING_PARSERS, TOOL_CALL_PARSERS
from llmd_fleet.core.problems import ConfigError, Problem
from llmd_fleet.layers.serving.vllm import SCRIPT_VARIABLES, launch_script, vllm_serve_argv
from llmd_fleet.plan.fleet import KV_EVENTS_PORT, plan_fleet
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.parse import parse_config
from tests.support import REFERENCE_STACK, REPO, STACKS_DIR, config_problems, stack_raw_config

# --- One message per class of bad input, naming the key -------------------------------------------


def _problems(edit) -> list[Problem]:
    raw = copy.deepcopy(stack_raw_config())
    edit(raw)
    return config_problems(raw)


def _set(path: str, value: Any):
    """An edit that sets `section.a.b` of the raw config."""

    def edit(raw: dict[str, Any]) -> None:
        section, *keys = path.split(".")
        node = raw.setdefault(section, {})
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value

    return edit


BAD_VALUES = [
    # Strings that reach the launch script.
    ("model.revision", "${HOSTNAME}$(touch /tmp/x)", "branch or tag name"),
    ("model.revision", "main; rm -rf /", "branch or tag name"),
    ("model.revision", "../main", "branch or tag name"),
    ("model.revision", "-main", "branch or tag name"),
    ("model.id", "zai-org/GLM 5", "Hugging Face repository id"),
    ("model.id", "zai-org/GLM`id`", "Hugging Face repository id"),
    ("model.id", "zai-org/GLMé", "Hugging Face repository id"),
    ("model.servedName", "glm\nINJECTED", "1-128 characters"),
    ("model.servedName", "glm $(id)", "1-128 characters"),
    ("model.toolCallParser", "glm47 --enforce-eager", "tool-call parser the pinned vLLM registers"),
    ("model.reasoningParser", "no-such-parser", "reasoning parser the pinned vLLM registers"),
    # Labels, names, headers.
    ("fleet.nodeGroups.h100.nodeLabels", {"bad key!": "x"}, "label key"),
    ("fleet.nodeGroups.h100.nodeLabels", {"ok": "value with spaces"}, "label value"),
    ("fleet.nodeGroups.h100.nodeLabels", {"-x.io/a": "b"}, "prefix"),
    ("fleet.nodeGroups.h100.nicDeviceClass", "Bad_Class", "DNS-1123 subdomain"),
    ("router.sessionAffinity.header", "x session id", "lowercase HTTP header name"),
    ("router.sessionAffinity.header", "X-Session-Id", "lowercase HTTP header name"),
    # Host paths.
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "/"}, "normalised path"),
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "../../etc"}, "normalised path"),
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "/var/lib/kubelet/x"}, "below a data root"),
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "/etc"}, "below a data root"),
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "/mnt/a/../b"}, "normalised path"),
    ("serving.kvTier.secondary", {"type": "local-nvme", "path": "/mnt/kv/"}, "normalised path"),
    ("serving.kvTier.secondary", {"type": "pvc", "storageClass": "../Bad Class"}, "DNS-1123 subdomain"),
    # Numbers: upper bounds with the unit, no infinity or NaN.
    ("router.expectedRequestsPerSecond", 1e9, "<= 400 requests per second"),
    ("fleet.nodeGroups.h100.hostMemoryGiB", 10**20, "<= 32768 GiB"),
    ("router.expectedRequestsPerSecond", float("inf"), "finite number"),
    ("model.totalParamsB", float("nan"), "finite number"),
    ("serving.roles.decode.maxNumSeqs", 10**9, "<= 65536 sequences"),
]


@pytest.mark.parametrize(
    ("path", "value", "expected"), BAD_VALUES, ids=[f"{p}={v!r}" for p, v, _ in BAD_VALUES]
)
def test_each_bad_value_is_refused_naming_its_key(path, value, expected):
    problems = _problems(_set(path, value))
    section, *keys = path.split(".")
    key_path = f"llmd-fleet:{section}." + ".".join(keys)
    matching = [message for where, message in problems if where.startswith(key_path)]
    assert matching, problems
    assert any(expected in message for message in matching), matching


def test_a_gke_node_pool_name_longer_than_gke_allows_is_refused():
    raw = stack_raw_config("gke-h100")
    long_name = "g" * 41
    raw["fleet"]["nodeGroups"] = {long_name: raw["fleet"]["nodeGroups"].pop("h100")}
    raw["target"]["gke"]["nodePools"] = {long_name: raw["target"]["gke"]["nodePools"].pop("h100")}
    for role in raw["serving"]["roles"].values():
        role["nodeGroup"] = long_name
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert any(
        where == f"llmd-fleet:target.gke.nodePools.{long_name}" and "at most 40 characters" in message
        for where, message in caught.value.problems
    ), caught.value.problems


def test_dangerous_strings_are_refused_by_every_grammar():
    for text in ("$(id)", "${HOME}", "`id`", "a b", "a\nb", "a'b", 'a"b', "a\\b", "a;b", ""):
        assert git_revision_problem(text), text
        assert served_name_problem(text), text
        assert hf_repo_id_problem(f"org/{text}"), text


def test_commit_ids_refs_and_hub_revisions_are_accepted():
    for revision in (
        "main",
        "v1.2.0",
        "refs/pr/12",
        "release/2026-10",
        "a" * 40,
        "0123456789abcdef" * 2 + "01234567",
    ):
        assert git_revision_problem(revision) is None, revision


def test_host_paths_are_below_data_roots_only():
    assert all(host_path_problem(path) for path in ("/var/lib/kubelet/x", "/etc/kv", "/proc/x/y"))
    assert host_path_problem(f"{DEFAULT_HOST_DATA_ROOT}/kv-cache") is None


# --- Numbers: every one bounded above, with a unit ---------------------------------------------------


def _config_models(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[type[BaseModel]]:
    if model in seen:
        return []
    seen.add(model)
    found = [model]
    for field in model.model_fields.values():
        for inner in _flatten(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found += _config_models(inner, seen)
    return found


def _flatten(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in typing.get_args(annotation):
        out += _flatten(arg)
    return out


def _upper_bounded(field: Any) -> bool:
    if any(isinstance(m, annotated_types.Le | annotated_types.Lt) for m in field.metadata):
        return True
    for arg in _flatten(field.annotation):
        if typing.get_origin(arg) is typing.Literal:
            return True
        for meta in getattr(arg, "__metadata__", ()):
            inner = getattr(meta, "metadata", [meta])
            if any(isinstance(m, annotated_types.Le | annotated_types.Lt) for m in inner):
                return True
    return False


def test_every_numeric_field_has_an_upper_bound_and_a_unit():
    numeric = []
    for model in _config_models(StackConfig, set()):
        for name, field in model.model_fields.items():
            kinds = _flatten(field.annotation)
            if bool in kinds or not any(kind in (int, float) for kind in kinds):
                continue
            numeric.append(f"{model.__name__}.{field.alias or name}")
            assert _upper_bounded(field), f"{model.__name__}.{field.alias or name} has no upper bound"
            assert unit_of(field.alias or name), f"{model.__name__}.{field.alias or name} has no unit"
    assert len(numeric) > 40  # the walk reached every section


# --- Stack files: duplicate keys, infinities, the command line's exit --------------------------------


def _stack_text(tmp_path: Path, text: str, name: str = REFERENCE_STACK) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    (stacks / f"Pulumi.{name}.yaml").write_text(text)
    return stacks


def test_duplicate_yaml_keys_are_refused_naming_the_key_and_both_lines(tmp_path, capsys):
    text = (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  llmd-fleet:model:")) + 1
    text += "  llmd-fleet:model:\n    id: other/model\n"
    second = len(lines) + 1
    stacks = _stack_text(tmp_path, text)
    assert run(["--stacks-dir", str(stacks), "plan", REFERENCE_STACK]) == 2
    err = capsys.readouterr().err
    assert f"duplicate key 'llmd-fleet:model' at lines {first} and {second}" in err


def test_duplicate_keys_nested_in_one_section_are_refused(tmp_path, capsys):
    stacks = _stack_text(tmp_path, "config:\n  llmd-fleet:router:\n    replicas: 2\n    replicas: 3\n")
    assert run(["--stacks-dir", str(stacks), "plan", REFERENCE_STACK]) == 2
    assert "duplicate key 'replicas' at lines 3 and 4" in capsys.readouterr().err


def test_yaml_infinity_is_refused_without_a_traceback(tmp_path, capsys):
    text = (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text()
    text += "  llmd-fleet:router:\n    expectedRequestsPerSecond: .inf\n"
    stacks = _stack_text(tmp_path, text)
    assert run(["--stacks-dir", str(stacks), "plan", REFERENCE_STACK]) == 2
    err = capsys.readouterr().err
    assert "llmd-fleet:router.expectedRequestsPerSecond: must be a finite number" in err


def test_a_config_error_prints_only_the_error(tmp_path):
    """One process end to end: exit 2, the message, no traceback and no asyncio noise."""
    stacks = _stack_text(tmp_path, "config: {}\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmd_fleet.cli.main",
            "--stacks-dir",
            str(stacks),
            "check",
            REFERENCE_STACK,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONWARNINGS": "default"},
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: invalid stack configuration:",
        "  llmd-fleet:target: required",
        "  llmd-fleet:fleet: required",
        "  llmd-fleet:model: required",
        "  llmd-fleet:serving: required",
    ]
    assert not out.exists()


# --- The output directory: only one the command owns is replaced -------------------------------------


def test_out_refuses_a_directory_it_did_not_write_and_changes_nothing(tmp_path, capsys):
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "notes.txt").write_text("keep me")
    assert run(["render", REFERENCE_STACK, "--out", str(work)]) == 2
    assert "is not a directory this command wrote" in capsys.readouterr().err
    assert sorted(p.name for p in work.iterdir()) == [".git", "notes.txt"]
    assert (work / "notes.txt").read_text() == "keep me"


def test_out_writes_a_new_or_empty_directory_and_replaces_its_own(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(["render", REFERENCE_STACK, "--out", str(empty)]) == 0
    assert (empty / OUTPUT_MARKER).is_file() and (empty / "summary.md").is_file()
    (empty / "manifests" / "stale.yaml").write_text("left from an earlier render")
    assert run(["render", REFERENCE_STACK, "--out", str(empty)]) == 0
    assert not (empty / "manifests" / "stale.yaml").exists()
    # Nothing but the output itself is left beside it (no staging or previous copies).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_out_refuses_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert run(["render", REFERENCE_STACK, "--out", str(target)]) == 2
    assert target.read_text() == "x"


# --- Secrets: every secret key set, the output valid and free of secret values ----------------------


def test_every_secret_key_renders_valid_objects_without_its_value(tmp_path, capsys):
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text())
    config = document["config"]
    config["llmd-fleet:hfToken"] = {"secure": "v1:hfCIPHERTEXT"}
    config["llmd-fleet:kubeconfig"] = {"secure": "v1:kubeCIPHERTEXT"}
    config["llmd-fleet:registryPassword"] = {"secure": "v1:regCIPHERTEXT"}
    config["llmd-fleet:images"] = {
        "build": True,
        "registry": "registry.lab:5000/ml",
        "registryUsername": "robot",
    }
    stacks = _stack_text(tmp_path, yaml.safe_dump(document))
    out = tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", REFERENCE_STACK, "--out", str(out)]) == 0
    from llmd_fleet.cli.check import check_manifests

    count, findings = check_manifests(out / "manifests", "1.34.2", [])
    assert findings == [] and count > 20
    secret = yaml.safe_load((out / "manifests/llm-d/secret-llm-d-hf-token.yaml").read_text())
    assert secret["stringData"] == {"HF_TOKEN": "[secret]"}
    rendered = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"CIPHERTEXT" not in rendered and b"offline-render-placeholder" not in rendered
    assert b"robot" not in rendered  # the registry login travels as one secret


# --- Nothing the config accepts changes the argv the launch script passes to vLLM --------------------


_POD_ENV = {"LWS_WORKER_INDEX": "3", "LWS_LEADER_ADDRESS": "10.1.2.3", "POD_IP": "10.9.8.7", "HOME": "/root"}


def _expected_argv(argv: list[str], dp_local: int) -> list[str]:
    start = int(_POD_ENV["LWS_WORKER_INDEX"]) * dp_local
    values = {
        "START_RANK": str(start),
        "KV_EVENTS_BASE": str(KV_EVENTS_PORT - start),
        "LWS_LEADER_ADDRESS": _POD_ENV["LWS_LEADER_ADDRESS"],
        "POD_IP": _POD_ENV["POD_IP"],
    }
    out = []
    for word in argv:
        for name in SCRIPT_VARIABLES:
            word = word.replace("${" + name + "}", values[name])
        out.append(word)
    return out


@pytest.fixture(scope="module")
def reference():
    config = parse_config(stack_raw_config())
    return config, plan_fleet(config)


_REVISIONS = st.one_of(
    st.from_regex(r"[0-9a-f]{40}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9._/-]{1,60}", fullmatch=True),
    st.text(min_size=1, max_size=40),
)
_NAMES = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,60}", fullmatch=True), st.text(max_size=40))
_REPO_IDS = st.one_of(
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,30}/[A-Za-z0-9_][A-Za-z0-9_.-]{0,30}", fullmatch=True),
    st.text(min_size=3, max_size=40),
)


# Most drawn strings are hostile and refused by the model (that is the point), so a large share of
# examples is filtered out: the filter health check would fail at random on a loaded machine.
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(
    revision=_REVISIONS,
    served=_NAMES,
    model_id=_REPO_IDS,
    tool=st.one_of(st.none(), st.sampled_from(sorted(TOOL_CALL_PARSERS)), st.text(max_size=30)),
    reasoning=st.one_of(st.none(), st.sampled_from(sorted(REASONING_PARSERS)), st.text(max_size=30)),
)
def test_no_accepted_string_changes_the_argv_vllm_gets(
    reference, revision, served, model_id, tool, reasoning
):
    config, plan = reference
    fields = {
        **config.model.model_dump(by_alias=True),
        "id": model_id,
        "revision": revision,
        "servedName": served,
        "toolCallParser": tool,
        "reasoningParser": reasoning,
    }
    try:
        model = ModelConfig.model_validate(fields)
    except ValidationError:
        assume(False)
        return
    role_plan = plan.role("decode")
    role = config.serving.roles.decode
    script = launch_script(model, role, role_plan, config.serving.kv_tier).script
    with stub_bin() as bin_dir:
        argv, _ = launch(["/bin/bash", "-c", script], _POD_ENV, bin_dir)
    expected = _expected_argv(
        vllm_serve_argv(model, role, role_plan, config.serving.kv_tier), role_plan.dp_size_local
    )
    assert list(argv) == expected
