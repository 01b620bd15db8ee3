"""`check` reads and validates every input before it renders or writes anything: `--crd-dir`
(each file parsed and converted) and `--policy-config` (JSON, then policy names, enforcement
levels and properties against the pack's own policies). A refusal is one line naming the flag,
exit 2, and an earlier output directory stays exactly as it was."""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmd_fleet.cli.check import CrdDirError, CrdSchemas
from llmd_fleet.cli.main import run
from llmd_fleet.cli.policy_check import PolicyConfigError, load_policy_config, validate_policy_config
from llmd_fleet.policies.pack import all_policies
from tests.support import REFERENCE_STACK

POLICY_NAMES = [p.name for p in all_policies()]
LEVELS = ["advisory", "mandatory", "remediate", "disabled"]


def _tree(directory: Path) -> dict[str, str]:
    """Every file below `directory` (hidden ones too) and the sha256 of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An output directory an earlier render of the reference stack wrote."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    assert run(["render", REFERENCE_STACK, "--out", str(out)]) == 0
    return out


def _refused(capsys: pytest.CaptureFixture[str], earlier: Path, *flags: str) -> str:
    before = _tree(earlier)
    code = run(["check", REFERENCE_STACK, "--out", str(earlier), *flags])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("error: ") and "Traceback" not in line
    assert len(line) < 2000
    assert _tree(earlier) == before  # nothing replaced, nothing added
    assert not list(earlier.parent.glob(".*llmd-new")) and not list(earlier.parent.glob(".*llmd-old"))
    return line


CRD_FILES: dict[str, bytes] = {
    "not yaml": b"a: [\n",
    "not utf-8": b"kind: CustomResourceDefinition\nspec: \xff\xfe\n",
    "crd without spec": b"kind: CustomResourceDefinition\n",
    "crd spec a list": b"kind: CustomResourceDefinition\nspec: [1, 2]\n",
    "versions not a list": (
        b"kind: CustomResourceDefinition\nspec: {group: g, names: {kind: K}, versions: 3}\n"
    ),
    "version without name": (
        b"kind: CustomResourceDefinition\nspec: {group: g, names: {kind: K}, versions: [{served: true}]}\n"
    ),
    "deeply nested": b"kind: CustomResourceDefinition\nspec: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "huge integer": b"kind: CustomResourceDefinition\nspec: {group: "
    + b"9" * 5000
    + b", names: {kind: K}}\n",
}


@pytest.mark.parametrize("case", sorted(CRD_FILES))
def test_a_bad_crd_file_is_refused_naming_the_flag_and_file(case, tmp_path):
    crd_dir = tmp_path / "crds"
    crd_dir.mkdir()
    (crd_dir / "bad.yaml").write_bytes(CRD_FILES[case])
    with pytest.raises(CrdDirError) as refused:
        CrdSchemas([crd_dir])
    message = str(refused.value)
    assert message.startswith(f"--crd-dir {crd_dir}: {crd_dir / 'bad.yaml'}: ")
    assert "\n" not in message and len(message) < 600, message


@pytest.mark.parametrize("case", ["not yaml", "crd spec a list"])
def test_a_bad_crd_dir_is_refused_before_anything_is_written(case, tmp_path, earlier, capsys):
    crd_dir = tmp_path / "\x1b[31mcrds\n"
    crd_dir.mkdir()
    (crd_dir / "bad.yaml").write_bytes(CRD_FILES[case])
    line = _refused(capsys, earlier, "--crd-dir", str(crd_dir))
    assert line.startswith("error: --crd-dir ") and "bad.yaml" in line
    assert "\x1b" not in line and "\\x1b[31mcrds\\n" in line


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_crd_dir_that_is_no_directory_is_refused(kind, tmp_path):
    path = tmp_path / "crds"
    if kind == "a file":
        path.write_text("x")
    with pytest.raises(CrdDirError, match=r"^--crd-dir .*/crds: not a directory$"):
        CrdSchemas([path])


POLICY_CONFIGS: dict[str, bytes] = {
    "unknown policy": b'{"gpu-budgett": "mandatory"}',
    "unknown level": b'{"gpu-budget": "loud"}',
    "level a list": b'{"gpu-budget": {"enforcementLevel": ["mandatory"]}}',
    "level an object": b'{"all": {"enforcementLevel": {"a": 1}}}',
    "all a number": b'{"all": 3}',
    "unknown property": b'{"gpu-budget": {"maxGpu": 3}}',
    "property of the wrong type": b'{"gpu-budget": {"maxGpus": "many"}}',
    "not an object": b"[1, 2]",
    "not json": b"{nope",
    "not utf-8": b'{"gpu-budget": "\xff"}',
    "5000-digit integer": b'{"gpu-budget": {"maxGpus": ' + b"9" * 5000 + b"}}",
    "deeply nested": b'{"gpu-budget": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "5 MB name": b'{"' + b"x" * 5_000_000 + b'": "advisory"}',
    "500 unknown names": json.dumps({f"p{i}": "advisory" for i in range(500)}).encode(),
}


@pytest.mark.parametrize("case", sorted(POLICY_CONFIGS))
def test_a_bad_policy_config_is_refused_on_one_short_line(case, tmp_path):
    path = tmp_path / "policy.json"
    path.write_bytes(POLICY_CONFIGS[case])
    with pytest.raises(PolicyConfigError) as refused:
        validate_policy_config(load_policy_config(path), f"--policy-config {path}")
    message = str(refused.value)
    assert message.startswith(f"--policy-config {path}: ")
    assert "\n" not in message and len(message) < 1500, message  # values at 80 characters, lists at 20


@pytest.mark.parametrize("case", ["unknown policy", "level a list", "5 MB name", "not json"])
def test_a_bad_policy_config_is_refused_before_anything_is_written(case, tmp_path, earlier, capsys):
    path = tmp_path / "policy.json"
    path.write_bytes(POLICY_CONFIGS[case])
    line = _refused(capsys, earlier, "--policy-config", str(path))
    assert line.startswith(f"error: --policy-config {path}: ")


def test_the_refusal_names_the_key_and_what_is_allowed():
    with pytest.raises(PolicyConfigError) as refused:
        validate_policy_config({"gpu-budget": {"enforcementLevel": "loud"}}, "--policy-config p.json")
    assert str(refused.value) == (
        "--policy-config p.json: gpu-budget: enforcementLevel must be one of "
        "advisory, mandatory, remediate, disabled (got 'loud')"
    )
    with pytest.raises(PolicyConfigError) as refused:
        validate_policy_config({f"p{i:03}": "advisory" for i in range(500)})
    message = str(refused.value)
    assert "unknown policies: p000, p001," in message and "p019, and 480 more (policies: " in message
    with pytest.raises(PolicyConfigError) as refused:
        validate_policy_config({"gpu-budget": {"maxGpus": "x" * 5_000_000}})
    assert str(refused.value).endswith(
        "gpu-budget.maxGpus: must be of type integer (got '" + "x" * 80 + "'... (5000000 characters))"
    )


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)
_entry = (
    st.sampled_from(LEVELS)
    | st.text(max_size=12)
    | _json
    | st.fixed_dictionaries(
        {"enforcementLevel": st.sampled_from(LEVELS) | _json}, optional={"maxGpus": _json}
    )
)
_config = st.dictionaries(st.sampled_from([*POLICY_NAMES, "all"]) | st.text(max_size=12), _entry, max_size=4)


@settings(max_examples=300, deadline=None)
@given(config=_config)
def test_any_policy_config_is_accepted_or_refused_with_policy_config_error(config: dict[str, Any]) -> None:
    try:
        validate_policy_config(config)
    except PolicyConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1500
        return
    # Accepted: every name is a policy and every level one of the four.
    for name, value in config.items():
        assert name in POLICY_NAMES or name == "all"
        level = value if isinstance(value, str) else value.get("enforcementLevel", "advisory")
        assert level in LEVELS


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | _json.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_load_as_a_policy_config_or_are_refused(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(data)
    try:
        assert isinstance(load_policy_config(path), dict)
    except PolicyConfigError as exc:
        assert str(exc).startswith(f"--policy-config {path}: ") and "\n" not in str(exc)


_yaml_value = _json.map(lambda v: json.dumps(v))
_crd = st.builds(
    lambda spec: "kind: CustomResourceDefinition\nspec: " + spec + "\n",
    _yaml_value
    | st.builds(
        lambda g, k, v: json.dumps({"group": g, "names": {"kind": k}, "versions": v}),
        _json,
        _json,
        st.lists(
            st.dictionaries(st.sampled_from(["name", "served", "schema"]), _json, max_size=3), max_size=2
        ),
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_crd | st.text(max_size=200))
def test_any_crd_file_loads_or_is_refused_with_crd_dir_error(text: str, tmp_path: Path) -> None:
    directory = tmp_path / "crds"
    directory.mkdir(exist_ok=True)
    (directory / "x.yaml").write_text(text)
    try:
        CrdSchemas([directory])
    except CrdDirError as exc:
        assert str(exc).startswith(f"--crd-dir {directory}: ") and "\n" not in str(exc)
