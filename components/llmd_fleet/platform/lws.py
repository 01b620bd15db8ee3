"""The LeaderWorkerSet controller (with the DisaggregatedSet API) installed from its Helm chart."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import common_labels
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.versions import Chart

LWS_NAMESPACE = "lws-system"


class LeaderWorkerSetControllerArgs(TypedDict):
    """Arguments of `LeaderWorkerSetController`."""

    chart: Chart
    """The pinned LWS chart (from the version matrix), released as `lws` in the `lws-system`
    namespace with DisaggregatedSet on and two controller replicas (`lws_values`)."""


def lws_values() -> dict[str, object]:
    """Chart values: DisaggregatedSet on, two controller replicas (the chart always runs leader
    election, so the second replica is a hot standby)."""
    return {
        "enableDisaggregatedSet": True,
        "replicaCount": 2,
    }


class LeaderWorkerSetController(pulumi.ComponentResource):
    """Namespace plus Helm release of the LWS controller; its CRDs come with the chart."""

    release: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        args: LeaderWorkerSetControllerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llmd-fleet:platform:LeaderWorkerSetController", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=LWS_NAMESPACE,
                # Pod Security `baseline`: the chart's controller runs non-root with every
                # capability dropped and no host access, but sets no seccomp profile, which
                # `restricted` requires (charts/lws values.yaml podSecurityContext).
                labels={**common_labels("lws-controller", name), **pod_security_labels("baseline")},
            ),
            opts=child,
        )
        self.release = pinned_release(
            f"{name}-release",
            "lws",
            args["chart"],
            LWS_NAMESPACE,
            lws_values(),
            pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
        )
        self.register_outputs({"release": self.release.name})
