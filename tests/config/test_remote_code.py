"""Remote code from a moving revision: refused by `check --for-deploy` (exit 2, one line naming the
key), an advisory in `plan` and `render`; the shipped stacks run none."""

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.config.remote_code import remote_code_problem
from tests.support import STACKS_DIR, all_stacks

SECRET = "v1:AAABAKxh3nF1c2VyLXNlY3JldA=="
COMMIT = "0123456789abcdef0123456789abcdef01234567"
MESSAGE = (
    "llmd-fleet:model.trustRemoteCode runs zai-org/GLM-5.2-FP8's own Python (vllm --trust-remote-code) "
    "from revision 'main', a branch or tag that can change under that name; set model.trustRemoteCode "
    "false where vLLM knows the architecture, or pin model.revision to a 40-hex commit"
)


def _stacks(tmp_path, revision: str = "main"):
    text = (STACKS_DIR / "Pulumi.onprem-h100.yaml").read_text()
    text = text.replace("v1:placeholder-set-with-pulumi-config-set-secret", SECRET)
    assert "    trustRemoteCode: false\n" in text and "    revision: main\n" in text
    text = text.replace("    trustRemoteCode: false\n", "    trustRemoteCode: true\n")
    text = text.replace("    revision: main\n", f"    revision: {revision}\n")
    stacks = tmp_path / "stacks"
    stacks.mkdir(parents=True)
    (stacks / "Pulumi.onprem-h100.yaml").write_text(text)
    return stacks


@pytest.mark.parametrize("stack", all_stacks())
def test_the_shipped_stacks_run_no_remote_code(stack):
    config = stack_config(read_stack_file(STACKS_DIR, stack))
    assert config.model.trust_remote_code is False
    assert remote_code_problem(config.model) is None


def test_check_for_deploy_refuses_remote_code_from_a_branch(tmp_path, capsys):
    stacks = _stacks(tmp_path)
    out = tmp_path / "out"
    code = run(["--stacks-dir", str(stacks), "check", "onprem-h100", "--for-deploy", "--out", str(out)])
    assert code == 2
    lines = capsys.readouterr().err.splitlines()
    # The stack's documentation placeholders (an example.internal endpoint) are refused before it.
    assert lines[-1] == f"error: {MESSAGE}"
    assert [line for line in lines if "trustRemoteCode" in line] == [f"error: {MESSAGE}"]
    assert not out.exists()


def test_plan_warns_and_a_commit_is_accepted(tmp_path, capsys):
    stacks = _stacks(tmp_path)
    assert run(["--stacks-dir", str(stacks), "plan", "onprem-h100", "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"advisory: {MESSAGE}"]
    pinned = _stacks(tmp_path / "pinned", COMMIT)
    assert run(["--stacks-dir", str(pinned), "plan", "onprem-h100", "--json"]) == 0
    assert capsys.readouterr().err == ""
