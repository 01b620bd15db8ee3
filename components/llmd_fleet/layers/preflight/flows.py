"""The preflight probe pair's NetworkPolicy (pure), with `serving.preflight`: the metadata
exchange between its two pods and nothing else. Its bytes go over the GPU NICs, which no
NetworkPolicy sees; a UCX that falls back to TCP on the pod network is refused here and fails the
probe (llmd_fleet/layers/preflight/component.py).

| from | to | ports |
|---|---|---|
| preflight pod | the other preflight pod | the probe's metadata port |
"""

from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.netpol import ClusterRanges, PolicySpec, pods, tcp
from llmd_fleet.layers.preflight.specs import PORT, probe_selector
from llmd_fleet.plan.fleet import FleetPlan


def flows(config: StackConfig, plan: FleetPlan, ranges: ClusterRanges) -> dict[str, PolicySpec]:
    if not config.serving.preflight.enabled:
        return {}
    probe = pods(probe_selector(config))
    return {
        "preflight": {
            "podSelector": {"matchLabels": probe_selector(config)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [probe], "ports": tcp(PORT)}],
            "egress": [{"to": [probe], "ports": tcp(PORT)}],
        }
    }
