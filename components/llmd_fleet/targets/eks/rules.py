"""Kind eks's rules and cluster ranges. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.netpol import ClusterRanges, Peer
from llmd_fleet.core.problems import Problem, key
from llmd_fleet.targets.base import SystemPool, managed_cluster_problems
from llmd_fleet.targets.eks.config import EksTarget, database_subnet_cidrs, eks_problems
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

EKS_SERVICE_RANGES = ("10.100.0.0/16", "172.20.0.0/16")
"""EKS assigns Service addresses from one of these when the cluster sets no serviceIpv4Cidr
(EKS API KubernetesNetworkConfigRequest); llmd_fleet/targets/eks/cluster.py sets none."""


def _target(config: StackConfig) -> EksTarget:
    assert isinstance(config.target, EksTarget), "an eks rule ran on another kind"
    return config.target


def eks_target_problems(config: StackConfig) -> list[Problem]:
    """The cluster the stack creates, and the eks section against the fleet it carries."""
    target = _target(config)
    problems = managed_cluster_problems(
        target, "eks", versions().kubernetes.eks, "the AL2023 NVIDIA AMI carries the driver"
    )
    problems += eks_problems(
        target.eks,
        config.fleet.node_groups,
        key(config, "target", "eks"),
        key(config, "fleet", "node_groups"),
    )
    return problems


def eks_cluster_ranges(config: StackConfig) -> ClusterRanges:
    # The VPC CNI gives pods addresses of the VPC's subnets.
    return ClusterRanges(pods=(_target(config).eks.vpc_cidr,), services=EKS_SERVICE_RANGES)


def eks_system_pool(config: StackConfig) -> SystemPool:
    """`target.eks.systemNodes`: the CPU node group of the system pods."""
    target = config.target
    assert isinstance(target, EksTarget)
    nodes = target.eks.system_nodes
    return SystemPool(
        key(config, "target", "eks", "system_nodes", "instance_type"),
        nodes.instance_type,
        key(config, "target", "eks", "system_nodes", "count"),
        nodes.count,
    )


def eks_database_peers(config: StackConfig) -> list[Peer]:
    """RDS answers from its own two subnets of the VPC."""
    return [{"ipBlock": {"cidr": c}} for c in database_subnet_cidrs(_target(config).eks.vpc_cidr).values()]
