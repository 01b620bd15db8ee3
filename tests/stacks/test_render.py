"""The command line: render, check and plan every stack; determinism; bad input; secrets."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmd_fleet.cli.main import run
from tests.support import REFERENCE_STACK, REPO, STACKS_DIR, all_stacks


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _load(path: Path):
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("stack", all_stacks())
def test_every_stack_renders_and_checks(stack, tmp_path, crd_dir, capsys):
    out = tmp_path / stack
    assert run(["check", stack, "--out", str(out), "--crd-dir", str(crd_dir)]) == 0
    report = capsys.readouterr().out
    assert "0 invalid" in report and "INVALID" not in report
    lines = report.splitlines()
    assert re.fullmatch(
        rf"check {stack}: ok: (\d+) of \1 objects valid; policies: 0 mandatory, \d+ advisory", lines[-1]
    )
    policies = [line.split()[1] for line in lines if line.startswith("[advisory]")]
    assert len(policies) == len(set(policies)), "an advisory policy printed on more than one line"
    assert (out / "summary.md").is_file() and any((out / "manifests").rglob("*.yaml"))


def test_render_is_byte_identical(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert run(["render", REFERENCE_STACK, "--out", str(first)]) == 0
    assert run(["render", REFERENCE_STACK, "--out", str(second)]) == 0
    assert _tree(first) == _tree(second)


def test_rendered_layout_and_types(tmp_path):
    out = tmp_path / "out"
    assert run(["render", REFERENCE_STACK, "--out", str(out)]) == 0
    files = set(_tree(out))
    assert {
        "manifests/llm-d/disaggregatedset-glm52.yaml",
        "manifests/cluster/namespace-llm-d.yaml",
        "manifests/cluster/namespace-lws-system.yaml",
        "helm/lws-system.lws.yaml",
        "summary.md",
    } <= files
    dset = _load(out / "manifests/llm-d/disaggregatedset-glm52.yaml")
    decode = dset["spec"]["roles"][1]["spec"]
    # Integers stay integers through the engine's double-only wire format.
    assert decode["replicas"] == 5 and type(decode["replicas"]) is int
    assert type(decode["leaderWorkerTemplate"]["size"]) is int
    helm = _load(out / "helm/lws-system.lws.yaml")
    assert helm["values"]["enableDisaggregatedSet"] is True
    summary = (out / "summary.md").read_text()
    assert "```mermaid" in summary and "| KV tokens per rank | 255,750 | 476,789 |" in summary


def _bad_stack_dir(tmp_path: Path, edit) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    document = _load(STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml")
    edit(document["config"])
    (stacks / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(yaml.safe_dump(document))
    return stacks


def test_bad_input_exits_2_without_traceback_and_keeps_the_old_output(tmp_path):
    out = tmp_path / "build"
    assert run(["render", REFERENCE_STACK, "--out", str(out)]) == 0
    before = _tree(out)

    def edit(config):
        config["llmd-fleet:serving"]["roles"]["decode"]["dataParallel"] = 48

    stacks = _bad_stack_dir(tmp_path, edit)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmd_fleet.cli.main",
            "--stacks-dir",
            str(stacks),
            "render",
            REFERENCE_STACK,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "llmd-fleet:serving.roles.decode.dataParallel" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert _tree(out) == before


def test_plan_error_exits_2(tmp_path, capsys):
    def edit(config):
        config["llmd-fleet:serving"]["roles"]["decode"]["instances"] = 9

    stacks = _bad_stack_dir(tmp_path, edit)
    assert run(["--stacks-dir", str(stacks), "render", REFERENCE_STACK, "--out", str(tmp_path / "o")]) == 2
    assert "llmd-fleet:fleet.nodeGroups.h100.count" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_unknown_stack_exits_2(capsys):
    assert run(["plan", "no-such-stack"]) == 2
    assert "onprem-h100" in capsys.readouterr().err


def test_secret_values_never_reach_the_output(tmp_path):
    def edit(config):
        config["llmd-fleet:hfToken"] = {"secure": "v1:AAAAciphertextAAAA"}

    stacks = _bad_stack_dir(tmp_path, edit)
    out = tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", REFERENCE_STACK, "--out", str(out)]) == 0
    secret = _load(out / "manifests/llm-d/secret-llm-d-hf-token.yaml")
    # Redacted value by value: the Secret stays a valid object (stringData a map of strings).
    assert secret["stringData"] == {"HF_TOKEN": "[secret]"}
    text = b"".join(_tree(out).values())
    assert b"ciphertext" not in text and b"offline-render-placeholder" not in text


def test_plaintext_token_is_refused(tmp_path, capsys):
    def edit(config):
        config["llmd-fleet:hfToken"] = "hf_plaintext_token"

    stacks = _bad_stack_dir(tmp_path, edit)
    assert run(["--stacks-dir", str(stacks), "render", REFERENCE_STACK, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "llmd-fleet:hfToken: must be a secret" in err and "hf_plaintext_token" not in err


def test_check_reports_invalid_manifests(tmp_path, crd_dir, capsys):
    from llmd_fleet.cli.check import check_manifests

    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "tests" / "fixtures" / "invalid-manifests", manifests)
    count, findings = check_manifests(manifests, "1.34.2", [crd_dir])
    messages = sorted(str(f) for f in findings)
    assert count == 3
    assert any("Namespace/typo" in m and "spc" in m for m in messages), messages
    assert any("DisaggregatedSet/bad" in m and "spec.roles[0]" in m for m in messages), messages
    assert any("Widget/w" in m and "no CRD" in m for m in messages), messages


def test_plan_prints_the_table(capsys):
    assert run(["plan", REFERENCE_STACK]) == 0
    out = capsys.readouterr().out
    assert "544 GPUs on 68 nodes" in out and "| TP / DP / EP | 1 / 32 / 32 | 1 / 64 / 64 |" in out
