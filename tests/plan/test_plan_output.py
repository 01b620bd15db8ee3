"""`llmd-fleet plan` fits 100 columns; `--json` prints the documented schema (docs/plan-json.md)."""

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.cli.plan_output import SCHEMA, fit_tables
from llmd_fleet.models.kimi_k2 import KIMI_K2_INSTRUCT as K2
from llmd_fleet.plan.memory import kv_bytes_per_token, param_counts, total_params
from tests.support import REFERENCE_STACK, REPO, STACKS_DIR, all_stacks, stack_raw_config, vllm_stacks


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
    assert ("throughput" in doc) == (stack in vllm_stacks())
    multi = {"models", "totalGpus", "totalNodes"}
    if "models" in stack_raw_config(stack):
        assert doc["totalGpus"] == sum(m["plan"]["gpus"] for m in doc["models"]) > doc["gpus"]
        assert [m["plan"]["schema"] for m in doc["models"]] == [SCHEMA] * len(doc["models"])
    else:
        documented -= multi
    if stack not in vllm_stacks():
        documented = {k for k in documented if not k.startswith("throughput")}
    # `canary` only with serving.canary (tests/layers/serving/test_canary.py checks its fields).
    assert "canary" not in doc
    documented = {k for k in documented if not k.startswith("canary")}
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


def _write_stack(tmp_path: Path, raw: dict[str, Any], name: str = "probe") -> Path:
    text = (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    secrets = {k: v for k, v in doc["config"].items() if isinstance(v, dict) and set(v) == {"secure"}}
    doc["config"] = {**{f"llmd-fleet:{k}": v for k, v in raw.items()}, **secrets}
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return tmp_path


def test_a_hand_entered_field_off_the_card_exits_2_naming_the_key_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = copy.deepcopy(stack_raw_config())
    raw["model"]["layers"] = 61
    code = run(["--stacks-dir", str(_write_stack(tmp_path, raw)), "plan", "probe"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "llmd-fleet:model.layers" in err and "num_hidden_layers is 78" in err


def test_a_family_without_a_published_acceptance_says_it_gets_no_mtp_gain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = copy.deepcopy(stack_raw_config())
    raw["model"].update(
        id="moonshotai/Kimi-K2-Instruct",
        totalParamsB=round(total_params(K2) / 1e9, 1),
        routedExpertParamsB=round(K2.moe_layers * param_counts(K2).routed_experts_per_moe_layer / 1e9, 1),
        activeParamsB=32,
        layers=61,
        experts=384,
        expertsPerToken=8,
        kvBytesPerToken=kv_bytes_per_token(K2, "fp8").total,
        maxContextTokens=131072,
    )
    for role in raw["serving"]["roles"].values():
        role["maxModelLen"] = min(role["maxModelLen"], 131072)
    raw["workload"]["refusedPercentile"] = "p50"
    code = run(["--stacks-dir", str(_write_stack(tmp_path, raw)), "plan", "probe"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "none counted: no published MTP acceptance for Kimi-K2-Instruct" in out


def test_the_quickstart_plan_speaks_its_own_stack(capsys: pytest.CaptureFixture[str]) -> None:
    """No 195k contexts on a 32k stack, no rows of zeros, no dashboard column without Prometheus,
    and the dense-MLA bf16 KV labelled as such."""
    assert run(["plan", "quickstart-h100"]) == 0
    out = capsys.readouterr().out
    assert "195,000" not in out and "195k" not in out
    assert "contexts of 8,317" in out
    assert "- MTP layer" not in out and "indexer key cache" not in out and "fp8_ds_mla" not in out
    assert "- MLA cache (bf16 latent + RoPE key)" in out
    live = out.split("## What to expect live", 1)[1]
    assert "dashboard / panel" not in live and "query:" not in live


def test_the_reference_plan_keeps_its_dashboards_and_dsa_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", REFERENCE_STACK]) == 0
    out = capsys.readouterr().out
    assert "dashboard / panel" in out.split("## What to expect live", 1)[1]
    assert "- sparse-MLA cache (fp8_ds_mla)" in out and "- indexer key cache" in out and "- MTP layer" in out
