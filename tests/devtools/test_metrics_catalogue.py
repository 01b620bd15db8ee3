"""The metric catalogue (infra/metrics_catalogue) and the check that holds every rule and dashboard
to it; promtool's build helpers (infra/promtool)."""

import json
from pathlib import Path

import pytest

from devtools.metrics_catalogue.catalogue import CATALOGUE, Catalogue, catalogue
from devtools.metrics_catalogue.promql import PromqlError, metric_names
from devtools.metrics_catalogue.router import documented, exposed
from devtools.metrics_catalogue.vllm import differences, engine_configs
from devtools.promtool.build import BuildError, build_key, release, wrapper_problem
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.layers.observability.alerts import fleet_alerts
from llmd_fleet.layers.observability.dashboards import dashboard_queries, fleet_dashboards
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.plan.observability import plan_observability
from tests.support import STACKS_DIR, all_stacks


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'sum by (role) (increase(vllm:num_preemptions_total{namespace="x"}[5m])) > 0',
            {"vllm:num_preemptions_total"},
        ),
        ("histogram_quantile(0.9, sum by (le) (rate(a_bucket[5m]))) > 0.45", {"a_bucket"}),
        ('(max(b{name="pool"}) or vector(0)) < 1', {"b"}),
        (
            "sum(rate(a[5m])) / sum(rate(b[$__range])) * 60 and on(x) group_left(y) c offset 5m",
            {"a", "b", "c"},
        ),
        ('count(up{role="decode"} == 1) < 320', {"up"}),
        ('{__name__="foo"} + bar{l="sum by (x)"}', {"foo", "bar"}),
        ("1 + 2e3 - 0x1f", set()),
    ],
)
def test_promql_metric_names(expr, names):
    assert metric_names(expr) == names


def test_promql_refuses_an_unclosed_selector():
    with pytest.raises(PromqlError):
        metric_names('rate(x{a="b"[5m])')


def test_a_misspelt_or_suffix_less_name_is_refused_with_the_fix():
    cat = catalogue()
    assert cat.problems('rate(vllm:num_preemptions_total{namespace="x"}[5m])') == []
    assert cat.problems("rate(vllm:num_preemptions[5m])") == [
        "vllm:num_preemptions is a counter and is exposed as vllm:num_preemptions_total: "
        "add the _total suffix"
    ]
    (misspelt,) = cat.problems("rate(vllm:num_preemtions_total[5m])")
    assert "not in the metric catalogue" in misspelt and "vllm:num_preemptions_total" in misspelt
    (histogram,) = cat.problems("vllm:nixl_xfer_time_seconds > 1")
    assert "histogram" in histogram and "vllm:nixl_xfer_time_seconds_bucket" in histogram
    (gauge,) = cat.problems("vllm:kv_cache_usage_perc_total")
    assert "vllm:kv_cache_usage_perc is a gauge" in gauge
    # Go counters carry their _total in the registered name: no second one.
    assert cat.problems("llm_d_epp_request_total_total")


def test_the_check_fails_on_a_stack_that_reads_a_wrong_name():
    fake = Catalogue({"vllm:x": {"type": "counter", "exposed": ["vllm:x_total"], "source": "vllm"}})
    assert fake.problems("rate(vllm:x[5m])") and not fake.problems("rate(vllm:x_total[5m])")


@pytest.mark.parametrize("stack", all_stacks())
def test_every_rule_and_dashboard_reads_catalogued_metrics(stack):
    config = stack_config(read_stack_file(STACKS_DIR, stack))
    obs = plan_observability(config, plan_fleet(config))
    expressions = [a.expr for a in fleet_alerts(obs)]
    expressions += [q for board in fleet_dashboards(obs) for q in dashboard_queries(board)]
    problems = [p for expr in expressions for p in catalogue().problems(expr)]
    assert not problems, problems


def test_the_catalogue_records_its_sources():
    data = json.loads(CATALOGUE.read_text())
    sources = {entry["source"] for entry in data["families"].values()}
    assert sources == set(data["sources"]) == {"vllm", "llm-d-router", "controller-runtime", "prometheus"}
    families = data["families"]
    assert families["vllm:num_preemptions"]["exposed"] == ["vllm:num_preemptions_total"]
    assert families["vllm:nixl_num_failed_transfers"]["type"] == "counter"
    assert families["llm_d_epp_flow_control_queue_bytes"]["file"].endswith(".go")
    assert all(e["roles"] for e in families.values() if e["source"] == "vllm")


