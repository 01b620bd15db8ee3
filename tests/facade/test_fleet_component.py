"""The `llmd-fleet:index:Fleet` component: inputs generated from the config models, validation as a
stack file's, the inferred schema against its golden file, and (under the mock engine) the same
Kubernetes objects as the stack program for the same settings."""

import copy
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime import mocks

from devtools.twin import components
from llmd_fleet.cli.synth import RecordingMocks
from llmd_fleet.core.problems import PROJECT, ConfigError
from llmd_fleet.facade import inputs
from llmd_fleet.facade.component import PACKAGE, TYPE, Fleet, validate
from llmd_fleet.stack.model import SECRET_KEYS
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.stack.registry import KNOWN_KEYS, OBJECT_KEYS, OPTIONAL_OBJECT_KEYS
from tests.support import REPO, stack_raw_config, start_mock_engine

GOLDEN_SCHEMA = REPO / "tests" / "golden" / "components" / "schema.json"
STACK = "quickstart-h100"


def _properties() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(STACK))


def _wire(value: Any) -> Any:
    """What the engine hands the component: every number a double."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


# --- inputs generated from the config models ---------------------------------------------------------


def test_every_stack_key_is_an_input_and_nothing_else():
    args = inputs.load().FleetArgs
    assert set(args.__annotations__) == set(KNOWN_KEYS)
    # All optional: the component, not the provider host, says what is missing (as a stack file).
    assert args.__required_keys__ == frozenset()


@pytest.mark.parametrize("key", sorted({**OBJECT_KEYS, **OPTIONAL_OBJECT_KEYS}))
def test_each_section_has_every_field_of_its_model_by_its_stack_file_name(key):
    module = inputs.load()
    hints = module.FleetArgs.__annotations__
    section = hints[key]
    schema = inputs.config_schema()
    node = schema["properties"][key]
    ref = node.get("$ref") or next((o["$ref"] for o in node.get("anyOf", []) if "$ref" in o), None)
    if ref is None:  # the target: the kubeconfig kinds' fields together
        expected = set()
        for variant in node["oneOf"]:
            expected |= set(schema["$defs"][variant["$ref"].rsplit("/", 1)[-1]]["properties"])
    else:
        expected = set(schema["$defs"][ref.rsplit("/", 1)[-1]]["properties"])
    assert set(section.__annotations__) == expected


def test_a_new_config_key_reaches_the_inputs_without_an_edit():
    schema = inputs.config_schema()
    schema["properties"]["experiments"] = {
        "type": "object",
        "additionalProperties": {"$ref": "#/$defs/ModelConfig"},
        "description": "`llmd-fleet:experiments` (optional): served models by name.",
    }
    source = inputs.generate_source(schema)
    # Not yet a stack key: only KNOWN_KEYS become inputs. Once the config has it, it is one.
    assert "    experiments: dict[str, ModelConfig]" not in source
    known = {"experiments", *KNOWN_KEYS}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inputs, "KNOWN_KEYS", frozenset(known))
        source = inputs.generate_source(schema)
    assert "    experiments: dict[str, ModelConfig]" in source


def test_cloud_target_kinds_are_not_offered():
    source = inputs.generate_source()
    kind = source.split("class TargetConfig", 1)[1].split("kind: str", 1)[1].splitlines()[1]
    assert '\\"onprem\\", \\"local\\"' in kind and "gke" not in kind
    assert "class GkeTarget" not in source and "class EksTarget" not in source


# --- the schema ------------------------------------------------------------------------------------


def _canonical(node: Any, inside_element: bool = False) -> Any:
    """The schema as the Pulumi CLI prints it (`pulumi package get-schema`): it keeps no
    description on array items and map values, drops empty lists and an empty config."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if inside_element and key == "description":
                continue
            if value in ([], {}) and key in ("requiredInputs", "required", "dependencies", "config"):
                continue
            out[key] = _canonical(value, key in ("items", "additionalProperties"))
        return out
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    return node


def test_the_inferred_schema_equals_the_golden_file():
    provider = ComponentProvider([Fleet], PACKAGE, None, "0.0.0")
    inferred = json.loads(str(provider.schema))
    golden = json.loads(GOLDEN_SCHEMA.read_text())
    assert _canonical(inferred) == _canonical(golden), (
        "the Fleet component's schema changed: review it, then refresh the golden file with "
        "`python -m devtools.twin components --write-schema`"
    )
    resource = golden["resources"][TYPE]
    assert resource["isComponent"] is True
    assert set(resource["properties"]) == {"gatewayAddress", "pools", "namespaces"}
    assert set(resource["inputProperties"]) == set(KNOWN_KEYS)


