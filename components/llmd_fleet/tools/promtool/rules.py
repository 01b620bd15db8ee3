"""`python -m llmd_fleet.tools.promtool check STACK...`: promtool over every stack's rendered alert rules.

For each stack it reads the rule groups of the PrometheusRule (or GMP Rules) object in
build/<stack>/manifests (render first), writes them as a Prometheus rule file, and runs

1. `promtool check rules` on it (syntax, PromQL, templates);
2. `promtool test rules` on the unit tests of llmd_fleet/observability/alerts.py: every alert fires on a
   synthetic series and stays silent on a healthy one.

3. the metric-name check: every metric a rule or a rendered dashboard (the ConfigMaps of
   Grafana's sidecar) reads is in the committed catalogue (infra/metrics_catalogue), counters with
   their `_total`.

Then a self-test proves the checks can fail: a rule with broken PromQL must be refused by
`check rules`, a test that expects an alert on the healthy series must fail `test rules`, and a
misspelt and a suffix-less counter must be refused by the name check.
Exit 0 when everything holds, 1 otherwise.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from llmd_fleet.observability.alerts import fleet_alerts, promtool_tests
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.observability import plan_observability
from llmd_fleet.tools.metrics_catalogue.catalogue import catalogue
from llmd_fleet.tools.promtool.build import BuildError, ensure
from llmd_fleet.tools.stack_file import read_stack_file, stack_config

RULE_KINDS = {("monitoring.coreos.com/v1", "PrometheusRule"), ("monitoring.googleapis.com/v1", "Rules")}


def rendered_groups(manifests: Path) -> list[dict[str, Any]]:
    """The rule groups of every rule object among the rendered manifests."""
    groups: list[dict[str, Any]] = []
    for path in sorted(manifests.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and (doc.get("apiVersion"), doc.get("kind")) in RULE_KINDS:
                groups += doc["spec"]["groups"]
    return groups


def rendered_dashboard_queries(manifests: Path) -> dict[str, list[str]]:
    """Dashboard file name -> every query of its panels, from the rendered ConfigMaps."""
    queries: dict[str, list[str]] = {}
    for path in sorted(manifests.rglob("configmap-*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("metadata", {}).get("labels", {}).get("grafana_dashboard") != "1":
                continue
            for key, text in doc.get("data", {}).items():
                board = json.loads(text)
                queries[key] = [
                    t["expr"] for p in board["panels"] for t in p.get("targets", []) if "expr" in t
                ]
    return queries


def name_problems(stack: str, groups: list[dict[str, Any]], dashboards: dict[str, list[str]]) -> list[str]:
    cat = catalogue()
    problems = [
        f"{stack}: rule {r.get('alert', r.get('record'))}: {p}"
        for g in groups
        for r in g["rules"]
        for p in cat.problems(r["expr"])
    ]
    problems += [
        f"{stack}: dashboard {name}: {p}"
        for name, exprs in dashboards.items()
        for e in exprs
        for p in cat.problems(e)
    ]
    return problems


def _run(promtool: Path, *args: str, cwd: Path) -> tuple[int, str]:
    proc = subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=1000))


def check_stack(promtool: Path, root: Path, stack: str, work: Path) -> list[str]:
    """Problems of one stack ([] when promtool accepts its rules and every unit test passes)."""
    manifests = root / "build" / stack / "manifests"
    if not manifests.is_dir():
        return [f"{stack}: {manifests} is missing: run `llmd-fleet render {stack}` first"]
    groups = rendered_groups(manifests)
    config = stack_config(read_stack_file(root / "stacks", stack))
    obs = plan_observability(config, plan_fleet(config))
    if config.observability.prometheus == "none":
        return [] if not groups else [f"{stack}: prometheus none renders rule objects"]
    if not groups:
        return [f"{stack}: no PrometheusRule or Rules object in {manifests}"]
    directory = work / stack
    directory.mkdir(parents=True)
    _dump(directory / "rules.yaml", {"groups": groups})
    tests = promtool_tests(config, obs, "rules.yaml")
    _dump(directory / "tests.yaml", tests)
    problems = []
    code, out = _run(promtool, "check", "rules", "rules.yaml", cwd=directory)
    if code != 0:
        problems.append(f"{stack}: promtool check rules:\n{out}")
    code, out = _run(promtool, "test", "rules", "tests.yaml", cwd=directory)
    if code != 0:
        problems.append(f"{stack}: promtool test rules:\n{out}")
    dashboards = rendered_dashboard_queries(manifests)
    names = name_problems(stack, groups, dashboards)
    problems += names
    queries = sum(len(q) for q in dashboards.values())
    print(
        f"{stack}: {len(dashboards)} dashboards ({queries} queries) and the rules read only "
        "catalogued metrics"
        if not names
        else f"{stack}: metric-name check FAILED"
    )
    rules = sum(len(g["rules"]) for g in groups)
    alerts = len(fleet_alerts(config, obs))
    print(
        f"{stack}: {rules} rules ({alerts} alerts) pass promtool check rules; "
        f"{len(tests['tests'])} unit tests {'pass' if not problems else 'FAILED'}"
    )
    return problems


def self_test(promtool: Path, work: Path) -> list[str]:
    """The checks must fail on a broken rule and on a wrong expectation."""
    directory = work / "self-test"
    directory.mkdir()
    problems = []
    _dump(
        directory / "broken.yaml",
        {"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "sum(rate(x[5m])"}]}]},
    )
    code, _ = _run(promtool, "check", "rules", "broken.yaml", cwd=directory)
    if code == 0:
        problems.append("self-test: promtool check rules accepted a rule with unbalanced parentheses")
    _dump(directory / "rules.yaml", {"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "up == 0"}]}]})
    wrong = {
        "rule_files": ["rules.yaml"],
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": 'up{job="a"}', "values": "1+0x10"}],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": "X", "exp_alerts": [{"exp_labels": {"job": "a"}}]}
                ],
            }
        ],
    }
    _dump(directory / "wrong.yaml", wrong)
    code, _ = _run(promtool, "test", "rules", "wrong.yaml", cwd=directory)
    if code == 0:
        problems.append(
            "self-test: promtool test rules passed a test that expects an alert on a healthy series"
        )
    cat = catalogue()
    for wrong_name in ("rate(vllm:num_preemtions_total[5m])", "rate(vllm:num_preemptions[5m])"):
        if not cat.problems(wrong_name):
            problems.append(f"self-test: the metric-name check accepted {wrong_name}")
    print(
        "self-test: a broken rule, a wrong expectation, a misspelt and a suffix-less counter are refused"
        if not problems
        else "self-test FAILED"
    )
    return problems


def main(argv: list[str]) -> int:
    root = Path.cwd()
    stacks = argv or sorted(
        p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (root / "stacks").glob("Pulumi.*.yaml")
    )
    try:
        promtool = ensure()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    version = subprocess.run([str(promtool), "--version"], capture_output=True, text=True, check=False).stdout
    print(f"{version.splitlines()[0] if version else 'promtool'} ({promtool})")
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="llmd-promtool-") as tmp:
        for stack in stacks:
            problems += check_stack(promtool, root, stack, Path(tmp))
        problems += self_test(promtool, Path(tmp))
    for problem in problems:
        print(f"FAILED {problem}")
    print(
        f"promtool: {len(stacks)} stacks, "
        f"{'all checks pass' if not problems else f'{len(problems)} problem(s)'}"
    )
    return 1 if problems else 0