def test_router_docs_parser_applies_each_sections_prefix():
    text = "\n".join(
        [
            "## Metrics catalog",
            "### Scheduler",
            "| Name | Type | Notes |",
            "| `scheduler_e2e_duration_seconds` | Histogram | x |",
            "#### `flow_control_queue_bytes`",
            "*   **Type:** Gauge",
            "### KV-cache index",
            "Prefix `llm_d_router_epp_`. Registered only when enabled.",
            "| `kv_cache_index_lookup_hits_total` | Counter | x |",
            "## Deprecated series",
            "| `inference_pool_*` (pool averages) | x |",
        ]
    )
    assert documented(text) == {
        "llm_d_epp_scheduler_e2e_duration_seconds": "histogram",
        "llm_d_epp_flow_control_queue_bytes": "gauge",
        "llm_d_router_epp_kv_cache_index_lookup_hits_total": "counter",
    }
    assert exposed("a", "histogram") == ["a_bucket", "a_sum", "a_count"]
    assert exposed("a_total", "counter") == ["a_total"]


def test_vllm_comparison_reports_every_kind_of_difference():
    committed = {
        "vllm:a": {"type": "counter", "exposed": ["vllm:a_total"], "roles": ["decode"], "source": "vllm"},
        "vllm:gone": {"type": "gauge", "exposed": ["vllm:gone"], "roles": ["decode"], "source": "vllm"},
        "up": {"type": "gauge", "exposed": ["up"], "source": "prometheus"},
    }
    extracted = {
        "vllm:a": {"type": "gauge", "exposed": ["vllm:a"], "roles": ["decode"], "source": "vllm"},
        "vllm:new": {
            "type": "counter",
            "exposed": ["vllm:new_total"],
            "roles": ["prefill"],
            "source": "vllm",
        },
    }
    lines = differences(committed, extracted)
    assert "missing from the catalogue: vllm:new (counter)" in lines
    assert "no longer registered by vLLM: vllm:gone" in lines
    assert any(line.startswith("vllm:a: type counter") for line in lines)
    assert differences(extracted, extracted) == []


def test_engine_configs_cover_both_roles_with_their_connectors():
    configs = engine_configs(STACKS_DIR, ["onprem-h100"])
    assert {c["role"] for c in configs} == {"prefill", "decode"}
    for config in configs:
        connectors = [
            c["kv_connector"] for c in config["kv_transfer_config"]["kv_connector_extra_config"]["connectors"]
        ]
        assert connectors == ["NixlConnector", "OffloadingConnector"]
        assert config["num_speculative_tokens"] == 3


def test_promtool_module_tags_and_wrapper():
    assert release("v0.399.7") == "3.99.7"
    with pytest.raises(BuildError):
        release("v3.99.7")
    gomod = b"module x\n\nrequire github.com/prometheus/prometheus v0.399.7\n"
    assert wrapper_problem("v0.399.7", {"go.mod": gomod, "go.sum": b""}) is None
    assert "does not require" in (wrapper_problem("v0.398.0", {"go.mod": gomod, "go.sum": b""}) or "")
    assert "go.sum" in (wrapper_problem("v0.399.7", {"go.mod": gomod}) or "")
    files = {"go.mod": gomod, "go.sum": b"a"}
    assert build_key("v0.399.7", "go1.26", files) != build_key(
        "v0.399.7", "go1.26", {**files, "go.sum": b"b"}
    )
    assert build_key("v0.399.7", "go1.26", files) != build_key("v0.399.7", "go1.27", files)


def test_the_committed_wrapper_builds_the_pinned_module():
    from devtools.promtool.build import GOMOD_DIR, wrapper_files
    from llmd_fleet.versions import versions

    assert wrapper_problem(versions().tools.promtool, wrapper_files()) is None
    assert (Path(GOMOD_DIR) / "tools.go").read_text().count("cmd/promtool") == 1
