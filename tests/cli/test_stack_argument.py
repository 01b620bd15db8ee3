"""plan, render, check, status and bench take a stack name or a stack file's path (cli/stack_file.py
`resolve_stack`): an argument naming an existing .yaml file is that file; anything else is a stack
name and must pass Pulumi's stack-name rule, refused on one line with exit 2."""

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmd_fleet.cli.main import run
from llmd_fleet.cli.stack_file import MAX_STACK_NAME, StackArgumentError, resolve_stack
from llmd_fleet.core.problems import quote
from tests.support import STACKS_DIR

_NAME_CHARS = string.ascii_letters + string.digits + "_.-"
_FEW = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FEW
@given(st.text(alphabet=_NAME_CHARS, min_size=1, max_size=MAX_STACK_NAME))
def test_any_pulumi_stack_name_is_a_name_in_the_stacks_dir(name: str) -> None:
    if name.endswith(".yaml") and Path(name).is_file():  # the working directory's own file
        return
    assert resolve_stack(name, STACKS_DIR) == (name, STACKS_DIR / f"Pulumi.{name}.yaml")


@_FEW
@given(
    st.text(alphabet=_NAME_CHARS, max_size=20),
    st.characters(codec="utf-8", exclude_characters=_NAME_CHARS),
    st.text(alphabet=_NAME_CHARS, max_size=20),
)
def test_a_name_with_any_other_character_is_refused_at_its_position(head: str, bad: str, tail: str) -> None:
    with pytest.raises(StackArgumentError) as caught:
        resolve_stack(head + bad + tail, STACKS_DIR)
    assert f"has {bad!r} at position {len(head)}:" in str(caught.value)


@pytest.mark.parametrize("name", ["", "x" * (MAX_STACK_NAME + 1), "stacks/quickstart-h100", "a b"])
def test_plan_refuses_a_bad_name_on_one_line(name: str, capsys) -> None:
    assert run(["plan", name]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: stack {quote(name)} ")
    assert "Pulumi's rule" in err


def test_plan_of_a_stack_file_path_equals_plan_of_its_name(capsys) -> None:
    assert run(["plan", "quickstart-h100"]) == 0
    by_name = capsys.readouterr().out
    assert run(["plan", str(STACKS_DIR / "Pulumi.quickstart-h100.yaml")]) == 0
    assert capsys.readouterr().out == by_name
    assert by_name.startswith("# plan of quickstart-h100: 16 GPUs on 2 nodes")


def test_a_relative_path_from_the_checkout(capsys, monkeypatch) -> None:
    monkeypatch.chdir(STACKS_DIR.parent)
    assert run(["plan", "stacks/Pulumi.quickstart-h100.yaml"]) == 0
    assert capsys.readouterr().out.startswith("# plan of quickstart-h100:")


def test_a_file_elsewhere_names_its_stack_and_renders_there(tmp_path, capsys) -> None:
    """A file outside stacks/ whose name is not Pulumi.<stack>.yaml: its stack is the file name."""
    own = tmp_path / "trial-2node.yaml"
    own.write_text((STACKS_DIR / "Pulumi.quickstart-h100.yaml").read_text())
    out = tmp_path / "out"
    assert run(["render", str(own), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"rendered trial-2node: 33 files in {out}"


def test_a_file_whose_name_is_no_stack_name_is_refused(tmp_path, capsys) -> None:
    own = tmp_path / "my trial.yaml"
    own.write_text((STACKS_DIR / "Pulumi.quickstart-h100.yaml").read_text())
    assert run(["status", str(own)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: stack file {own}: its stack name 'my trial' has ' ' at position 2: a stack name is "
        "1-100 characters, each alphanumeric, a hyphen, an underscore or a period (Pulumi's rule), or "
        "give the path of an existing .yaml stack file"
    ]


def test_a_yaml_name_that_is_no_file_says_so(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["--stacks-dir", str(STACKS_DIR), "plan", "trial.yaml"]) == 2
    assert "no file trial.yaml either" in capsys.readouterr().err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(
        alphabet=st.sampled_from(
            ["\x1b", "\n", "\r", "\x00", "\u202e", "\u2028", "$", "(", ")", "/", " ", "a", "é"]
        ),
        min_size=1,
        max_size=300,
    )
)
def test_a_refused_name_is_echoed_escaped_on_one_bounded_line(name: str, capsys) -> None:
    """Control characters, ESC, bidi overrides and line separators in a refused name are written as
    escapes; a long name is cut at 80 characters with its length (docs/bad-input.md)."""
    if not any(c not in "a" for c in name):
        return
    assert run(["plan", name]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.isprintable() and "\x1b" not in line
    assert len(line) < 80 * 10 + 400
    if len(name) > 80:
        assert f"... ({len(name)} characters)" in line
