"""Edge input ends in one line, never a traceback, exit per the one table (docs/bad-input.md):
huge integers, very long or non-UTF-8 names, deep nesting, a full disk; and every error line is
bounded (a value quoted at 80 characters plus its length, a list at 20 names, 20 problems)."""

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmd_fleet.cli.main import guarded_run
from llmd_fleet.core.problems import ConfigError, clip, names, printable, quote
from tests.support import REFERENCE_STACK, STACKS_DIR

REFERENCE = (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text()


def _stack(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / f"Pulumi.{REFERENCE_STACK}.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _one_refusal(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 2) -> str:
    assert guarded_run(list(argv)) == code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert len(captured.err) < 6000, captured.err[:300]
    return captured.err


EDITS: dict[str, tuple[str, str]] = {
    "5,000-digit integer": ("count: 68", "count: " + "9" * 5000),
    "5,000-digit negative hex": ("count: 68", "count: -0x" + "f" * 5000),
    "5,000-digit float": ("count: 68", "count: 6." + "9" * 5000),
    "5 MB value": ("revision: main", "revision: " + "x" * 5_000_000),
    "5 MB quoted key": ("      h100:", '      "' + "h" * 5_000_000 + '":'),
    "deep list": ("count: 68", "count: " + "[" * 10_000 + "]" * 10_000),
    "deep map": ("count: 68", "count: " + "{a: " * 3000 + "1" + "}" * 3000),
    "500 unknown keys": (
        "        gpusPerNode: 8",
        "        gpusPerNode: 8\n" + "".join(f"        k{i}: 1\n" for i in range(500)),
    ),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_edge_input_in_a_stack_file_is_refused_on_short_lines(case, tmp_path, capsys):
    old, new = EDITS[case]
    assert old in REFERENCE
    err = _one_refusal(capsys, "plan", str(_stack(tmp_path, REFERENCE.replace(old, new, 1))))
    assert err.startswith("error: ")
    assert all(len(line) < 2500 for line in err.splitlines())
    assert len(err.splitlines()) <= 23  # the head, at most 20 problems, "... and N more problems"


def test_an_integer_longer_than_any_setting_is_refused_while_reading(tmp_path, capsys):
    err = _one_refusal(
        capsys, "plan", str(_stack(tmp_path, REFERENCE.replace("count: 68", "count: " + "9" * 5000)))
    )
    assert "an integer of 5000 digits (at most 18)" in err and "line 12" in err


def test_a_non_utf8_stack_file_name_and_content(tmp_path, capsys):
    path = _stack(tmp_path, REFERENCE.encode().replace(b"      h100:", b"      h\xff00:"))
    err = _one_refusal(capsys, "plan", str(path))
    assert "not UTF-8 text" in err
    odd = os.fsdecode(b"Pulumi.x\xff.yaml")
    (tmp_path / odd).write_text(REFERENCE)
    err = _one_refusal(capsys, "plan", str(tmp_path / odd))
    assert "\\udcff" in err and len(err.splitlines()) == 1
    err = _one_refusal(capsys, "plan", "n" * 100_000)
    assert len(err) < 400


def test_an_unreadable_stack_file_is_one_line(tmp_path, capsys, monkeypatch):
    path = _stack(tmp_path, REFERENCE)
    real = Path.read_text

    def unreadable(self: Path, *args, **kwargs):
        if self == path:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", unreadable)
    err = _one_refusal(capsys, "plan", str(path))
    assert "cannot be read: Permission denied" in err


def test_a_full_disk_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    real = Path.write_text

    def full(self: Path, *args, **kwargs):
        if self.name.endswith(".yaml"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    err = _one_refusal(capsys, "render", REFERENCE_STACK, "--out", str(tmp_path / "out"), code=1)
    (line,) = err.splitlines()
    assert line.startswith("error: ") and "No space left on device (the environment failed" in line
    assert not (tmp_path / "out").exists()


def test_an_interrupt_is_one_line_and_exit_1(capsys, monkeypatch):
    def interrupted(_argv):
        raise KeyboardInterrupt

    monkeypatch.setattr("llmd_fleet.cli.main.run", interrupted)
    assert guarded_run(["plan", REFERENCE_STACK]) == 1
    assert capsys.readouterr().err == "llmd-fleet: interrupted (SIGINT): stopped, child processes ended\n"


_any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_any | st.text(min_size=81, max_size=5000) | st.integers(min_value=10**100))
def test_quote_is_one_bounded_line_for_any_value(value):
    text = quote(value)
    assert text.isprintable() and "\n" not in text
    assert len(text) <= 80 * 10 + 60  # 80 characters of the value, each at most a 10-character escape


def test_quote_names_the_length_of_what_it_cuts():
    assert quote("x" * 5_000_000) == "'" + "x" * 80 + "'... (5000000 characters)"
    assert quote(int("9" * 4000)) == "9" * 80 + "... (4000 digits)"
    assert quote(10**6000).startswith("an integer of about 600")
    assert quote("a\x1b[2Jb") == "'a\\x1b[2Jb'"


@given(items=st.lists(st.text(max_size=200), max_size=100))
def test_names_shows_at_most_20(items):
    text = names(items)
    assert text.isprintable()
    if len(items) > 20:
        assert text.endswith(f", and {len(items) - 20} more")


def test_config_error_prints_at_most_20_problems_each_bounded():
    error = ConfigError(
        [(f"llmd-fleet:k{i}" + "x" * (10_000 if i == 0 else 0), "y" * 10_000) for i in range(500)]
    )
    lines = str(error).splitlines()
    assert len(lines) == 22 and lines[-1] == "  ... and 480 more problems"
    assert all(len(line) < 2300 for line in lines)
    assert len(error.problems) == 500  # all of them, for callers that list them
    assert clip("a\nb") == "a b" and printable("a\nb") == "a\\nb"


@pytest.mark.parametrize(
    ("secure", "kind"),
    [
        ("''", "an empty string"),
        ("42", "an integer"),
        ("{a: hf_x}", "a mapping"),
        ("null", "null"),
        ("[x]", "a list"),
        ("true", "a boolean"),
    ],
)
def test_a_secure_value_that_is_no_ciphertext_is_refused_offline(secure, kind, tmp_path, capsys):
    text = REFERENCE.replace("config:\n", f"config:\n  llmd-fleet:hfToken:\n    secure: {secure}\n", 1)
    err = _one_refusal(capsys, "plan", str(_stack(tmp_path, text)))
    assert (
        f"llmd-fleet:hfToken: `secure:` must be the ciphertext `pulumi config set --secret` writes, a "
        f"non-empty string (got {kind}; not echoed): pulumi config set --secret hfToken <value>"
    ) in err
    assert "hf_x" not in err


@pytest.mark.parametrize("key", ["true", "1", "null", "1.5", "false"])
def test_a_non_string_key_anywhere_in_a_section_is_refused(key, tmp_path, capsys):
    """`true:` and `"true":` would be one JSON key; one would silently win."""
    text = REFERENCE.replace(
        '          nvidia.com/gpu.present: "true"\n',
        f'          nvidia.com/gpu.present: "true"\n          {key}: x\n          "{key}": y\n',
        1,
    )
    err = _one_refusal(capsys, "plan", str(_stack(tmp_path, text)))
    assert f"llmd-fleet:fleet.nodeGroups.h100.nodeLabels.{key}: a key must be a string" in err


@pytest.mark.parametrize(
    "label", ["app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "app.kubernetes.io/name"]
)
def test_monitor_labels_never_replace_the_fleets_own(label):
    from llmd_fleet.stack.parse import parse_config
    from tests.support import stack_raw_config

    raw = stack_raw_config()
    raw["observability"] = {**raw.get("observability", {}), "monitorLabels": {label: "helm", "team": "a"}}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    problems = dict(caught.value.problems)
    assert problems[f"llmd-fleet:observability.monitorLabels.{label}"].startswith(
        "the stack sets the app.kubernetes.io/* labels of its objects itself"
    )
    assert "llmd-fleet:observability.monitorLabels.team" not in problems


@pytest.mark.parametrize(
    ("endpoint", "inside"),
    [
        ("https://10.244.3.4:9000", "podCidr 10.244.0.0/16"),
        ("http://10.96.0.10", "serviceCidr 10.96.0.0/12"),
        ("https://192.168.1.5:9000", None),
        ("https://s3.internal:9000", None),
    ],
)
def test_an_onprem_backup_store_inside_the_cluster_ranges_is_refused(endpoint, inside):
    from llmd_fleet.stack.parse import parse_config
    from tests.support import stack_raw_config

    raw = stack_raw_config()
    raw["responses"]["backup"]["endpoint"] = endpoint
    if inside is None:
        parse_config(raw)
        return
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    message = dict(caught.value.problems)["llmd-fleet:responses.backup.endpoint"]
    assert message.startswith(f"{endpoint.split('//')[1].split(':')[0]} is inside target.onprem.{inside}:")


@pytest.mark.parametrize("stack", ["gke-h100", "eks-h100"])
def test_a_kubeconfig_secret_the_target_never_reads_is_refused(stack):
    from llmd_fleet.stack.parse import parse_config
    from tests.support import stack_raw_config

    raw = {**stack_raw_config(stack), "kubeconfig": "apiVersion: v1"}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, frozenset({"kubeconfig"}))
    assert dict(caught.value.problems)["llmd-fleet:kubeconfig"].startswith("only for kind onprem or local: ")
    parse_config(stack_raw_config(stack))  # accepted without it


@pytest.mark.parametrize("stack", [REFERENCE_STACK, "local-sim"])
def test_a_kubeconfig_secret_is_read_on_an_existing_cluster(stack):
    from llmd_fleet.stack.parse import parse_config
    from tests.support import stack_raw_config

    parse_config({**stack_raw_config(stack), "kubeconfig": "apiVersion: v1"}, frozenset({"kubeconfig"}))
