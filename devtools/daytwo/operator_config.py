"""The day-two replay's scrape configuration, written by prometheus-operator's own code
(docs/day-two.md, "Prometheus and alerts").

`devtools/daytwo/operator_config` is a small Go program over prometheus-operator's `pkg/prometheus`
at `[tools].prometheus-operator` (the operator [charts.kube-prometheus-stack] ships): one pass of
the operator's reconciliation of a Prometheus object, without its StatefulSet. Its
`ResourceSelector` lists the ServiceMonitors and PodMonitors from the twin's API server, validates
them and reads the Secrets they reference into the asset store (the metrics reader's token among
them); its `ConfigGenerator` writes the configuration the operator would put in the
`prometheus-<name>` Secret. The replay runs it again whenever the monitors or that token change,
as the operator reconciles on their events, and reloads Prometheus (`/-/reload`, as the operator's
config-reloader does).

Two things the replay changes in what the generator writes, and only these: each job's
`kubernetes_sd_configs` become `file_sd_configs` whose targets carry the labels Prometheus'
Kubernetes discovery would give (devtools/daytwo/discovery.py: the replay's Prometheus has no
Kubernetes discovery, and its pickers are processes, not the twin's picker pods), and `rule_files`
names the rendered PrometheusRules' file (the operator mounts them from ConfigMaps).

Building: `go build` of the wrapper module into `<cache>/operator-config-<key>/operator-config`,
keyed by the recipe, Go's version and the module's files (devtools/tool_cache.py), in prebuild's
Go lane before Prometheus.
"""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devtools import tool_cache

MODULE = "github.com/prometheus-operator/prometheus-operator"
GOMOD_DIR = Path(__file__).resolve().parent / "operator_config"
PROMETHEUS_NAME = "day-two"
PROMETHEUS_NAMESPACE = "monitoring"
GENERATE_TIMEOUT_S = 60
CRD_DEFAULT_INTERVAL = "30s"
# The variables the operator's config-reloader expands in the generated configuration (`$(NAME)`,
# from the StatefulSet's environment): its one pod's name (the `prometheus_replica` external
# label) and its shard (the sharding relabelling's `$(SHARD)`; one shard, 0).
RELOADER_ENV = {"POD_NAME": f"prometheus-{PROMETHEUS_NAME}-0", "SHARD": "0"}


class BuildError(Exception):
    """The generator could not be built."""


class GenerateError(Exception):
    """The generator did not write a configuration."""


def ensure() -> Path:
    """The generator's binary, built first if the cache has none (its cold build time printed)."""
    from llmd_fleet.versions import versions

    pinned = versions().tools.prometheus_operator
    return tool_cache.go_wrapper_tool(
        GOMOD_DIR,
        MODULE,
        pinned,
        "[tools].prometheus-operator",
        "operator-config",
        "prometheus-operator's config generator",
        BuildError,
    )


def prometheus_object(version: str) -> dict[str, Any]:
    """The Prometheus object the replay's Prometheus stands for: every ServiceMonitor and PodMonitor
    of every namespace (empty selectors), EndpointSlice discovery for Services (the Endpoints API
    is deprecated from Kubernetes 1.33), the operator's defaults otherwise. The two defaults its
    CRD gives (`+kubebuilder:default:="30s"` of scrapeInterval and evaluationInterval,
    pkg/apis/monitoring/v1/prometheus_types.go) are written out: the object does not go through an
    API server that would default them."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": PROMETHEUS_NAME, "namespace": PROMETHEUS_NAMESPACE},
        "spec": {
            "version": f"v{version}",
            "serviceDiscoveryRole": "EndpointSlice",
            "scrapeInterval": CRD_DEFAULT_INTERVAL,
            "evaluationInterval": CRD_DEFAULT_INTERVAL,
            "serviceMonitorSelector": {},
            "serviceMonitorNamespaceSelector": {},
            "podMonitorSelector": {},
            "podMonitorNamespaceSelector": {},
        },
    }


@dataclass(frozen=True)
class Generated:
    config: dict[str, Any]
    """The generator's configuration, as it wrote it."""
    warnings: list[str]
    """What the operator logged at warning level: a rejected monitor among them."""


def generate(binary: Path, kubeconfig: Path, prometheus_file: Path) -> Generated:
    result = subprocess.run(
        [str(binary), f"--kubeconfig={kubeconfig}", f"--prometheus={prometheus_file}"],
        capture_output=True,
        text=True,
        timeout=GENERATE_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise GenerateError(f"prometheus-operator's config generator: {result.stderr.strip()[-500:]}")
    config = yaml.safe_load(result.stdout) or {}
    return Generated(config, [line for line in result.stderr.splitlines() if line.strip()])


def job_file(targets_dir: Path, job_name: str) -> Path:
    return targets_dir / (re.sub(r"[^a-zA-Z0-9]", "-", job_name) + ".json")


def for_replay(generated: dict[str, Any], targets_dir: Path, rules_file: Path) -> dict[str, Any]:
    """The generator's configuration with each job's Kubernetes discovery read from a targets file
    instead (refreshed every 5 s), the rendered rules' file, and the config-reloader's variables
    expanded; everything else as written. Pure."""
    jobs = []
    for job in generated.get("scrape_configs") or []:
        job = dict(job)
        if job.pop("kubernetes_sd_configs", None) is not None:
            job["file_sd_configs"] = [
                {"files": [str(job_file(targets_dir, job["job_name"]))], "refresh_interval": "5s"}
            ]
        jobs.append(job)
    out = {k: v for k, v in generated.items() if k not in ("rule_files", "scrape_configs")}
    expanded: dict[str, Any] = expand({**out, "rule_files": [str(rules_file)], "scrape_configs": jobs})
    return expanded


def expand(value: Any) -> Any:
    """`$(NAME)` of RELOADER_ENV expanded in every string, as the config-reloader does. Pure."""
    if isinstance(value, str):
        for name, replacement in RELOADER_ENV.items():
            value = value.replace(f"$({name})", replacement)
        return value
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    return value
