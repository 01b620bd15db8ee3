"""prometheus-operator's config generator in the day-two replay (devtools/daytwo/operator_config.py):
the pin, the Prometheus object, what the replay changes in the generator's configuration, and
that discovery (devtools/daytwo/discovery.py) gives the labels the generator's own selection
relabelling reads, on the configuration the pinned operator wrote for the day-two stack (a fixture)."""

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.daytwo import discovery, operator_config
from llmd_fleet.versions import versions

ROOT = Path(__file__).resolve().parents[2]
GENERATED = yaml.safe_load((ROOT / "tests/fixtures/daytwo/operator-config.yaml").read_text())
MANIFESTS = ROOT / "tests/golden/day-two/manifests/llm-d"


def test_the_wrapper_requires_the_pinned_operator() -> None:
    gomod = (operator_config.GOMOD_DIR / "go.mod").read_text()
    pinned = versions().tools.prometheus_operator
    assert re.search(rf"^\s*{re.escape(operator_config.MODULE)} {re.escape(pinned)}$", gomod, re.M)
    # The operator the kube-prometheus-stack chart installs (images/versions.toml says which).
    toml = (ROOT / "images/versions.toml").read_text()
    chart = toml.split("\n[charts.kube-prometheus-stack]\n")[1].split("\n[")[0]
    assert f"ships operator {pinned}," in chart.replace("\n# ", " ")


def test_ensure_refuses_a_wrapper_of_another_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "go.mod").write_text(f"module x\n\nrequire {operator_config.MODULE} v0.1.0\n")
    monkeypatch.setattr(operator_config, "GOMOD_DIR", tmp_path)
    with pytest.raises(operator_config.BuildError, match=r"\[tools\].prometheus-operator"):
        operator_config.ensure()


def test_the_prometheus_object_selects_every_monitor_with_the_crds_defaults() -> None:
    spec = operator_config.prometheus_object("3.99.0")["spec"]
    assert spec["version"] == "v3.99.0"
    for key in ("serviceMonitorSelector", "serviceMonitorNamespaceSelector", "podMonitorSelector"):
        assert spec[key] == {}
    assert spec["scrapeInterval"] == spec["evaluationInterval"] == "30s"
    assert spec["serviceDiscoveryRole"] == "EndpointSlice"


def test_the_replay_changes_discovery_rule_files_and_the_reloaders_variables_only(tmp_path: Path) -> None:
    out = operator_config.for_replay(GENERATED, tmp_path, tmp_path / "rules.yaml")
    assert out["rule_files"] == [str(tmp_path / "rules.yaml")]
    assert out["global"]["external_labels"]["prometheus_replica"] == "prometheus-day-two-0"
    assert "$(" not in yaml.safe_dump(out)
    assert [j["job_name"] for j in out["scrape_configs"]] == [
        j["job_name"] for j in GENERATED["scrape_configs"]
    ]
    for before, after in zip(GENERATED["scrape_configs"], out["scrape_configs"], strict=True):
        assert "kubernetes_sd_configs" not in after
        (sd,) = after["file_sd_configs"]
        assert sd["files"] == [str(operator_config.job_file(tmp_path, before["job_name"]))]
        rest = {k: v for k, v in before.items() if k != "kubernetes_sd_configs"}
        assert {k: v for k, v in after.items() if k != "file_sd_configs"} == operator_config.expand(rest)
    # The sharding rule keeps shard 0's targets once `$(SHARD)` is expanded.
    keep = [r for r in out["scrape_configs"][0]["relabel_configs"] if "__tmp_disable_sharding" in str(r)]
    assert keep and keep[-1]["regex"] == "0;|.+;.+"


def test_a_failed_pass_is_an_error_with_its_message(tmp_path: Path) -> None:
    fake = tmp_path / "operator-config"
    fake.write_text("#!/bin/sh\necho 'operator-config: the API server said no' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(operator_config.GenerateError, match="the API server said no"):
        operator_config.generate(fake, tmp_path / "kubeconfig", tmp_path / "p.yaml")
    fake.write_text("#!/bin/sh\necho 'global: {}'\necho 'level=WARN msg=\"skipping object\"' >&2\n")
    generated = operator_config.generate(fake, tmp_path / "kubeconfig", tmp_path / "p.yaml")
    assert generated.config == {"global": {}}
    assert generated.warnings == ['level=WARN msg="skipping object"']
    assert subprocess.run([str(fake)], capture_output=True, check=False).returncode == 0


# --- the generator's selection over discovery's labels ------------------------------------------


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((MANIFESTS / name).read_text())
    return loaded


def as_pod(name: str, template: dict[str, Any], ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "llm-d", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
        "status": {"podIP": ip, "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def day_two_pods() -> list[dict[str, Any]]:
    """One pod per rendered pod template of the day-two stack: prefill, decode, picker, tokenizer."""
    roles = manifest("disaggregatedset-glm52.yaml")["spec"]["roles"]
    templates = [(r["name"], r["spec"]["leaderWorkerTemplate"]["workerTemplate"]) for r in roles]
    templates += [
        (d, manifest(f"deployment-{d}.yaml")["spec"]["template"]) for d in ("glm52-epp", "glm52-tokenizer")
    ]
    return [as_pod(name, t, f"10.244.1.{i}") for i, (name, t) in enumerate(templates)]


def selected(job: dict[str, Any], labels: dict[str, str]) -> bool:
    """The generator's `keep` and `drop` rules over discovered labels, as Prometheus applies them
    (the regex anchored, source labels joined by the separator); the sharding rules, which read
    labels the relabelling itself sets, are left out."""
    for rule in job["relabel_configs"]:
        action = rule.get("action", "replace")
        sources = rule.get("source_labels") or []
        if action not in ("keep", "drop") or any(s.startswith("__tmp") for s in sources):
            continue
        value = rule.get("separator", ";").join(labels.get(s, "") for s in sources)
        if (re.fullmatch(rule.get("regex", "(.*)"), value) is not None) != (action == "keep"):
            return False
    return True


@pytest.mark.parametrize("job", GENERATED["scrape_configs"], ids=lambda j: j["job_name"])
def test_the_generators_selection_finds_the_monitored_port_of_the_monitored_pods(job: dict[str, Any]) -> None:
    kind, _ns, name, index = job["job_name"].split("/")
    monitor = manifest(f"{kind.lower()}-{name}.yaml")
    endpoints = monitor["spec"]["podMetricsEndpoints" if kind == "podMonitor" else "endpoints"]
    port = endpoints[int(index)]["port"]
    services = [manifest("service-glm52-epp.yaml"), manifest("service-glm52-tokenizer.yaml")]
    groups = discovery.job_groups(job, day_two_pods(), services)
    kept = [g["labels"] for g in groups if selected(job, g["labels"])]
    assert kept, (
        f"{job['job_name']}: the generator's relabelling keeps none of {len(groups)} discovered targets"
    )
    port_label = (
        "__meta_kubernetes_endpointslice_port_name"
        if kind == "serviceMonitor"
        else "__meta_kubernetes_pod_container_port_name"
    )
    assert {labels[port_label] for labels in kept} == {port}
    wanted = monitor["spec"]["selector"]["matchLabels"]
    prefix = (
        "__meta_kubernetes_service_label_" if kind == "serviceMonitor" else "__meta_kubernetes_pod_label_"
    )
    for labels in kept:
        for key, value in wanted.items():
            assert labels[prefix + re.sub(r"[^a-zA-Z0-9_]", "_", key)] == value
