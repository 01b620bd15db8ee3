"""Kind onprem: the target model and its `onprem` section (the cluster's address ranges, shared with
kind local). Pure."""

from typing import Annotated, Literal

from pydantic import Field

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import DnsSubdomain, Ipv4Cidr
from llmd_fleet.targets.base import TargetBase


class OnPremTargetConfig(ConfigModel):
    """An existing cluster's address ranges (kind onprem or local), which the stack cannot look
    up offline. Only the
    NetworkPolicies read them: the serving namespace may reach port 443 outside these ranges
    (the model hub), never a pod or a Service through that rule."""

    pod_cidr: Ipv4Cidr = "10.244.0.0/16"
    """The cluster's pod network (kube-controller-manager `--cluster-cidr`, the CNI's IP pool).
    The default is kubeadm's usual `--pod-network-cidr` (Flannel's default); set the cluster's
    own: Calico defaults to 192.168.0.0/16, Cilium's cluster pool to 10.0.0.0/8."""
    service_cidr: Ipv4Cidr = "10.96.0.0/12"
    """The cluster's Service range (kube-apiserver `--service-cluster-ip-range`); the default is
    kubeadm's."""


class OnPremTarget(TargetBase):
    """An existing Kubernetes cluster reached through a kubeconfig."""

    kind: Literal["onprem"]
    onprem: OnPremTargetConfig | None = None
    """kinds onprem and local: the cluster's pod and Service ranges (OnPremTargetConfig's defaults
    when unset; a kind cluster's own defaults are 10.244.0.0/16 and 10.96.0.0/16)."""


class ResponsesOnpremDatabaseConfig(ConfigModel):
    """A CloudNativePG `Cluster` on the onprem target, in the serving namespace."""

    instances: Annotated[int, Field(ge=3, le=9)] = 3
    """PostgreSQL instances (default 3, at most 9): one primary and streaming standbys, each on
    its own node. Three keeps a standby after a failover."""
    storage_class: DnsSubdomain | None = None
    """StorageClass of each instance's volume; the cluster's default class when unset. Use a
    class that survives a node loss (replicated or network storage) or local disks with the
    replicas as the redundancy."""
    cpus: Annotated[int, Field(ge=1, le=64)] = 2
    """CPUs per instance (default 2, at most 64), requested and limited."""
    memory_gib: Annotated[int, Field(ge=1, le=512)] = 8
    """Memory per instance in GiB (default 8, at most 512), requested and limited."""
