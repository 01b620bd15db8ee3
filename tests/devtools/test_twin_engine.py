"""The engine run's pure parts (tools/twin/engine.py and the Pulumi wrapper modules): the committed
wrappers against the version matrix, the provider's generated embeds, the stack config and
secrets of the run, the secret search over a state, the `engine:` lines and their checks, and the
state edits before destroy. `make e2e` runs the engine itself."""

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from devtools.twin import build, engine, engine_report, modules
from llmd_fleet.versions import versions

# --- wrapper modules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "field"), [("pulumi", "pulumi_cli"), ("kubernetes-provider", "kubernetes_provider")]
)
def test_committed_engine_wrappers_match_the_version_matrix(name, field):
    """tools/twin/gomod/<name> was regenerated after the last bump of [twin] in the matrix."""
    wrapper = modules.wrappers()[name]
    assert wrapper.version == getattr(versions().twin, field)
    committed = (wrapper.directory / "go.mod").read_text()
    assert modules.wrapper_ok(wrapper, committed) == []
    assert modules.parse_requires(committed)[wrapper.module] == wrapper.version
    assert (wrapper.directory / "go.sum").read_text().strip(), "go.sum pins the checksums"
    for file, text in modules.wrapper_sources(wrapper).items():
        assert (wrapper.directory / file).read_text() == text


