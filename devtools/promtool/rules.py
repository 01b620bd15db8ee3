"""`python -m devtools.promtool check STACK...`: promtool over every stack's rendered alert rules.

For each stack it reads the rule groups of the PrometheusRule (or GMP Rules) object in
build/<stack>/manifests (render first), writes them as a Prometheus rule file, and runs

1. `promtool check rules` on it (syntax, PromQL, templates);
2. `promtool test rules` on the unit tests of llmd_fleet/layers/observability/alerts.py: every alert
fires on a
   synthetic series and stays silent on a healthy one.

3. the metric-name check: every metric a rule or a rendered dashboard (the ConfigMaps of
   Grafana's sidecar) reads is in the committed catalogue (infra/metrics_catalogue), counters with
   their `_total`.
4. with `serving.autoscaling`: the PromQL of every rendered KEDA ScaledObject's prometheus
   trigger through `check rules` (as recording rules), the name check, and `test rules` on
   synthetic series: prefill's backlog counts the leader endpoint picker's prefill tokens only
   (not the standby's stale series, not decode endpoints, not another producer's), and stops
   counting a removed endpoint whose in-flight series the router never prunes (its
   `llm_d_epp_per_endpoint_queue_size` series ends); decode's KV usage averages decode's ranks
   only.

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

from devtools.metrics_catalogue.catalogue import catalogue
from devtools.promtool.build import BuildError, ensure
from llmd_fleet.cli.stack_file import read_stack_file, stack_config, stack_names
from llmd_fleet.layers.observability.alerts import fleet_alerts, promtool_tests, rule_groups
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.observability import plan_observability
from llmd_fleet.stack.model import StackConfig, model_views
from llmd_fleet.stack.plans import plan_models

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
    if config.observability.prometheus == "none":
        return [] if not groups else [f"{stack}: prometheus none renders rule objects"]
    if not groups:
        return [f"{stack}: no PrometheusRule or Rules object in {manifests}"]
    problems = []
    alerts = tests_run = 0
    # One rule group and its unit tests per model (`llmd-fleet:models`; a single model has one):
    # each model's alerts select its own series, so each is tested on its own.
    for view, plan in zip(model_views(config), plan_models(config), strict=True):
        obs = plan_observability(view, plan)
        name = rule_groups(obs)[0]["name"]
        own = [g for g in groups if g["name"] == name]
        if not own:
            problems.append(f"{stack}: no rule group {name!r} for model {view.serving.name}")
            continue
        directory = work / stack / view.serving.name if config.models else work / stack
        directory.mkdir(parents=True)
        _dump(directory / "rules.yaml", {"groups": own})
        tests = promtool_tests(obs, "rules.yaml")
        _dump(directory / "tests.yaml", tests)
        code, out = _run(promtool, "check", "rules", "rules.yaml", cwd=directory)
        if code != 0:
            problems.append(f"{stack}: promtool check rules:\n{out}")
        code, out = _run(promtool, "test", "rules", "tests.yaml", cwd=directory)
        if code != 0:
            problems.append(f"{stack}: promtool test rules:\n{out}")
        alerts += len(fleet_alerts(obs))
        tests_run += len(tests["tests"])
    directory = work / stack
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
    problems += check_scaling_queries(promtool, manifests, config, directory)
    rules = sum(len(g["rules"]) for g in groups)
    print(
        f"{stack}: {rules} rules ({alerts} alerts) pass promtool check rules; "
        f"{tests_run} unit tests {'pass' if not problems else 'FAILED'}"
    )
    return problems


def rendered_scaling_queries(manifests: Path) -> dict[str, str]:
    """ScaledObject name -> the query of its prometheus trigger."""
    queries: dict[str, str] = {}
    for path in sorted(manifests.rglob("scaledobject-*.yaml")):
        obj = yaml.safe_load(path.read_text())
        for trigger in obj["spec"]["triggers"]:
            if trigger.get("type") == "prometheus":
                queries[obj["metadata"]["name"]] = trigger["metadata"]["query"]
    return queries


def scaling_query_tests(config: StackConfig, rule_file: str) -> dict[str, Any]:
    """promtool unit tests of the scaling queries (recorded as `scaling:<role>`): which series
    they may read and which they must not."""
    ns, pool = config.serving.namespace, config.serving.name
    scaling = config.serving.autoscaling
    assert scaling is not None
    lease = plan_observability(config, plan_fleet(config)).leader_lease
    tests: list[dict[str, Any]] = []
    if scaling.prefill.enabled:
        rate = scaling.prefill.prefill_tokens_per_second
        assert rate is not None

        def tokens(epp: str, endpoint: str, value: int, producer: str = "inflight-load") -> dict[str, str]:
            labels = f'namespace="{ns}", pod="{epp}", endpoint_name="{endpoint}", producer_name="{producer}"'
            return {"series": f"llm_d_epp_inflight_tokens{{{labels}}}", "values": f"{value}+0x5"}

        def live(epp: str, endpoint: str, values: str = "0+0x5") -> dict[str, str]:
            # Rebuilt from the EPP's live endpoints at every scrape: a removed endpoint's series
            # ends (a staleness marker), unlike the in-flight gauge (llm-d-router #2529).
            labels = f'namespace="{ns}", pod="{epp}", name="{pool}", model_server_endpoint="{endpoint}"'
            return {"series": f"llm_d_epp_per_endpoint_queue_size{{{labels}}}", "values": values}

        live_prefill = (f"{pool}-0-5d8f7c6b9-prefill-0-rank-0", f"{pool}-0-5d8f7c6b9-prefill-1-3")
        removed = f"{pool}-0-5d8f7c6b9-prefill-2-1"
        series = [
            # The leader: two prefill ranks' in-flight prompt tokens, and a decode endpoint's.
            tokens(f"{pool}-epp-0", live_prefill[0], 3 * rate),
            tokens(f"{pool}-epp-0", live_prefill[1], rate),
            tokens(f"{pool}-epp-0", f"{pool}-0-7f9c8d6a5-decode-0", 50 * rate),
            # Another producer's series of a live prefill endpoint: not this config's counter.
            tokens(f"{pool}-epp-0", live_prefill[0], 70 * rate, producer="other-inflight"),
            # A removed prefill endpoint: its in-flight series stays frozen at its last value,
            # while the live-endpoint series ends with the endpoint after the first minute.
            tokens(f"{pool}-epp-0", removed, 20 * rate),
            live(f"{pool}-epp-0", removed, "0 0 stale"),
            *(live(f"{pool}-epp-0", e) for e in (*live_prefill, f"{pool}-0-7f9c8d6a5-decode-0")),
        ]
        expected = 4.0
        if lease is not None:
            # The standby still exports a stale, larger series (llm-d-router #2529).
            series.append(tokens(f"{pool}-epp-1", live_prefill[0], 40 * rate))
            series += [live(f"{pool}-epp-1", e) for e in live_prefill]
            for epp, leader in ((f"{pool}-epp-0", 1), (f"{pool}-epp-1", 0)):
                labels = f'namespace="{ns}", pod="{epp}", name="{lease}"'
                series.append(
                    {"series": f"leader_election_master_status{{{labels}}}", "values": f"{leader}+0x5"}
                )
        tests.append(
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    # While the third endpoint lives its tokens count ...
                    {
                        "expr": "scaling:prefill",
                        "eval_time": "1m",
                        "exp_samples": [{"labels": "scaling:prefill", "value": expected + 20}],
                    },
                    # ... and once it is removed they no longer do: the backlog falls back.
                    {
                        "expr": "scaling:prefill",
                        "eval_time": "3m",
                        "exp_samples": [{"labels": "scaling:prefill", "value": expected}],
                    },
                ],
            }
        )
        # No request in flight: zero backlog, not an empty result.
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": f'up{{namespace="{ns}"}}', "values": "1+0x5"}],
                "promql_expr_test": [
                    {
                        "expr": "scaling:prefill",
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "scaling:prefill", "value": 0}],
                    }
                ],
            }
        )
    if scaling.decode.enabled:

        def usage(role: str, pod: str, engine: int, value: float) -> dict[str, str]:
            labels = f'namespace="{ns}", role="{role}", pod="{pod}", engine="{engine}"'
            return {"series": f"vllm:kv_cache_usage_perc{{{labels}}}", "values": f"{value}+0x5"}

        tests.append(
            {
                "interval": "1m",
                "input_series": [
                    usage("decode", f"{pool}-decode-0", 0, 0.5),
                    usage("decode", f"{pool}-decode-0", 1, 0.75),
                    usage("decode", f"{pool}-decode-1", 0, 1),
                    # Prefill's cache does not count.
                    usage("prefill", f"{pool}-prefill-0", 0, 0.01),
                ],
                "promql_expr_test": [
                    {
                        "expr": "scaling:decode",
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "scaling:decode", "value": 0.75}],
                    }
                ],
            }
        )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


def check_scaling_queries(promtool: Path, manifests: Path, config: StackConfig, work: Path) -> list[str]:
    """With `serving.autoscaling`: the ScaledObjects' PromQL through promtool and the catalogue."""
    queries = rendered_scaling_queries(manifests)
    if config.serving.autoscaling is None or not queries:
        return []
    rules = []
    for name, query in sorted(queries.items()):
        role = name.removeprefix(f"{config.serving.name}-")
        rules.append({"record": f"scaling:{role}", "expr": query})
    _dump(work / "scaling.yaml", {"groups": [{"name": "scaling", "rules": rules}]})
    _dump(work / "scaling-tests.yaml", scaling_query_tests(config, "scaling.yaml"))
    problems = [
        f"{config.serving.name}: {problem}" for q in queries.values() for problem in catalogue().problems(q)
    ]
    code, out = _run(promtool, "check", "rules", "scaling.yaml", cwd=work)
    if code != 0:
        problems.append(f"promtool check rules (ScaledObject queries):\n{out}")
    code, out = _run(promtool, "test", "rules", "scaling-tests.yaml", cwd=work)
    if code != 0:
        problems.append(f"promtool test rules (ScaledObject queries):\n{out}")
    print(
        f"{len(queries)} ScaledObject queries pass promtool check and their unit tests"
        if not problems
        else "ScaledObject queries FAILED"
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
    stacks = argv or stack_names(root / "stacks")
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
