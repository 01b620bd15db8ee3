"""Placeholder secrets are refused before a deploy: `llmd-fleet check --for-deploy` (exit 2, one
line per key with its `pulumi config set --secret` command) and the stack program under `pulumi up`;
offline `check` and `render` keep accepting them."""

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.config.deploy_secrets import is_placeholder, placeholder_secret_problems
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.program import refuse_placeholder_secrets
from tests.support import STACKS_DIR, set_stack_config

STACK_TEXT = (STACKS_DIR / "Pulumi.onprem-h100.yaml").read_text()


@pytest.mark.parametrize(
    "value",
    [
        "v1:placeholder-set-with-pulumi-config-set-secret",
        "offline-render-placeholder",
        "<token>",
        "hf_...",
        "",
    ],
)
def test_placeholders(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize("value", ["v1:AAABAKxh3nF1c2VyLXNlY3JldA==", "hf_abcdEFGH1234", "3f9a0c1d2e"])
def test_real_values(value: str) -> None:
    assert not is_placeholder(value)


def test_each_key_is_named_with_its_command() -> None:
    problems = placeholder_secret_problems(
        {"responsesDbPassword": "v1:placeholder-x", "hfToken": "<token>", "kubeconfig": "apiVersion: v1"},
        "s1",
    )
    assert [(p.key, p.message) for p in problems] == [
        (
            "llmd-fleet:hfToken",
            'is a placeholder secret; set it: pulumi config set --secret hfToken "$HF_TOKEN" --stack s1',
        ),
        (
            "llmd-fleet:responsesDbPassword",
            "is a placeholder secret; set it: pulumi config set --secret responsesDbPassword "
            '"$(openssl rand -hex 24)" --stack s1',
        ),
    ]


def test_check_for_deploy_refuses_the_example_placeholder(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run(["check", "onprem-h100", "--for-deploy", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: llmd-fleet:responses.backup.endpoint is a placeholder: s3.example.internal (an example "
        "domain, not a real endpoint); replace it with your own before a deploy",
        "error: llmd-fleet:responsesDbPassword is a placeholder secret; set it: pulumi config set --secret "
        'responsesDbPassword "$(openssl rand -hex 24)" --stack onprem-h100',
    ]
    assert not out.exists()


def test_check_for_deploy_passes_a_set_secret(tmp_path, capsys) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = STACK_TEXT.replace(
        "v1:placeholder-set-with-pulumi-config-set-secret", "v1:AAABAKxh3nF1c2VyLXNlY3JldA=="
    ).replace("s3.example.internal", "s3.storage.corp")
    (stacks / "Pulumi.onprem-h100.yaml").write_text(text)
    code = run(
        ["--stacks-dir", str(stacks), "check", "onprem-h100", "--for-deploy", "--out", str(tmp_path / "o")]
    )
    assert code == 0, capsys.readouterr()
    assert capsys.readouterr().out.splitlines()[-1].startswith("check onprem-h100: ok: ")


def test_the_stack_program_refuses_a_placeholder_under_pulumi_up() -> None:
    set_stack_config({"serving": {"name": "x"}}, {"responsesDbPassword": "offline-render-placeholder"})
    with pytest.raises(ConfigError, match="pulumi config set --secret responsesDbPassword"):
        refuse_placeholder_secrets("prod")
    set_stack_config({"serving": {"name": "x"}}, {"responsesDbPassword": "9c2f5e7a1b"})
    refuse_placeholder_secrets("prod")


def test_check_for_deploy_reads_the_stack_file_as_render_does(tmp_path, capsys) -> None:
    """Values a YAML 1.1 reader turns into booleans or dates (`on`, `yes`, `2026-12-02`) are
    strings to the one stack reader that render, check --for-deploy and the twin's engine run use:
    --for-deploy gets to its placeholder refusals, no YAML error, no traceback."""
    from devtools.twin.engine import engine_config
    from llmd_fleet.cli.stack_file import load_stack_document

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = STACK_TEXT.replace(
        '          nvidia.com/gpu.present: "true"\n',
        '          nvidia.com/gpu.present: "true"\n'
        "          ops.corp/burn-in: on\n"
        "          ops.corp/since: 2026-12-02\n",
    )
    assert "burn-in: on" in text
    path = stacks / "Pulumi.onprem-h100.yaml"
    path.write_text(text)
    code = run(
        ["--stacks-dir", str(stacks), "check", "onprem-h100", "--for-deploy", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert [line.split(" ", 2)[1] for line in err.splitlines()] == [
        "llmd-fleet:responses.backup.endpoint",
        "llmd-fleet:responsesDbPassword",
    ]
    labels = engine_config({"config": load_stack_document(path)})[0]["llmd-fleet:fleet"]["nodeGroups"][
        "h100"
    ]["nodeLabels"]
    assert labels["ops.corp/burn-in"] == "on" and labels["ops.corp/since"] == "2026-12-02"
