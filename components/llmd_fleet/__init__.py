"""llmd-fleet: Pulumi components for an llm-d agentic-inference fleet on NVIDIA H100 nodes.

The public API, by area (each subpackage matches a component type token `llmd-fleet:<area>:<Type>`):

- config and plan (pure, no Pulumi): `parse_config` validates a stack's settings into a
  `StackConfig` (raising `ConfigError`, naming each bad key); `plan_fleet` sizes the fleet into a
  `FleetPlan` (raising `PlanError`); `fabric_for` names a target's KV-transfer fabric;
  `check_settings` runs `llmd-fleet check`'s config, plan and manifest-schema checks on settings
  a program of one's own holds (from a test or CI step: it starts Pulumi's mock engine).
- cluster (targets): `OnPremCluster`, `GkeNetwork`, `GkeCluster`, `GkeNodePool`, `TcpxoNodeSetup`,
  `EksCluster` with its parts `EksNetwork`, `EksIam`, `EksSystemNodes`, `EksGpuCapacity`.
- platform: `AcceleratorPlatform` (GPU and NIC DRA drivers, the NIC DeviceClass) and
  `accelerator_platform_args` (its arguments from a stack's settings), `LeaderWorkerSetController`.
- serving: `ModelServing` (the prefill/decode DisaggregatedSet), `Autoscaling` (KEDA and the
  roles' ScaledObjects, with `serving.autoscaling`); `add_serving_layers` declares serving,
  gateway, router and responses on any cluster and returns `ServingLayers`.
- router and gateway: `Router` (the endpoint picker), `GatewayLayer`.
- responses: `ResponsesLayer`, `GkeResponses`, `EksResponses`.
- security and observability: `NetworkIsolation`, `Observability`.
- images: `ImageBuild`, `serving_image`.

The GKE and EKS components need the package's `gcp` or `aws` extra (`pip install
'llmd-fleet[gcp]'`); without it, importing one raises ImportError naming the extra.

Each component takes one `<Component>Args` TypedDict; its docstring says what every key means and
its default. Names load on first use, so `import llmd_fleet` and the pure layers need no Pulumi SDK.
The offline tools (`llmd_fleet.cli`: the `llmd-fleet` CLI, policy runner, checkers) and the
policy pack (`llmd_fleet.policies`) are not part of this API.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmd_fleet.checks import check_settings
    from llmd_fleet.core.fabric import Fabric
    from llmd_fleet.core.problems import ConfigError
    from llmd_fleet.images.build import ImageBuild, ImageBuildArgs, serving_image
    from llmd_fleet.layers.autoscaling.component import Autoscaling, AutoscalingArgs
    from llmd_fleet.layers.gateway.component import GatewayLayer, GatewayLayerArgs
    from llmd_fleet.layers.observability.component import Observability, ObservabilityArgs
    from llmd_fleet.layers.responses.component import ResponsesLayer, ResponsesLayerArgs
    from llmd_fleet.layers.router.component import Router, RouterArgs
    from llmd_fleet.layers.serving.component import ModelServing, ModelServingArgs
    from llmd_fleet.plan.fleet import FleetPlan, PlanError, plan_fleet
    from llmd_fleet.platform.accelerators import AcceleratorPlatform, AcceleratorPlatformArgs
    from llmd_fleet.platform.lws import LeaderWorkerSetController, LeaderWorkerSetControllerArgs
    from llmd_fleet.program import (
        ServingLayers,
        ServingLayersArgs,
        accelerator_platform_args,
        add_serving_layers,
    )
    from llmd_fleet.security.isolation import NetworkIsolation, NetworkIsolationArgs
    from llmd_fleet.stack.model import StackConfig
    from llmd_fleet.stack.parse import parse_config
    from llmd_fleet.targets.eks.cluster import (
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
    from llmd_fleet.targets.eks.database import EksResponses, EksResponsesArgs
    from llmd_fleet.targets.gke.cluster import (
        GkeCluster,
        GkeClusterArgs,
        GkeNetwork,
        GkeNetworkArgs,
        GkeNodePool,
        GkeNodePoolArgs,
    )
    from llmd_fleet.targets.gke.database import GkeResponses, GkeResponsesArgs
    from llmd_fleet.targets.gke.tcpxo import TcpxoNodeSetup, TcpxoNodeSetupArgs
    from llmd_fleet.targets.onprem.cluster import OnPremCluster, OnPremClusterArgs
    from llmd_fleet.targets.specs import fabric_for

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ConfigError": "llmd_fleet.core.problems",
    "StackConfig": "llmd_fleet.stack.model",
    "parse_config": "llmd_fleet.stack.parse",
    "check_settings": "llmd_fleet.checks",
    "FleetPlan": "llmd_fleet.plan.fleet",
    "PlanError": "llmd_fleet.plan.fleet",
    "plan_fleet": "llmd_fleet.plan.fleet",
    "Fabric": "llmd_fleet.core.fabric",
    "fabric_for": "llmd_fleet.targets.specs",
    "OnPremCluster": "llmd_fleet.targets.onprem.cluster",
    "OnPremClusterArgs": "llmd_fleet.targets.onprem.cluster",
    "GkeCluster": "llmd_fleet.targets.gke.cluster",
    "GkeClusterArgs": "llmd_fleet.targets.gke.cluster",
    "GkeNetwork": "llmd_fleet.targets.gke.cluster",
    "GkeNetworkArgs": "llmd_fleet.targets.gke.cluster",
    "GkeNodePool": "llmd_fleet.targets.gke.cluster",
    "GkeNodePoolArgs": "llmd_fleet.targets.gke.cluster",
    "EksCluster": "llmd_fleet.targets.eks.cluster",
    "EksClusterArgs": "llmd_fleet.targets.eks.cluster",
    "EksGpuCapacity": "llmd_fleet.targets.eks.cluster",
    "EksGpuCapacityArgs": "llmd_fleet.targets.eks.cluster",
    "EksIam": "llmd_fleet.targets.eks.cluster",
    "EksIamArgs": "llmd_fleet.targets.eks.cluster",
    "EksNetwork": "llmd_fleet.targets.eks.cluster",
    "EksNetworkArgs": "llmd_fleet.targets.eks.cluster",
    "EksSystemNodes": "llmd_fleet.targets.eks.cluster",
    "EksSystemNodesArgs": "llmd_fleet.targets.eks.cluster",
    "TcpxoNodeSetup": "llmd_fleet.targets.gke.tcpxo",
    "TcpxoNodeSetupArgs": "llmd_fleet.targets.gke.tcpxo",
    "AcceleratorPlatform": "llmd_fleet.platform.accelerators",
    "AcceleratorPlatformArgs": "llmd_fleet.platform.accelerators",
    "LeaderWorkerSetController": "llmd_fleet.platform.lws",
    "LeaderWorkerSetControllerArgs": "llmd_fleet.platform.lws",
    "Autoscaling": "llmd_fleet.layers.autoscaling.component",
    "AutoscalingArgs": "llmd_fleet.layers.autoscaling.component",
    "ModelServing": "llmd_fleet.layers.serving.component",
    "ModelServingArgs": "llmd_fleet.layers.serving.component",
    "ServingLayers": "llmd_fleet.program",
    "ServingLayersArgs": "llmd_fleet.program",
    "add_serving_layers": "llmd_fleet.program",
    "accelerator_platform_args": "llmd_fleet.program",
    "Router": "llmd_fleet.layers.router.component",
    "RouterArgs": "llmd_fleet.layers.router.component",
    "GatewayLayer": "llmd_fleet.layers.gateway.component",
    "GatewayLayerArgs": "llmd_fleet.layers.gateway.component",
    "ResponsesLayer": "llmd_fleet.layers.responses.component",
    "ResponsesLayerArgs": "llmd_fleet.layers.responses.component",
    "GkeResponses": "llmd_fleet.targets.gke.database",
    "GkeResponsesArgs": "llmd_fleet.targets.gke.database",
    "EksResponses": "llmd_fleet.targets.eks.database",
    "EksResponsesArgs": "llmd_fleet.targets.eks.database",
    "NetworkIsolation": "llmd_fleet.security.isolation",
    "NetworkIsolationArgs": "llmd_fleet.security.isolation",
    "Observability": "llmd_fleet.layers.observability.component",
    "ObservabilityArgs": "llmd_fleet.layers.observability.component",
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
    "accelerator_platform_args",
    "add_serving_layers",
    "check_settings",
    "fabric_for",
    "parse_config",
    "plan_fleet",
    "serving_image",
]


# Names under a cloud target's folder that need no cloud SDK (pure halves).
_CLOUD_FREE: frozenset[str] = frozenset()


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmd_fleet' has no attribute {name!r}")
    # A target kind's folder whose kind needs a cloud SDK extra (`TargetSpec.sdk_extra`).
    kind = module.split(".")[2] if module.startswith("llmd_fleet.targets.") else ""
    if kind and name not in _CLOUD_FREE:
        extras = import_module("llmd_fleet.targets.extras")  # loaded on use, like every name here
        try:
            extras.require_target_extra(kind)
        except extras.MissingExtraError as exc:
            raise ImportError(f"llmd_fleet.{name}: {exc}") from None
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
