"""The serving namespace's NetworkPolicies: deny everything, then allow exactly the flows the
fleet's layers state, each in its own `llmd_fleet/layers/<layer>/flows.py`, registered with its
layer's record (`NAMESPACE_FLOWS`, llmd_fleet/stack/registry.py):

| layer | its pods' flows |
|---|---|
| serving | gateway and endpoint picker to the engines, engine to engine, metrics, the model hub |
| router | gateway to the endpoint picker, the picker to the engines, the tokenizer and the API server |
| gateway | clients to the in-cluster proxies, the proxies to the picker, the pool and their xDS |
| preflight | the probe pair's metadata exchange (`serving.preflight`) |
| modelexpress | the engines to the ModelExpress server, the server to the API server |
| responses | the agentic API and the response store (`llmd-fleet:responses`) |

Without them vLLM's unauthenticated API, its DP RPC, KV-event and NIXL ports are open to every
pod of the cluster, around the gateway and the router. Every pod of the namespace may resolve
names through kube-dns. KEDA's namespace has its own policies, stated by the autoscaling layer
(llmd_fleet/layers/autoscaling/flows.py) and declared by its component.

Enforcement is the CNI's: GKE's Dataplane V2 (`datapath_provider=ADVANCED_DATAPATH`,
llmd_fleet/targets/gke/cluster.py), on EKS the VPC CNI with `enableNetworkPolicy`
(llmd_fleet/targets/eks/cluster.py), on-prem
whichever CNI the cluster runs (docs/security.md lists the ones that enforce NetworkPolicy).

Secondary interfaces. Under GKE Dataplane V2 multi-networking a NetworkPolicy is enforced on an
additional Pod network only when it names that network in its `networking.gke.io/network`
annotation, and a policy annotated for one network leaves the default Pod network unrestricted
(GKE docs "About multi-network network policies", concepts/about-multi-networking-policies, "How
multi-network network policies work with Pod networks"; "Set up multi-network network policies",
how-to/control-traffic-between-pods-services: to enforce rules on a Pod network, reference it).
These policies name no network, so (as we read those pages) they filter eth0 only, never the
GPU NICs (eth1..eth8 on vpc1..vpc8, llmd_fleet/targets/gke/tcpxo_plan.py). What filters those
is each GPU VPC's firewall rule (internal TCP/UDP, any port, from its own subnet:
llmd_fleet/targets/gke/cluster.py), so UCX's ephemeral data ports need no rule there.
Whether GKE enforces multi-network policies on the `Device` networks TCPXO uses is not stated on
those pages; none is declared. On eth0, UCX needs nothing: the `tcpxo` fabric pins it to the GPU
NICs (UCX_NET_DEVICES), and serving pods may reach each other on any port regardless.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.netpol import (
    PolicySpec,
    deny_all_but_dns,
)
from llmd_fleet.labels import common_labels
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.stack.registry import NAMESPACE_FLOWS
from llmd_fleet.targets.specs import cluster_ranges as cluster_ranges  # the ranges the policies use

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

RULE_LISTS = ("ingress", "egress")


def union(contributions: Iterable[Mapping[str, PolicySpec]]) -> dict[str, PolicySpec]:
    """One namespace's policies from every layer's flows. A policy is defined by the layer whose
    pods it selects; a later layer may add rules to it (ModelExpress to the engines' egress,
    Responses to the gateway proxies'), appended after the owner's."""
    specs: dict[str, PolicySpec] = {}
    for contribution in contributions:
        for suffix, spec in contribution.items():
            if suffix not in specs:
                assert "podSelector" in spec, f"rules for policy {suffix!r} before a layer defines it"
                specs[suffix] = dict(spec)
                continue
            assert set(spec) <= set(RULE_LISTS), f"policy {suffix!r} is defined by two layers"
            for key in RULE_LISTS:
                if key in spec:
                    specs[suffix][key] = [*specs[suffix].get(key, []), *spec[key]]
    return specs


def network_policy_specs(config: StackConfig, plan: FleetPlan) -> dict[str, PolicySpec]:
    """name suffix -> NetworkPolicy spec, for the serving namespace."""
    ranges = cluster_ranges(config)
    return union([deny_all_but_dns(), *(flows(config, plan, ranges) for flows in NAMESPACE_FLOWS)])


class NetworkIsolationArgs(TypedDict):
    """Arguments of `NetworkIsolation`. Every key is required."""

    config: StackConfig
    """The validated stack config; `serving` names the namespace and the policies, `target`,
    `gateway`, `observability` and `responses` shape the allowed flows (`network_policy_specs`)."""
    plan: FleetPlan
    """The fleet plan; its roles give the serving pods' ports."""


class NetworkIsolation(pulumi.ComponentResource):
    """The serving namespace's NetworkPolicies (`network_policy_specs`)."""

    policies: dict[str, k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkIsolationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:security:NetworkIsolation", name, {}, opts)
        config = args["config"]
        serving = config.serving
        self.policies = {
            suffix: k8s.networking.v1.NetworkPolicy(
                f"{name}-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{serving.name}-{suffix}",
                    namespace=serving.namespace,
                    labels=common_labels("network-policy", serving.name),
                ),
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for suffix, spec in network_policy_specs(config, args["plan"]).items()
        }
        self.register_outputs({})


def declare(ctx: Assembly) -> NetworkIsolation:
    """The builder of the serving namespace's policies (the `network` record's `Declaration` in
    llmd_fleet/stack/registry.py): default deny plus the fleet's flows, once the namespace exists
    (after the model's serving); with several models, one set per model."""
    name = "network-policies" if ctx.model is None else f"network-policies-{ctx.model}"
    return NetworkIsolation(name, {"config": ctx.config, "plan": ctx.plan}, opts=ctx.options())
