"""A platform team's own Pulumi program: llm-d serving on a GPU cluster it already manages.

llmd-fleet's stacks create the cluster too. A team that runs its clusters elsewhere imports the
components instead and hands them its own Kubernetes provider: the LWS controller, the
prefill/decode DisaggregatedSet, the gateway and the router, sized by the same plan and checked
by the same config model. The cluster's GPU and NIC DRA drivers are the team's (the stacks'
AcceleratorPlatform component can install them too).

Config, in this program's own namespace `platform`:

    platform:kubeconfig   the cluster's kubeconfig (secret)
    platform:llmd         the llmd-fleet settings: the keys of a stack file without the
                          `llmd-fleet:` prefix (target, fleet, model, serving, router, gateway)

Run it with `pulumi up` from examples/ (Pulumi.yaml there); tests/test_examples.py runs
`add_llmd_serving` under the mock engine.
"""

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import parse_config
from components.fabric import fabric_for
from components.gateway import GatewayLayer
from components.images import serving_image
from components.lws import LeaderWorkerSetController
from components.plan import plan_fleet
from components.router import Router
from components.serving import ModelServing
from components.versions import versions


@dataclass(frozen=True)
class LlmdServing:
    serving: ModelServing
    gateway: GatewayLayer
    router: Router


def add_llmd_serving(settings: dict[str, Any], provider: k8s.Provider) -> LlmdServing:
    """Validate and plan `settings`, then declare serving, gateway and router on `provider`'s
    cluster. Raises components.config.ConfigError or components.plan.PlanError, naming each bad
    key, before anything is declared."""
    config = parse_config(settings)
    plan = plan_fleet(config)
    on_cluster = pulumi.ResourceOptions(providers={"kubernetes": provider})
    lws = LeaderWorkerSetController("lws", {"chart": versions().chart("lws")}, opts=on_cluster)
    kind = config.target.kind
    serving = ModelServing(
        config.serving.name,
        {
            "config": config,
            "plan": plan,
            "hf_token": None,
            # The pinned upstream image for the cluster's fabric (an ImageBuild could be passed).
            "engine_image": serving_image(kind, fabric_for(kind), None),
        },
        opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[lws])),
    )
    gateway = GatewayLayer(
        "gateway",
        {"config": config, "pool_name": config.serving.name, "install_crds": True},
        opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[serving])),
    )
    router = Router(
        "router",
        {"config": config, "plan": plan, "hf_token_secret": None},
        opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[gateway])),
    )
    return LlmdServing(serving=serving, gateway=gateway, router=router)


def main() -> None:
    platform = pulumi.Config("platform")
    provider = k8s.Provider("gpu-cluster", kubeconfig=platform.require_secret("kubeconfig"))
    fleet = add_llmd_serving(platform.require_object("llmd"), provider)
    pulumi.export("gatewayAddress", fleet.gateway.address)


if __name__ == "__main__":
    main()
