"""On-prem target: an existing Kubernetes cluster reached through a kubeconfig."""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s


class OnPremClusterArgs(TypedDict):
    """Arguments of `OnPremCluster`."""

    kubeconfig: NotRequired[pulumi.Input[str] | None]
    """kubeconfig contents, wrapped as a secret; the ambient kubeconfig ($KUBECONFIG or
    ~/.kube/config) when unset (the default)."""
    context: NotRequired[str | None]
    """kubeconfig context; the kubeconfig's current context when unset (the default)."""


class OnPremCluster(pulumi.ComponentResource):
    """Hands a Kubernetes provider for an existing cluster to the platform and serving layers."""

    provider: k8s.Provider

    def __init__(self, name: str, args: OnPremClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:cluster:OnPremCluster", name, {}, opts)
        kubeconfig = args.get("kubeconfig")
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(kubeconfig) if kubeconfig is not None else None,
            context=args.get("context"),
            # Server-side apply lets the DisaggregatedSet controller and Pulumi own separate
            # fields of the same objects without overwriting each other.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