# --- validation: the stack file's errors -------------------------------------------------------------


def test_quickstart_inputs_validate_as_the_stack_file():
    props = _properties()
    config, plan = validate(_wire({**props, "hfToken": "x", "kubeconfig": "y"}))
    expected = parse_config({**props, "hfToken": "", "kubeconfig": ""}, frozenset({"hfToken", "kubeconfig"}))
    assert config == expected
    assert plan.gpus == 16


def test_a_bad_input_gets_the_stack_files_error_naming_the_key():
    props = _properties()
    props["serving"]["roles"]["decode"]["maxModelLen"] = 10_000_000
    with pytest.raises(ConfigError) as from_stack:
        parse_config(props)
    with pytest.raises(ConfigError) as from_component:
        validate(_wire(props))
    assert str(from_component.value) == str(from_stack.value)
    assert f"{PROJECT}:serving.roles.decode.maxModelLen" in str(from_component.value)


def test_a_missing_section_and_an_unknown_field_are_named():
    props = _properties()
    del props["serving"]
    props["fleet"]["nodeGroups"]["h100"]["gpuCount"] = 8
    with pytest.raises(ConfigError) as error:
        validate(props)
    text = str(error.value)
    assert f"{PROJECT}:serving: required" in text
    assert f"{PROJECT}:fleet.nodeGroups.h100.gpuCount" in text


def test_a_cloud_kind_is_refused_in_one_line():
    props = _properties()
    props["target"] = {"kind": "gke", "kubernetesVersion": "1.34.2"}
    with pytest.raises(ConfigError) as error:
        validate(props)
    lines = str(error.value).splitlines()[1:]
    assert len(lines) == 1 and lines[0].strip().startswith(f"{PROJECT}:target.kind: the Fleet component")


def test_the_image_build_is_refused():
    props = _properties()
    props["images"] = {"build": True, "registry": "registry.lab:5000/ml"}
    with pytest.raises(ConfigError, match=f"{PROJECT}:images.build"):
        validate(props)


# --- the same objects as the stack program -----------------------------------------------------------


def test_the_component_declares_the_stack_programs_objects():
    props = _properties()
    secrets = {"hfToken": "hf_test", "kubeconfig": "apiVersion: v1\nkind: Config\n"}
    recorder = start_mock_engine(RecordingMocks(), project="llmd-fleet-yaml", stack=STACK)
    outputs: dict[str, Any] = {}

    def program() -> None:
        fleet = Fleet("fleet", _wire({**props, **secrets}))
        pulumi.Output.all(fleet.pools, fleet.namespaces).apply(lambda v: outputs.update(pools=v[0], ns=v[1]))

    mocks.test(program)()
    got = {
        components.identity(r.inputs): components.normalized(r.inputs)
        for r in recorder.created
        if r.custom and components._is_object(r.type) and "apiVersion" in r.inputs
    }
    secret_keys = [f"{PROJECT}:{key}" for key in secrets]
    config = {f"{PROJECT}:{k}": v for k, v in props.items()}
    expected = components.python_specs({**config, **dict.fromkeys(secret_keys, "placeholder")}, secret_keys)
    assert len(expected) > 20
    assert components.spec_differences(expected, got) == []
    assert outputs == {"pools": ["quickstart"], "ns": ["llm-d"]}
    # Every resource is the component's child, so its providers and aliases reach them.
    assert all(
        r.type == TYPE or r.type.startswith(("kubernetes:", "pulumi:", "llmd-fleet:"))
        for r in recorder.created
    )


def test_secrets_are_secret_whatever_the_program_passed():
    props = _properties()
    recorder = start_mock_engine(RecordingMocks(), project="llmd-fleet-yaml", stack=STACK)

    def program() -> None:
        Fleet("fleet", _wire({**props, "hfToken": "hf_plain"}))

    mocks.test(program)()
    token_secret = [r for r in recorder.created if r.type == "kubernetes:core/v1:Secret"]
    assert token_secret
    assert "hf_plain" not in json.dumps([components.normalized(r.inputs) for r in token_secret])


