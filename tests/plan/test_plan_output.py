"""`llmd-fleet plan` fits 100 columns; `--json` prints the documented schema (docs/plan-json.md)."""

import json
import re

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.cli.plan_output import SCHEMA, fit_tables
from tests.conftest import REPO, all_stacks


@pytest.mark.parametrize("stack", all_stacks())
def test_plan_fits_100_columns(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", stack]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# plan of {stack}: ")
    assert max(len(line) for line in out.splitlines()) <= 100


@pytest.mark.parametrize("stack", all_stacks())
def test_plan_json_is_the_documented_schema(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", stack, "--json", "--gpu-hour-usd", "2.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == SCHEMA and doc["stack"] == stack
    assert doc["gpus"] == sum(r["gpus"] for r in doc["roles"])
    assert doc["nodes"] == sum(r["nodes"] for r in doc["roles"])
    documented = set(re.findall(r"^\| `([A-Za-z.]+)` \|", (REPO / "docs" / "plan-json.md").read_text(), re.M))
    keys = {k for k in doc} | {f"roles.{k}" for k in doc["roles"][0]}
    keys |= {f"roles.memory.{k}" for k in doc["roles"][0]["memory"]} | {
        f"roles.pod.{k}" for k in doc["roles"][0]["pod"]
    }
    keys |= {f"nodeGroups.{k}" for k in doc["nodeGroups"][0]} | {f"router.{k}" for k in doc["router"]}
    keys |= {f"cost.{k}" for k in doc.get("cost", {})}
    throughput = doc.get("throughput", {})
    keys |= {f"throughput.{k}" for k in throughput}
    keys |= {f"throughput.splits.{k}" for s in throughput.get("splits", [])[:1] for k in s}
    keys |= {f"throughput.roles.{r}.{k}" for r, v in throughput.get("roles", {}).items() for k in v}
    # every stack but the simulator's is modelled; each of those has the whole documented set
    assert ("throughput" in doc) == (stack != "local-sim")
    if stack == "local-sim":
        documented = {k for k in documented if not k.startswith("throughput")}
    assert keys == documented


def test_a_narrow_table_is_kept_and_a_wide_one_becomes_records() -> None:
    narrow = "| a | b |\n|---|---|\n| x | y |"
    assert fit_tables(narrow) == narrow
    wide = "| figure | query |\n|---|---|\n| ranks | " + "q " * 80 + "|"
    lines = fit_tables(wide).splitlines()
    assert lines[0] == "- ranks" and lines[1].startswith("    query: q q")
    assert max(map(len, lines)) <= 100


@pytest.mark.parametrize("stack", all_stacks())
def test_the_hourly_cost_is_the_gpus_at_the_price(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", stack, "--json", "--gpu-hour-usd", "2.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cost = doc["cost"]
    assert cost["gpus"] == doc["gpus"] and cost["perHourUsd"] == pytest.approx(2.5 * doc["gpus"])
    peak = sum(r["maxInstances"] * r["nodesPerInstance"] * r["gpusPerNode"] for r in doc["roles"])
    assert cost["gpusAtMaxima"] == peak >= doc["gpus"]
    assert run(["plan", stack, "--gpu-hour-usd", "2.5"]) == 0
    out = capsys.readouterr().out
    assert f"cost: {doc['gpus']} GPUs x $2.50 per GPU-hour = ${2.5 * doc['gpus']:,.2f} per hour" in out
    assert run(["plan", stack]) == 0
    assert "cost:" not in capsys.readouterr().out  # no price, no cost


@pytest.mark.parametrize("price", ["0", "-1", "1e9", "nan", "inf", "abc", ""])
def test_a_price_outside_0_to_1000_is_refused(price: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run(["plan", "onprem-h100", "--gpu-hour-usd", price])
    assert caught.value.code == 2
    assert "--gpu-hour-usd" in capsys.readouterr().err
