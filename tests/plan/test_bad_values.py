"""The #45 keys refuse bad values with the key named, exit 2, no traceback: mtpTokens outside
0..8, a negative or uneven redundantExperts, a non-boolean dualBatchOverlap, an accelerator the
plan has no datasheet for, and --cache-hit outside 0 to below 1 (tests/plan/test_split.py)."""

from pathlib import Path

import pytest
import yaml

from llmd_fleet.cli.main import run
from tests.support import STACKS_DIR

BAD = [
    ("llmd-fleet:serving", ("roles", "decode", "mtpTokens"), 9, "must be <= 8 tokens (got 9)"),
    ("llmd-fleet:serving", ("roles", "decode", "mtpTokens"), -1, "must be >= 0 tokens (got -1)"),
    ("llmd-fleet:serving", ("roles", "decode", "redundantExperts"), -1, "must be >= 0 experts (got -1)"),
    ("llmd-fleet:serving", ("roles", "decode", "redundantExperts"), 3, "allowed: 0, 64, 128"),
    ("llmd-fleet:serving", ("roles", "decode", "dualBatchOverlap"), "maybe", "valid boolean"),
    (
        "llmd-fleet:fleet",
        ("nodeGroups", "h100", "accelerator"),
        "H300",
        "must be one of 'H100-80GB', 'H200-141GB', 'H800-80GB' or 'none'",
    ),
]


@pytest.mark.parametrize(("section", "path", "value", "words"), BAD, ids=lambda v: str(v))
def test_a_bad_value_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section, path, value, words
) -> None:
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.onprem-h100.yaml").read_text())
    node = doc["config"][section]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(yaml.safe_dump(doc))
    assert run(["plan", str(stack)]) == 2
    err = capsys.readouterr().err
    key = f"{section}.{'.'.join(path)}"
    line = next(line for line in err.splitlines() if key in line)
    assert words in line and "Traceback" not in err


@pytest.mark.parametrize("mtp", range(0, 9))
def test_every_mtp_count_from_0_to_8_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mtp: int
) -> None:
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.onprem-h100.yaml").read_text())
    for role in doc["config"]["llmd-fleet:serving"]["roles"].values():
        role["mtpTokens"] = mtp
    stack = tmp_path / "Pulumi.mtp.yaml"
    stack.write_text(yaml.safe_dump(doc))
    assert run(["plan", str(stack), "--json"]) == 0
    capsys.readouterr()
