"""The real Python language host's pure parts (devtools/twin/python_host.py) and what the engine
run and the quickstart walk read of it (devtools/twin/engine.py): the committed wrapper against the
version matrix, the wrapper go.mod made from upstream's, a missing snapshot, the host's line from
`pulumi about`, and the policy pack's line from the engine's events. `make e2e`, `make engine` and
`make quickstart-twin` run the host itself."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from devtools import source_snapshot
from devtools.twin import engine, engine_report, modules, python_host
from llmd_fleet.versions import versions

ROOT = Path(__file__).resolve().parents[2]

UPSTREAM_GOMOD = """module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3

go 1.25.11

replace (
\tgithub.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
\tgithub.com/pulumi/pulumi/pkg/v3 => ../../../../pkg
\tgithub.com/pulumi/pulumi/sdk/v3 => ../../..
)

require (
\tgithub.com/pulumi/pulumi/pkg/v3 v3.243.0
\tgithub.com/pulumi/pulumi/sdk/v3 v3.259.0
)
"""

# --- the wrapper module ---------------------------------------------------------------------------


def test_the_host_builds_against_the_clis_sdk_and_pkg_from_the_pinned_commit():
    twin = versions().twin
    pinned = python_host.pins()
    assert pinned.sdk == twin.pulumi_cli
    tarball = f"pulumi-language-python-{twin.pulumi_language_python[:7]}.tar.gz"
    assert python_host.RECIPE.tarball(pinned) == tarball
    committed = (modules.GOMOD_DIR / python_host.NAME / "go.mod").read_text()
    assert python_host.RECIPE.wrapper_problems(pinned, committed) == []
    requires = modules.parse_requires(committed)
    assert requires[modules.PULUMI_CLI] == requires[python_host.PULUMI_SDK] == twin.pulumi_cli
    assert (modules.GOMOD_DIR / python_host.NAME / "go.sum").read_text().strip()


def test_the_host_reports_its_sources_version_not_the_clis():
    pinned = python_host.pins()
    assert pinned.version == versions().twin.pulumi_language_python_version
    assert pinned.version != versions().twin.pulumi_cli.lstrip("v")


def test_the_wrapper_drops_upstreams_local_replaces_and_keeps_its_fork():
    pinned = python_host.Pins("0123456789abcdef0123456789abcdef01234567", "9.8.0-dev", "v3.999.0")
    gomod = python_host.RECIPE.wrapper_gomod(pinned, UPSTREAM_GOMOD)
    assert modules.parse_replaces(gomod) == {
        "github.com/atotto/clipboard": (
            "github.com/tgummerer/clipboard",
            "v0.0.0-20241001131231-d02d263e614e",
        )
    }
    assert modules.parse_requires(gomod) == {
        modules.PULUMI_CLI: "v3.999.0",
        python_host.PULUMI_SDK: "v3.999.0",
    }
    assert python_host.RECIPE.wrapper_problems(pinned, gomod) == []


def test_a_wrapper_left_at_another_version_is_named():
    pinned = python_host.Pins("0123456789abcdef0123456789abcdef01234567", "9.8.0-dev", "v3.999.0")
    stale = python_host.RECIPE.wrapper_gomod(pinned, UPSTREAM_GOMOD).replace("v3.999.0", "v3.998.0")
    problems = python_host.RECIPE.wrapper_problems(pinned, stale)
    assert problems == [
        f"python-host: requires {modules.PULUMI_CLI} v3.998.0, the matrix pins v3.999.0",
        f"python-host: requires {python_host.PULUMI_SDK} v3.998.0, the matrix pins v3.999.0",
    ]


def test_without_the_snapshot_the_host_is_missing_not_broken(monkeypatch, tmp_path):
    monkeypatch.setenv(python_host.SOURCE_ENV, str(tmp_path / "absent.tar.gz"))
    with pytest.raises(source_snapshot.SnapshotMissing):
        python_host.ensure(verbose=False)
    assert issubclass(python_host.SnapshotMissing, source_snapshot.SnapshotError)


# --- the host's line ------------------------------------------------------------------------------

# The shape `pulumi about --json` ([twin].pulumi-cli) printed for this project with the host built here.
ABOUT = {
    "plugins": [
        {"name": "kubernetes", "version": "4.34.2", "kind": "resource"},
        {"name": "python", "version": "9.8.0-dev", "kind": "language"},
    ],
    "runtime": {
        "executable": "/tmp/copy/.venv/bin/python",
        "language": "python",
        "toolchain": "Uv",
        "toolchainVersion": "0.13.9",
        "typechecker": "Mypy",
        "version": "3.11.7",
    },
}
HOST = python_host.Host(
    Path("/cache/bin"), python_host.BINARY, "9.8.0-dev", "0123456789abcdef0123456789abcdef01234567", None
)
PROJECT = {"toolchain": "uv", "virtualenv": ".venv", "typechecker": "mypy"}


def test_the_host_line_names_version_source_toolchain_and_typechecker():
    about = python_host.about_host(json.dumps(ABOUT))
    assert about == {"version": "9.8.0-dev", "toolchain": "uv", "typechecker": "mypy"}
    assert python_host.host_line(about, HOST.commit) == (
        "engine: language host pulumi-language-python 9.8.0-dev (from source 0123456), "
        "toolchain uv, typechecker mypy: ok"
    )
    assert python_host.host_problems(HOST, about, PROJECT) == []


def test_a_host_that_ignored_the_projects_options_or_is_another_version_fails():
    other = {
        "plugins": [{"name": "python", "version": "3.999.0", "kind": "language"}],
        "runtime": {"toolchain": "Pip", "typechecker": "None"},
    }
    problems = python_host.host_problems(HOST, python_host.about_host(json.dumps(other)), PROJECT)
    assert problems == [
        "the CLI ran pulumi-language-python '3.999.0' (`pulumi about`), the matrix pins 9.8.0-dev",
        "pulumi-language-python: toolchain 'pip' in `pulumi about`, Pulumi.yaml asks for 'uv'",
        "pulumi-language-python: typechecker 'none' in `pulumi about`, Pulumi.yaml asks for 'mypy'",
    ]
    assert python_host.about_host(json.dumps({"plugins": []})) == {}
    assert len(python_host.host_problems(HOST, {}, PROJECT)) == 3


def test_the_project_asks_for_uv_and_mypy():
    options = engine.project_runtime_options(engine.project_file(ROOT))
    assert options["toolchain"] == "uv" and options["typechecker"] == "mypy"
    assert engine.project_runtime_options({"runtime": "python"}) == {}


def test_the_uv_environment_freezes_the_lock_and_shares_the_callers_cache():
    env = python_host.uv_env({"UV_CACHE_DIR": "/shared/uv", "HOME": "/fresh"})
    assert env == {"UV_FROZEN": "1", "UV_CACHE_DIR": "/shared/uv"}


# --- the policy pack's line -----------------------------------------------------------------------


def _events(*events: dict) -> str:
    return "\n".join(json.dumps({"sequence": i, "timestamp": 0, **e}) for i, e in enumerate(events))


def test_policy_counts_come_from_the_engines_events():
    log = (
        _events(
            {"preludeEvent": {"config": {}}},
            {
                "policyEvent": {
                    "policyPackName": "llmd-fleet",
                    "enforcementLevel": "advisory",
                    "policyName": "a",
                }
            },
            {
                "policyEvent": {
                    "policyPackName": "llmd-fleet",
                    "enforcementLevel": "advisory",
                    "policyName": "b",
                }
            },
            {
                "policyEvent": {
                    "policyPackName": "llmd-fleet",
                    "enforcementLevel": "remediate",
                    "policyName": "c",
                }
            },
            # as the CLI keyed a local pack in the engine run's summary
            {
                "summaryEvent": {
                    "resourceChanges": {"create": 3},
                    "PolicyPacks": {"llmd-fleet|local|/w/checkout/policies": "0.1.0"},
                }
            },
        )
        + '\n{"sequence": 9, "cut sh'
    )
    results = engine_report.policy_results(engine_report.event_log(log))
    assert results == engine_report.PolicyResults(("llmd-fleet",), 0, 2)
    assert (
        engine_report.policy_line(results) == "policy: llmd-fleet ran in pulumi up: 0 mandatory, 2 advisory"
    )
    assert engine_report.policy_problems(results) == []


def test_a_mandatory_violation_or_no_pack_fails_the_run():
    mandatory = engine_report.policy_results(
        engine_report.event_log(
            _events({"policyEvent": {"policyPackName": "llmd-fleet", "enforcementLevel": "mandatory"}})
        )
    )
    assert mandatory == engine_report.PolicyResults(("llmd-fleet",), 1, 0)
    assert engine_report.policy_problems(mandatory) == ["policy: 1 mandatory violations in pulumi up"]
    none = engine_report.policy_results(
        engine_report.event_log(_events({"summaryEvent": {"resourceChanges": {}}}))
    )
    assert engine_report.policy_line(none) == "policy: no pack ran in pulumi up: 0 mandatory, 0 advisory"
    assert engine_report.policy_problems(none) == [
        "policy: no policy pack ran in pulumi up (the engine reported none)"
    ]


def test_the_preview_of_a_pulumi_up_is_not_counted():
    log = _events(
        {"policyEvent": {"policyPackName": "llmd-fleet", "enforcementLevel": "advisory"}},
        {"policyEvent": {"policyPackName": "llmd-fleet", "enforcementLevel": "mandatory"}},
        {"summaryEvent": {"isPreview": True, "PolicyPacks": {"llmd-fleet": "0.1.0"}}},
        {"policyEvent": {"policyPackName": "llmd-fleet", "enforcementLevel": "advisory"}},
        {"summaryEvent": {"isPreview": False, "PolicyPacks": {"llmd-fleet": "0.1.0"}}},
    )
    assert engine_report.policy_results(engine_report.event_log(log)) == engine_report.PolicyResults(
        ("llmd-fleet",), 0, 1
    )


def test_a_pack_without_violations_is_named_by_the_analyzer_summary():
    log = _events({"policyAnalyzeSummaryEvent": {"policyPackName": "llmd-fleet", "passed": ["x"]}})
    assert engine_report.policy_results(engine_report.event_log(log)).packs == ("llmd-fleet",)


def test_automation_api_events_read_as_the_event_log_does():
    from pulumi.automation import events as auto_events

    violation = SimpleNamespace(
        summary_event=None,
        policy_event=SimpleNamespace(policy_pack_name="llmd-fleet", enforcement_level="mandatory"),
    )
    summary = auto_events.EngineEvent.from_json(
        {
            "sequence": 2,
            "timestamp": 0,
            "summaryEvent": {
                "resourceChanges": {},
                "PolicyPacks": {"llmd-fleet": "0.1.0"},
                "maybeCorrupt": False,
                "durationSeconds": 1,
            },
        }
    )
    results = engine_report.policy_results(
        [engine_report.sdk_event(violation), engine_report.sdk_event(summary)]
    )
    assert results == engine_report.PolicyResults(("llmd-fleet",), 1, 0)


def test_the_host_and_policy_lines_are_not_taken_for_step_lines():
    lines = [
        "engine: preview 3 to create (1.0 s)",
        "engine: up 3 created (2.0 s)",
        "engine: language host pulumi-language-python 9.8.0-dev (from source 0123456), "
        "toolchain uv, typechecker mypy: ok",
        "policy: llmd-fleet ran in pulumi up: 0 mandatory, 2 advisory",
    ]
    steps = [line for line in lines if not line.startswith(engine.NOT_STEPS)]
    assert steps == lines[:2]
    with pytest.raises(ValueError):
        engine_report.parse_step_line(lines[2])
