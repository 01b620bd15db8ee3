"""A platform team's own Pulumi program: llm-d serving on a GPU cluster it already manages.

llmd-fleet's stacks create the cluster too. A team that runs its clusters elsewhere imports the
components instead and hands them its own Kubernetes provider: the LWS controller, the
prefill/decode DisaggregatedSet, the gateway and the router, sized by the same plan and checked
by the same config model. The cluster's GPU and NIC DRA drivers are the team's; the one object
of theirs the fleet still needs is the NIC DeviceClass its serving pods' claims name
(`fleet.nodeGroups.<group>.nicDeviceClass`, default rdma-nic.llmd-fleet.io): DRANET publishes
NICs but ships no class, so `add_llmd_serving` declares it through `AcceleratorPlatform`
(arguments from `accelerator_platform_args`), and serving waits for it (without it the pods stay
Pending). Settings with `target.platform: install` also release the drivers, as the stacks do.
It imports only the public API (`from llmd_fleet import ...`; a test keeps it so).

Check the settings before `pulumi up` from a test or CI step with `llmd_fleet.check_settings`
(the config, plan and manifest-schema checks of `llmd-fleet check`); docs/quickstart.md shows how.

Config, in this program's own namespace `platform`:

    platform:kubeconfig   the cluster's kubeconfig (secret)
    platform:llmd         the llmd-fleet settings: the keys of a stack file without the
                          `llmd-fleet:` prefix (target, fleet, model, serving, router, gateway,
                          responses)
    platform:responsesDbPassword  with `responses`: the response store owner's password (secret)

Run it with `pulumi up` from examples/ (Pulumi.yaml there); tests/stacks/test_examples.py runs
`add_llmd_serving` under the mock engine.
"""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet import (
    AcceleratorPlatform,
    ServingLayers,
    accelerator_platform_args,
    add_serving_layers,
    fabric_for,
    parse_config,
    plan_fleet,
    serving_image,
)


def add_llmd_serving(
    settings: dict[str, Any],
    provider: k8s.Provider,
    responses_password: pulumi.Input[str] | None = None,
) -> ServingLayers:
    """Validate and plan `settings`, then declare the LWS controller, serving, gateway and router
    (and with `responses` the agentic API and its CloudNativePG database, whose owner's password
    is `responses_password`) on `provider`'s cluster. Raises llmd_fleet.ConfigError or
    llmd_fleet.PlanError, naming each bad key, before anything is declared."""
    config = parse_config(settings)
    plan = plan_fleet(config)
    kind = config.target.kind
    serving_after: list[pulumi.Resource] = []
    # The drivers (released with `target.platform: install`) and the NIC DeviceClass, for a
    # cluster the team runs: the driver root from `target.gpuDriver`, upstream DRANET.
    accelerators = accelerator_platform_args(config)
    if accelerators is not None:
        serving_after.append(
            AcceleratorPlatform(
                "accelerators", accelerators, opts=pulumi.ResourceOptions(providers={"kubernetes": provider})
            )
        )
    return add_serving_layers(
        {
            "config": config,
            "plan": plan,
            # The pinned upstream image for the cluster's fabric (an ImageBuild's ref could be passed).
            "engine_image": serving_image(fabric_for(kind), None),
            "responses_password": responses_password,
            "serving_after": serving_after,
        },
        provider,
    )


def main() -> None:
    platform = pulumi.Config("platform")
    provider = k8s.Provider("gpu-cluster", kubeconfig=platform.require_secret("kubeconfig"))
    fleet = add_llmd_serving(
        platform.require_object("llmd"), provider, platform.get_secret("responsesDbPassword")
    )
    pulumi.export("gatewayAddress", fleet.gateway.address)


if __name__ == "__main__":
    main()