def test_spec_differences_names_what_differs():
    a = {("v1", "ConfigMap", "ns", "x"): {"data": {"k": "1"}, "kind": "ConfigMap"}}
    b = {
        ("v1", "ConfigMap", "ns", "x"): {"data": {"k": "2"}, "kind": "ConfigMap"},
        ("v1", "Secret", "ns", "s"): {},
    }
    assert components.spec_differences(a, b) == [
        "not in the Python program: v1/Secret/ns/s",
        "v1/ConfigMap/ns/x: differs in data",
    ]
    assert components.spec_differences(a, a) == []


def test_result_line_is_exact():
    assert (
        components.result_line("yaml", 41, 0, 0)
        == "component: yaml: 41 created, second up 0 changes, destroy 0 left"
    )


def test_yaml_program_passes_secrets_from_secret_config():
    program = components.yaml_program("p", {"serving": {"name": "q"}})
    props = program["resources"]["fleet"]["properties"]
    assert props["hfToken"] == "${hfToken}" and props["kubeconfig"] == "${kubeconfig}"
    assert program["config"]["hfToken"] == {"type": "string", "secret": True}
    assert program["resources"]["fleet"]["type"] == TYPE
    assert set(SECRET_KEYS) >= set(components.SECRET_INPUTS)


def test_provider_plugin_file_is_a_python_plugin():
    import yaml

    plugin = yaml.safe_load((REPO / "provider" / "PulumiPlugin.yaml").read_text())
    assert plugin["name"] == PACKAGE and plugin["runtime"]["name"] == "python"
    assert (REPO / "provider" / "__main__.py").is_file()
    assert Path(REPO / components.PROVIDER_DIR).resolve() == (REPO / "provider").resolve()


# --- the TypeScript program and the Node.js host -------------------------------------------------------


def test_typescript_program_pins_come_from_the_matrix(tmp_path):
    from llmd_fleet.versions import versions

    twin = versions().twin
    components.write_typescript(tmp_path, "p", {"serving": {"name": "q"}})
    manifest = json.loads((tmp_path / "package.json").read_text())
    assert manifest["dependencies"] == {"@pulumi/pulumi": twin.npm_pulumi}
    assert manifest["devDependencies"] == {
        "typescript": twin.npm_typescript,
        "ts-node": twin.npm_ts_node,
        "@types/node": twin.npm_types_node,
    }
    assert json.loads((tmp_path / "fleet.json").read_text()) == {"serving": {"name": "q"}}
    # What `pulumi package add` added survives a rewrite.
    manifest["dependencies"]["@pulumi/llmd-fleet"] = "file:sdks/llmd-fleet"
    (tmp_path / "package.json").write_text(json.dumps(manifest))
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: nodejs\npackages:\n  llmd-fleet: /x/provider\n")
    components.write_typescript(tmp_path, "p", {"serving": {"name": "r"}})
    assert json.loads((tmp_path / "package.json").read_text())["dependencies"]["@pulumi/llmd-fleet"] == (
        "file:sdks/llmd-fleet"
    )
    assert "llmd-fleet: /x/provider" in (tmp_path / "Pulumi.yaml").read_text()
    assert 'config.requireSecret("hfToken")' in (tmp_path / "index.ts").read_text()


def test_nodejs_host_builds_against_its_own_sdk_pin():
    from devtools.twin import nodejs_host
    from devtools.twin.modules import PULUMI_CLI, parse_requires
    from llmd_fleet.versions import versions

    pinned = nodejs_host.pins()
    twin = versions().twin
    assert pinned.sdk == twin.pulumi_language_nodejs_sdk != twin.pulumi_cli
    assert pinned.commit == twin.pulumi_language_python  # the same snapshot commit
    committed = (REPO / "devtools" / "twin" / "gomod" / "nodejs-host" / "go.mod").read_text()
    assert nodejs_host.RECIPE.wrapper_problems(pinned, committed) == []
    assert parse_requires(committed)[PULUMI_CLI] == pinned.sdk
    upstream = (
        "replace (\n\tgithub.com/pulumi/pulumi/sdk/v3 => ../../..\n"
        "\tgithub.com/a/b => github.com/c/b v1.0.0\n)\n"
    )
    generated = nodejs_host.RECIPE.wrapper_gomod(pinned, upstream)
    assert "github.com/a/b => github.com/c/b v1.0.0" in generated and "../../.." not in generated
    stale = committed.replace(pinned.sdk, twin.pulumi_cli)
    assert nodejs_host.RECIPE.wrapper_problems(pinned, stale)
