"""The `observability` section. Pure."""

from typing import Annotated

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    Labels,
    ManagedNamespace,
)
from llmd_fleet.targets.base import PrometheusMode


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


# GKE Standard runs the managed collectors in this namespace (Managed Service for Prometheus).
GMP_NAMESPACE = "gmp-system"


class ObservabilityConfig(_Model):
    """Where the fleet's metrics are scraped from, and the monitoring objects the stack renders
    (llmd_fleet/layers/observability/component.py, docs/observability.md)."""

    namespace: ManagedNamespace = "monitoring"
    """Namespace of the metrics scrapers (Prometheus, an OpenTelemetry collector, GKE's
    `gmp-system`). The NetworkPolicies admit it, and only it, to the engines' API ports, the
    endpoint picker's metrics port, the tokenizer and the gateway proxies' metrics port. Default
    `monitoring`; `gmp-system` when `prometheus` is `gmp`. With `install`, kube-prometheus-stack
    goes here."""
    prometheus: PrometheusMode | None = None
    """Who scrapes the fleet and evaluates its alerts. `operator`: an existing prometheus-operator
    (PodMonitors, a ServiceMonitor, a PrometheusRule); `gmp`: Google Cloud Managed Service for
    Prometheus (PodMonitorings, Rules; gke only); `install`: the stack installs
    kube-prometheus-stack (chart pinned in images/versions.toml) into `namespace`, plus the
    operator objects; `none`: no scrape or rule objects. Unset: `gmp` on gke, `operator`
    elsewhere (`SPECS[kind].prometheus` in llmd_fleet/targets/specs.py)."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300)] = 15
    """Scrape interval of every monitor; rate windows in alerts and dashboards are at least four
    of these."""
    monitor_labels: Labels = Field(default_factory=dict)
    """Labels added to every monitor and rule object, so that an existing Prometheus's selectors
    pick them up (kube-prometheus-stack selects `release: <its release name>` by default). None
    by default; with `install` the installed Prometheus selects every monitor and rule."""
    dashboards: bool = True
    """Render the fleet's Grafana dashboards as ConfigMaps for Grafana's dashboard sidecar
    (label `grafana_dashboard: "1"`, in the serving namespace)."""
