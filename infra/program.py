"""The stack program: config -> plan -> target cluster -> platform -> serving -> outputs.

The same function runs under `pulumi up` and under the mock engine of `llmd-fleet render`.
"""

from dataclasses import dataclass

import pulumi

from components.accelerators import AcceleratorPlatform
from components.config import ConfigError, StackConfig, load_from_pulumi
from components.dra import DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR
from components.gateway import GatewayLayer
from components.lws import LeaderWorkerSetController
from components.onprem import OnPremCluster
from components.plan import FleetPlan, PlanError, plan_fleet
from components.router import Router
from components.serving import HF_TOKEN_SECRET, ModelServing
from components.versions import versions


@dataclass(frozen=True)
class Fleet:
    """The top-level components of a stack."""

    cluster: OnPremCluster
    lws: LeaderWorkerSetController
    serving: ModelServing
    gateway: GatewayLayer
    router: Router


def build_fleet(config: StackConfig, plan: FleetPlan) -> Fleet:
    """Declare every resource of the stack and its outputs."""
    pulumi_config = pulumi.Config()
    cluster = OnPremCluster(
        "cluster",
        {
            "kubeconfig": pulumi_config.get_secret("kubeconfig"),
            "context": config.target.kubeconfig_context,
        },
    )
    on_cluster = pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
    lws = LeaderWorkerSetController("lws", {"chart": versions().chart("lws")}, opts=on_cluster)
    platform: list[pulumi.Resource] = [lws]
    groups = config.fleet.node_groups.values()
    if any(g.accelerator_allocation == "dra" for g in groups):
        uses_dranet = any(g.nic_device_class == DRANET_RDMA_CLASS for g in groups)
        accelerators = AcceleratorPlatform(
            "accelerators",
            {
                "driver_root": "/" if config.target.gpu_driver == "host" else "/run/nvidia/driver",
                "dra_driver_chart": versions().chart("dra-driver-nvidia-gpu"),
                "gpu_operator": (
                    versions().chart("gpu-operator"),
                    config.target.gpu_driver == "gpu-operator",
                ),
                "nic_driver": ("dranet", versions().chart("dranet"), "kube-system") if uses_dranet else None,
                "nic_device_class": (DRANET_RDMA_CLASS, DRANET_RDMA_SELECTOR) if uses_dranet else None,
            },
            opts=on_cluster,
        )
        platform.append(accelerators)
    serving = ModelServing(
        config.serving.name,
        {
            "config": config,
            "plan": plan,
            "hf_token": pulumi_config.get_secret("hfToken") if config.has_hf_token else None,
        },
        opts=pulumi.ResourceOptions(providers={"kubernetes": cluster.provider}, depends_on=[lws]),
    )
    gateway = GatewayLayer(
        "gateway",
        {"config": config, "pool_name": config.serving.name, "install_crds": True},
        opts=pulumi.ResourceOptions(providers={"kubernetes": cluster.provider}, depends_on=[serving]),
    )
    router = Router(
        "router",
        {
            "config": config,
            "plan": plan,
            "hf_token_secret": HF_TOKEN_SECRET if config.has_hf_token else None,
        },
        # The InferencePool and objective CRDs come with the gateway layer.
        opts=pulumi.ResourceOptions(
            providers={"kubernetes": cluster.provider}, depends_on=[gateway, serving]
        ),
    )
    pulumi.export("gatewayAddress", gateway.address)
    pulumi.export("inferencePool", router.inference_pool.id.apply(lambda _: config.serving.name))
    pulumi.export("namespace", config.serving.namespace)
    pulumi.export("disaggregatedSet", serving.disaggregated_set.id.apply(lambda _: config.serving.name))
    pulumi.export("gpus", plan.gpus)
    pulumi.export(
        "roles",
        {r.name: {"instances": r.instances, "nodesPerInstance": r.nodes_per_instance} for r in plan.roles},
    )
    return Fleet(cluster=cluster, lws=lws, serving=serving, gateway=gateway, router=router)


def load() -> tuple[StackConfig, FleetPlan]:
    """Validate the stack config and plan it (raises ConfigError or PlanError)."""
    config = load_from_pulumi()
    return config, plan_fleet(config)


def main() -> None:
    """Entry for `pulumi up`: bad input ends the run with one clean message, no traceback."""
    try:
        config, plan = load()
    except (ConfigError, PlanError) as exc:
        raise pulumi.RunError(str(exc)) from None
    build_fleet(config, plan)
