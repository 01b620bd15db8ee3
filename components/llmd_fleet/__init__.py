"""llmd-fleet: Pulumi components for an llm-d agentic-inference fleet on NVIDIA H100 nodes.

The public API, by area (each subpackage matches a component type token `llmd-fleet:<area>:<Type>`):

- config and plan (pure, no Pulumi): `parse_config` validates a stack's settings into a
  `StackConfig` (raising `ConfigError`, naming each bad key); `plan_fleet` sizes the fleet into a
  `FleetPlan` (raising `PlanError`); `fabric_for` names a target's KV-transfer fabric.
- cluster (targets): `OnPremCluster`, `GkeNetwork`, `GkeCluster`, `GkeNodePool`, `TcpxoNodeSetup`,
  `EksCluster` with its parts `EksNetwork`, `EksIam`, `EksSystemNodes`, `EksGpuCapacity`.
- platform: `AcceleratorPlatform` (GPU and NIC DRA drivers), `LeaderWorkerSetController`.
- serving: `ModelServing` (the prefill/decode DisaggregatedSet), `Autoscaling` (KEDA and the
  roles' ScaledObjects, with `serving.autoscaling`); `add_serving_layers` declares serving,
  gateway, router and responses on any cluster and returns `ServingLayers`.
- router and gateway: `Router` (the endpoint picker), `GatewayLayer`.
- responses: `ResponsesLayer`, `GkeResponses`, `EksResponses`.
- security and observability: `NetworkIsolation`, `Observability`.
- images: `ImageBuild`, `serving_image`.

Each component takes one `<Component>Args` TypedDict; its docstring says what every key means and
its default. Names load on first use, so `import llmd_fleet` and the pure layers need no Pulumi SDK.
The offline tools (`llmd_fleet.tools`: the `llmd-fleet` CLI, policy runner, checkers) and the
policy pack (`llmd_fleet.policies`) are not part of this API.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmd_fleet.cluster.eks import (
        EksCluster,
        EksClusterArgs,
        EksGpuCapacity,
        EksGpuCapacityArgs,
        EksIam,
        EksIamArgs,
        EksNetwork,
        EksNetworkArgs,
        EksSystemNodes,
        EksSystemNodesArgs,
    )
    from llmd_fleet.cluster.gke import (
        GkeCluster,
        GkeClusterArgs,
        GkeNetwork,
        GkeNetworkArgs,
        GkeNodePool,
        GkeNodePoolArgs,
    )
    from llmd_fleet.cluster.onprem import OnPremCluster, OnPremClusterArgs
    from llmd_fleet.cluster.tcpxo import TcpxoNodeSetup, TcpxoNodeSetupArgs
    from llmd_fleet.config.fleet import ConfigError, StackConfig, parse_config
    from llmd_fleet.images.build import ImageBuild, ImageBuildArgs, serving_image
    from llmd_fleet.observability.monitoring import Observability, ObservabilityArgs
    from llmd_fleet.plan.fabric import Fabric, fabric_for
    from llmd_fleet.plan.fleet import FleetPlan, PlanError, plan_fleet
    from llmd_fleet.platform.accelerators import AcceleratorPlatform, AcceleratorPlatformArgs
    from llmd_fleet.platform.lws import LeaderWorkerSetController, LeaderWorkerSetControllerArgs
    from llmd_fleet.program import ServingLayers, ServingLayersArgs, add_serving_layers
    from llmd_fleet.responses.db_eks import EksResponses, EksResponsesArgs
    from llmd_fleet.responses.db_gke import GkeResponses, GkeResponsesArgs
    from llmd_fleet.responses.layer import ResponsesLayer, ResponsesLayerArgs
    from llmd_fleet.router.endpoint_picker import Router, RouterArgs
    from llmd_fleet.router.gateway import GatewayLayer, GatewayLayerArgs
    from llmd_fleet.security.isolation import NetworkIsolation, NetworkIsolationArgs
    from llmd_fleet.serving.autoscaling import Autoscaling, AutoscalingArgs
    from llmd_fleet.serving.model_serving import ModelServing, ModelServingArgs

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ConfigError": "llmd_fleet.config.fleet",
    "StackConfig": "llmd_fleet.config.fleet",
    "parse_config": "llmd_fleet.config.fleet",
    "FleetPlan": "llmd_fleet.plan.fleet",
    "PlanError": "llmd_fleet.plan.fleet",
    "plan_fleet": "llmd_fleet.plan.fleet",
    "Fabric": "llmd_fleet.plan.fabric",
    "fabric_for": "llmd_fleet.plan.fabric",
    "OnPremCluster": "llmd_fleet.cluster.onprem",
    "OnPremClusterArgs": "llmd_fleet.cluster.onprem",
    "GkeCluster": "llmd_fleet.cluster.gke",
    "GkeClusterArgs": "llmd_fleet.cluster.gke",
    "GkeNetwork": "llmd_fleet.cluster.gke",
    "GkeNetworkArgs": "llmd_fleet.cluster.gke",
    "GkeNodePool": "llmd_fleet.cluster.gke",
    "GkeNodePoolArgs": "llmd_fleet.cluster.gke",
    "EksCluster": "llmd_fleet.cluster.eks",
    "EksClusterArgs": "llmd_fleet.cluster.eks",
    "EksGpuCapacity": "llmd_fleet.cluster.eks",
    "EksGpuCapacityArgs": "llmd_fleet.cluster.eks",
    "EksIam": "llmd_fleet.cluster.eks",
    "EksIamArgs": "llmd_fleet.cluster.eks",
    "EksNetwork": "llmd_fleet.cluster.eks",
    "EksNetworkArgs": "llmd_fleet.cluster.eks",
    "EksSystemNodes": "llmd_fleet.cluster.eks",
    "EksSystemNodesArgs": "llmd_fleet.cluster.eks",
    "TcpxoNodeSetup": "llmd_fleet.cluster.tcpxo",
    "TcpxoNodeSetupArgs": "llmd_fleet.cluster.tcpxo",
    "AcceleratorPlatform": "llmd_fleet.platform.accelerators",
    "AcceleratorPlatformArgs": "llmd_fleet.platform.accelerators",
    "LeaderWorkerSetController": "llmd_fleet.platform.lws",
    "LeaderWorkerSetControllerArgs": "llmd_fleet.platform.lws",
    "Autoscaling": "llmd_fleet.serving.autoscaling",
    "AutoscalingArgs": "llmd_fleet.serving.autoscaling",
    "ModelServing": "llmd_fleet.serving.model_serving",
    "ModelServingArgs": "llmd_fleet.serving.model_serving",
    "ServingLayers": "llmd_fleet.program",
    "ServingLayersArgs": "llmd_fleet.program",
    "add_serving_layers": "llmd_fleet.program",
    "Router": "llmd_fleet.router.endpoint_picker",
    "RouterArgs": "llmd_fleet.router.endpoint_picker",
    "GatewayLayer": "llmd_fleet.router.gateway",
    "GatewayLayerArgs": "llmd_fleet.router.gateway",
    "ResponsesLayer": "llmd_fleet.responses.layer",
    "ResponsesLayerArgs": "llmd_fleet.responses.layer",
    "GkeResponses": "llmd_fleet.responses.db_gke",
    "GkeResponsesArgs": "llmd_fleet.responses.db_gke",
    "EksResponses": "llmd_fleet.responses.db_eks",
    "EksResponsesArgs": "llmd_fleet.responses.db_eks",
    "NetworkIsolation": "llmd_fleet.security.isolation",
    "NetworkIsolationArgs": "llmd_fleet.security.isolation",
    "Observability": "llmd_fleet.observability.monitoring",
    "ObservabilityArgs": "llmd_fleet.observability.monitoring",
    "ImageBuild": "llmd_fleet.images.build",
    "ImageBuildArgs": "llmd_fleet.images.build",
    "serving_image": "llmd_fleet.images.build",
}

__all__ = [
    "AcceleratorPlatform",
    "AcceleratorPlatformArgs",
    "Autoscaling",
    "AutoscalingArgs",
    "ConfigError",
    "EksCluster",
    "EksClusterArgs",
    "EksGpuCapacity",
    "EksGpuCapacityArgs",
    "EksIam",
    "EksIamArgs",
    "EksNetwork",
    "EksNetworkArgs",
    "EksResponses",
    "EksResponsesArgs",
    "EksSystemNodes",
    "EksSystemNodesArgs",
    "Fabric",
    "FleetPlan",
    "GatewayLayer",
    "GatewayLayerArgs",
    "GkeCluster",
    "GkeClusterArgs",
    "GkeNetwork",
    "GkeNetworkArgs",
    "GkeNodePool",
    "GkeNodePoolArgs",
    "GkeResponses",
    "GkeResponsesArgs",
    "ImageBuild",
    "ImageBuildArgs",
    "LeaderWorkerSetController",
    "LeaderWorkerSetControllerArgs",
    "ModelServing",
    "ModelServingArgs",
    "NetworkIsolation",
    "NetworkIsolationArgs",
    "Observability",
    "ObservabilityArgs",
    "OnPremCluster",
    "OnPremClusterArgs",
    "PlanError",
    "ResponsesLayer",
    "ResponsesLayerArgs",
    "Router",
    "RouterArgs",
    "ServingLayers",
    "ServingLayersArgs",
    "StackConfig",
    "TcpxoNodeSetup",
    "TcpxoNodeSetupArgs",
    "add_serving_layers",
    "fabric_for",
    "parse_config",
    "plan_fleet",
    "serving_image",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmd_fleet' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