def test_the_cli_wrapper_pins_its_sdk_to_the_cli_version_and_keeps_upstreams_fork():
    wrapper = modules.wrappers()["pulumi"]
    cli = versions().twin.pulumi_cli
    assert wrapper.replaces == {"github.com/pulumi/pulumi/sdk/v3": cli}
    assert set(wrapper.forks) == {"github.com/atotto/clipboard"}
    assert wrapper.ldflags == (f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={cli}",)
    assert wrapper.reported_version == cli
    assert [b.package for b in wrapper.binaries] == ["github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"]


def test_the_provider_is_stamped_as_the_sdk_version_of_uv_lock():
    wrapper = modules.wrappers(plugin_version="9.8.7")["kubernetes-provider"]
    assert wrapper.ldflags == (f"-X {modules.KUBERNETES_PROVIDER}/pkg/version.Version=9.8.7",)
    assert wrapper.generate is not None
    assert list(wrapper.replaces) == ["github.com/pulumi/pulumi-kubernetes/sdk/v4"]
    default = modules.wrappers()["kubernetes-provider"]
    assert default.reported_version == modules.uv_lock_version("pulumi-kubernetes")
    # a plugin: never taken from PATH
    assert all(not b.version_args for b in default.binaries)


def test_a_plugin_without_version_arguments_is_never_taken_from_path(monkeypatch, tmp_path):
    fake = tmp_path / "pulumi-resource-kubernetes"
    fake.write_text("#!/bin/sh\necho 4.34.2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    binary = modules.Binary("pulumi-resource-kubernetes", "example.invalid/cmd", ())
    assert build.on_path(binary, "4.34.2") is None


def test_the_provider_key_differs_from_a_build_without_generated_embeds():
    wrapper = modules.wrappers()["kubernetes-provider"]
    files = {"go.mod": b"module x\n"}
    from dataclasses import replace

    assert build.build_key(wrapper, files, "go1.26.8") != build.build_key(
        replace(wrapper, generate=None), files, "go1.26.8"
    )


def test_provider_embeds_set_the_schema_version_in_the_module_copy(tmp_path):
    command = tmp_path / "module" / modules.PROVIDER_COMMAND
    command.mkdir(parents=True)
    (command / "schema.json").write_text(
        json.dumps({"name": "kubernetes", "version": "0.0.0", "x": [1, 2]}, indent=2)
    )
    (command / "terraform-mapping.json").write_text('{\n  "a": {"b": 1}\n}\n')
    written = modules.provider_embeds("4.34.2", tmp_path / "module")
    assert written == [command / "schema-embed.json", command / "terraform-mapping-embed.json"]
    schema = (command / "schema-embed.json").read_text()
    assert json.loads(schema) == {"name": "kubernetes", "version": "4.34.2", "x": [1, 2]}
    assert "\n" not in schema
    assert (command / "terraform-mapping-embed.json").read_text() == '{"a":{"b":1}}'


def test_a_wrapper_with_generated_files_builds_from_a_scratch_copy(monkeypatch, tmp_path):
    """The committed wrapper is copied under the target with a writable copy of the module and
    `replace <module> => ./module`; a wrapper without generated files builds where it is."""
    module = tmp_path / "cache" / "mod"
    (module / "cmd").mkdir(parents=True)
    (module / "cmd" / "schema.json").write_text("{}")
    (module / "cmd" / "schema.json").chmod(0o444)
    wrapper_dir = tmp_path / "wrapper"
    wrapper_dir.mkdir()
    (wrapper_dir / "go.mod").write_text(
        "module llmd-fleet.invalid/twin/x\n\ngo 1.26\n\nrequire example.invalid/m v1.0.0\n"
    )
    (wrapper_dir / "go.sum").write_text("")
    (wrapper_dir / "tools.go").write_text("package tools\n")
    monkeypatch.setattr(modules, "GOMOD_DIR", tmp_path)
    seen: list[Path] = []
    wrapper = modules.Wrapper(
        name="wrapper", module="example.invalid/m", version="v1.0.0", binaries=(), generate=seen.append
    )
    monkeypatch.setattr(build, "module_dir", lambda w: module)
    target = tmp_path / "target"
    target.mkdir()
    src = build.build_dir(wrapper, target)
    assert src == target / "src"
    assert seen == [src / "module"]
    assert (src / "module" / "cmd" / "schema.json").stat().st_mode & 0o200
    assert "replace example.invalid/m => ./module" in (src / "go.mod").read_text()
    assert "replace" not in (wrapper_dir / "go.mod").read_text(), "the committed wrapper is not changed"
    from dataclasses import replace

    assert build.build_dir(replace(wrapper, generate=None), target) == wrapper_dir


UPSTREAM = """module github.com/example/pkg/v3

go 1.25

replace github.com/example/sdk/v3 => ../sdk

replace github.com/atotto/clipboard => github.com/fork/clipboard v0.0.0-20240101000000-abcdef123456

replace example.invalid/guard => ./FORBIDDEN_DEPENDENCY

require (
	github.com/example/sdk/v3 v3.9.1
	github.com/atotto/clipboard v0.1.4 // indirect
)
"""


def test_upstream_pins_take_the_required_version_and_carry_forks():
    pins, forks = modules.upstream_pins(UPSTREAM)
    assert pins == {"github.com/example/sdk/v3": "v3.9.1"}
    assert forks == {
        "github.com/atotto/clipboard": ("github.com/fork/clipboard", "v0.0.0-20240101000000-abcdef123456")
    }
    wrapper = modules.Wrapper(
        name="x",
        module="github.com/example/pkg/v3",
        version="v3.9.1",
        binaries=(),
        replaces=pins,
        forks=forks,
    )
    text = modules.wrapper_gomod(wrapper)
    assert "\tgithub.com/example/sdk/v3 => github.com/example/sdk/v3 v3.9.1" in text
    assert (
        "\tgithub.com/atotto/clipboard => github.com/fork/clipboard v0.0.0-20240101000000-abcdef123456"
        in text
    )
    assert modules.wrapper_ok(wrapper, text) == []
    assert modules.wrapper_ok(modules.Wrapper(**{**wrapper.__dict__, "forks": {}}), text) != []


# --- stack config and secrets ----------------------------------------------------------------------


STACK: dict[str, Any] = {
    "config": {
        "llmd-fleet:target": {"kind": "onprem"},
        "serving": {"roles": {"decode": {"maxNumSeqs": 64}}},
        "llmd-fleet:responsesDbPassword": {"secure": "v1:placeholder"},
    }
}


def test_engine_config_copies_the_stack_drops_ciphertext_and_preinstalls_the_platform():
    config, secure = engine.engine_config(STACK)
    assert config == {
        "llmd-fleet:target": {"kind": "onprem", "platform": "preinstalled"},
        "llmd-fleet:serving": {"roles": {"decode": {"maxNumSeqs": 64}}},
    }
    assert secure == ["llmd-fleet:responsesDbPassword"]
    assert STACK["config"]["llmd-fleet:target"] == {"kind": "onprem"}, "the input is not changed"
    with pytest.raises(engine.EngineError):
        engine.engine_config({"config": None})


def test_sections_that_ask_for_a_chart_are_switched_to_the_clusters_own():
    config: dict[str, Any] = {
        "llmd-fleet:serving": {"autoscaling": {"keda": "install"}},
        "llmd-fleet:observability": {"prometheus": "install"},
    }
    assert engine.preinstalled_switches(config) == [
        "llmd-fleet:serving.autoscaling.keda: install -> preinstalled",
        "llmd-fleet:observability.prometheus: install -> operator",
    ]
    assert config["llmd-fleet:serving"]["autoscaling"]["keda"] == "preinstalled"
    assert engine.preinstalled_switches(config) == []
    assert engine.preinstalled_switches({"llmd-fleet:serving": {"roles": {}}}) == []


def test_a_stack_naming_a_context_is_pointed_at_the_twins():
    config: dict[str, Any] = {"llmd-fleet:target": {"kind": "local", "kubeconfigContext": "kind-llmd"}}
    switched = engine.twin_context(config, "current-context: llmd-fleet-twin\n")
    assert switched == ["llmd-fleet:target.kubeconfigContext: kind-llmd -> llmd-fleet-twin"]
    assert config["llmd-fleet:target"]["kubeconfigContext"] == "llmd-fleet-twin"
    assert engine.twin_context({"llmd-fleet:target": {"kind": "onprem"}}, "current-context: x\n") == []


def test_run_secrets_cover_the_kubeconfig_the_token_and_every_secure_key():
    values = engine.run_secrets(["llmd-fleet:responsesDbPassword"], "apiVersion: v1\n", lambda n: "x" * n)
    assert values == {
        "llmd-fleet:kubeconfig": "apiVersion: v1\n",
        "llmd-fleet:hfToken": "hf_" + "x" * 16,
        "llmd-fleet:responsesDbPassword": "x" * 24,
    }


def test_a_secret_is_found_plain_json_escaped_or_base64_and_ciphertext_is_not():
    secrets = {
        "a": "s3cr3t-value-0001",
        "b": "line one of a kubeconfig file\nclient-key-data: QUJDREVGR0hJSktMTU5PUFFSU1RVVg==\n",
    }
    assert engine.leaked_secrets('{"outputs": {"ciphertext": "v1:abc"}}', secrets) == []
    assert engine.leaked_secrets('{"password": "s3cr3t-value-0001"}', secrets) == ["a"]
    encoded = base64.b64encode(b"s3cr3t-value-0001").decode()
    assert engine.leaked_secrets(f'{{"data": {{"p": "{encoded}"}}}}', secrets) == ["a"]
    assert engine.leaked_secrets(json.dumps({"kubeconfig": secrets["b"]}), secrets) == ["b"]
    assert engine.leaked_secrets("client-key-data: QUJDREVGR0hJSktMTU5PUFFSU1RVVg==", secrets) == ["b"]


def test_the_update_halves_decode_max_num_seqs_and_leaves_the_input_alone():
    config, _ = engine.engine_config(STACK)
    changed, old, new = engine.with_update(config)
    assert (old, new) == (64, 32)
    assert changed["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] == 32
    assert config["llmd-fleet:serving"]["roles"]["decode"]["maxNumSeqs"] == 64
    one = {"llmd-fleet:serving": {"roles": {"decode": {"maxNumSeqs": 1}}}}
    assert engine.with_update(one)[1:] == (1, 2)


# --- the engine: lines -----------------------------------------------------------------------------


def test_step_lines_have_the_documented_shape_and_parse_back():
    lines = [
        engine_report.step_line(engine_report.Step("preview", {"create": 61}, 12.34)),
        engine_report.step_line(engine_report.Step("up", {"create": 61}, 48.0)),
        engine_report.step_line(engine_report.Step("second up", {"same": 61}, 9.8)),
        engine_report.step_line(engine_report.Step("update", {"update": 1, "same": 60}, 11.25)),
        engine_report.step_line(engine_report.Step("destroy", {"delete": 61}, 20.5, left=0)),
    ]
    assert lines == [
        "engine: preview 61 to create (12.3 s)",
        "engine: up 61 created (48.0 s)",
        "engine: second up 0 changes (9.8 s)",
        "engine: update 1 updated, 0 replaced (11.2 s)",
        "engine: destroy 61 deleted, 0 left (20.5 s)",
    ]
    assert engine_report.parse_step_line(lines[3]) == {"updated": 1, "replaced": 0, "seconds": 11.2}
    assert engine_report.parse_step_line(lines[4]) == {"deleted": 61, "left": 0, "seconds": 20.5}
    assert engine_report.step_failures(lines) == []
    with pytest.raises(ValueError):
        engine_report.parse_step_line("engine: up sixty created (1 s)")
    with pytest.raises(ValueError):
        engine_report.step_line(engine_report.Step("refresh", {}, 1))


def test_replacements_and_changes_are_counted_from_the_summary():
    step = engine_report.Step("update", {"update": 2, "replace": 1, "create-replacement": 1, "same": 5}, 1.0)
    assert step.changed == 4 and step.replaced == 2
    assert engine_report.step_line(step) == "engine: update 2 updated, 2 replaced (1.0 s)"


def test_step_failures_name_what_went_wrong():
    bad = [
        "engine: preview 10 to create (1.0 s)",
        "engine: up 10 created (1.0 s)",
        "engine: second up 2 changes (1.0 s)",
        "engine: update 1 updated, 1 replaced (1.0 s)",
        "engine: destroy 9 deleted, 1 left (1.0 s)",
    ]
    problems = engine_report.step_failures(bad)
    assert any("second up changed 2" in p for p in problems)
    assert any("replaced 1" in p for p in problems)
    assert any("left 1" in p for p in problems)
    assert engine_report.step_failures(bad[:2]) == [
        "engine: no second up step",
        "engine: no update step",
        "engine: no destroy step",
    ]
    assert "engine: the update changed nothing in place" in engine_report.step_failures(
        [
            *bad[:2],
            "engine: second up 0 changes (1.0 s)",
            "engine: update 0 updated, 0 replaced (1.0 s)",
            bad[4],
        ]
    )


# --- the state -------------------------------------------------------------------------------------


DEPLOYMENT: dict[str, Any] = {
    "resources": [
        {"urn": "urn:pulumi:s::llmd-fleet::pulumi:pulumi:Stack::llmd-fleet-s", "type": "pulumi:pulumi:Stack"},
        {
            "urn": "urn:pulumi:s::llmd-fleet::kubernetes:postgresql.cnpg.io/v1:Cluster::responses-db",
            "type": "kubernetes:postgresql.cnpg.io/v1:Cluster",
            "protect": True,
            "outputs": {
                "apiVersion": "postgresql.cnpg.io/v1",
                "kind": "Cluster",
                "metadata": {"name": "responses", "namespace": "llm-d"},
            },
        },
        {
            "urn": "urn:pulumi:s::llmd-fleet::kubernetes:core/v1:Namespace::ns",
            "type": "kubernetes:core/v1:Namespace",
            "outputs": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-d"}},
        },
        {
            "urn": "urn:pulumi:s::llmd-fleet::pulumi:providers:kubernetes::k8s",
            "type": "pulumi:providers:kubernetes",
        },
    ]
}


def test_protected_resources_are_listed():
    assert engine_report.protected_urns(DEPLOYMENT) == [DEPLOYMENT["resources"][1]["urn"]]
    assert engine_report.protected_urns({"resources": []}) == []


def test_the_kubernetes_objects_of_a_state():
    assert engine_report.kubernetes_objects(DEPLOYMENT) == [
        {
            "apiVersion": "postgresql.cnpg.io/v1",
            "kind": "Cluster",
            "metadata": {"name": "responses", "namespace": "llm-d"},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-d"}},
    ]


def test_an_installed_plugin_of_the_sdk_version_is_preferred(tmp_path):
    binary = tmp_path / "home" / "plugins" / "resource-kubernetes-v4.5.6" / "pulumi-resource-kubernetes"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    assert engine.installed_plugin("4.5.6", [tmp_path / "other", tmp_path / "home"]) is None
    binary.chmod(0o755)
    assert engine.installed_plugin("4.5.6", [tmp_path / "other", tmp_path / "home"]) == binary
    assert engine.installed_plugin("4.5.7", [tmp_path / "home"]) is None


def test_an_unknown_stack_is_one_clear_error(capsys):
    assert engine.main(["no-such-stack"]) == 2
    err = capsys.readouterr().err
    assert "no-such-stack" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("twin engine:")]) == 1


def test_a_cloud_stack_is_refused_with_one_clear_error(capsys):
    assert engine.main(["gke-h100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kind gke" in err and "Traceback" not in err
