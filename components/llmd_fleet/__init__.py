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

Each component takes one `<Component>Args` TypedDict; the docstring under each key says what it
means and, for an optional key, its default (Pulumi's schema analyzer reads the same text; the
public-API test, `tests/test_public_api.py`, requires it). Names load on first use, so
`import llmd_fleet` and the pure layers need no Pulumi SDK.
The offline tools (`llmd_fleet.cli`: the `llmd-fleet` CLI, policy runner, checkers) and the
policy pack (`llmd_fleet.policies`) are not part of this API.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # BEGIN generated imports (`make docs`: python -m devtools.facade_imports); do not edit
    from llmd_fleet.checks import check_settings as check_settings
    from llmd_fleet.core.fabric import Fabric as Fabric
    from llmd_fleet.core.problems import ConfigError as ConfigError
    from llmd_fleet.images.build import ImageBuild as ImageBuild
    from llmd_fleet.images.build import ImageBuildArgs as ImageBuildArgs
    from llmd_fleet.images.build import serving_image as serving_image
    from llmd_fleet.layers.assembly import ServingLayersArgs as ServingLayersArgs
    from llmd_fleet.layers.autoscaling.component import Autoscaling as Autoscaling
    from llmd_fleet.layers.autoscaling.component import AutoscalingArgs as AutoscalingArgs
    from llmd_fleet.layers.gateway.component import GatewayLayer as GatewayLayer
    from llmd_fleet.layers.gateway.component import GatewayLayerArgs as GatewayLayerArgs
    from llmd_fleet.layers.observability.component import Observability as Observability
    from llmd_fleet.layers.observability.component import ObservabilityArgs as ObservabilityArgs
    from llmd_fleet.layers.responses.component import ResponsesLayer as ResponsesLayer
    from llmd_fleet.layers.responses.component import ResponsesLayerArgs as ResponsesLayerArgs
    from llmd_fleet.layers.router.component import Router as Router
    from llmd_fleet.layers.router.component import RouterArgs as RouterArgs
    from llmd_fleet.layers.serving.component import ModelServing as ModelServing
    from llmd_fleet.layers.serving.component import ModelServingArgs as ModelServingArgs
    from llmd_fleet.plan.fleet import FleetPlan as FleetPlan
    from llmd_fleet.plan.fleet import PlanError as PlanError
    from llmd_fleet.plan.fleet import plan_fleet as plan_fleet
    from llmd_fleet.platform.accelerators import AcceleratorPlatform as AcceleratorPlatform
    from llmd_fleet.platform.accelerators import AcceleratorPlatformArgs as AcceleratorPlatformArgs
    from llmd_fleet.platform.lws import LeaderWorkerSetController as LeaderWorkerSetController
    from llmd_fleet.platform.lws import LeaderWorkerSetControllerArgs as LeaderWorkerSetControllerArgs
    from llmd_fleet.program import ServingLayers as ServingLayers
    from llmd_fleet.program import accelerator_platform_args as accelerator_platform_args
    from llmd_fleet.program import add_serving_layers as add_serving_layers
    from llmd_fleet.security.isolation import NetworkIsolation as NetworkIsolation
    from llmd_fleet.security.isolation import NetworkIsolationArgs as NetworkIsolationArgs
    from llmd_fleet.stack.model import StackConfig as StackConfig
    from llmd_fleet.stack.parse import parse_config as parse_config
    from llmd_fleet.targets.eks.cluster import EksCluster as EksCluster
    from llmd_fleet.targets.eks.cluster import EksClusterArgs as EksClusterArgs
    from llmd_fleet.targets.eks.cluster import EksGpuCapacity as EksGpuCapacity
    from llmd_fleet.targets.eks.cluster import EksGpuCapacityArgs as EksGpuCapacityArgs
    from llmd_fleet.targets.eks.cluster import EksIam as EksIam
    from llmd_fleet.targets.eks.cluster import EksIamArgs as EksIamArgs
    from llmd_fleet.targets.eks.cluster import EksNetwork as EksNetwork
    from llmd_fleet.targets.eks.cluster import EksNetworkArgs as EksNetworkArgs
    from llmd_fleet.targets.eks.cluster import EksSystemNodes as EksSystemNodes
    from llmd_fleet.targets.eks.cluster import EksSystemNodesArgs as EksSystemNodesArgs
    from llmd_fleet.targets.eks.database import EksResponses as EksResponses
    from llmd_fleet.targets.eks.database import EksResponsesArgs as EksResponsesArgs
    from llmd_fleet.targets.gke.cluster import GkeCluster as GkeCluster
    from llmd_fleet.targets.gke.cluster import GkeClusterArgs as GkeClusterArgs
    from llmd_fleet.targets.gke.cluster import GkeNetwork as GkeNetwork
    from llmd_fleet.targets.gke.cluster import GkeNetworkArgs as GkeNetworkArgs
    from llmd_fleet.targets.gke.cluster import GkeNodePool as GkeNodePool
    from llmd_fleet.targets.gke.cluster import GkeNodePoolArgs as GkeNodePoolArgs
    from llmd_fleet.targets.gke.database import GkeResponses as GkeResponses
    from llmd_fleet.targets.gke.database import GkeResponsesArgs as GkeResponsesArgs
    from llmd_fleet.targets.gke.tcpxo import TcpxoNodeSetup as TcpxoNodeSetup
    from llmd_fleet.targets.gke.tcpxo import TcpxoNodeSetupArgs as TcpxoNodeSetupArgs
    from llmd_fleet.targets.onprem.cluster import OnPremCluster as OnPremCluster
    from llmd_fleet.targets.onprem.cluster import OnPremClusterArgs as OnPremClusterArgs
    from llmd_fleet.targets.specs import fabric_for as fabric_for
    # END generated imports

# The type checker reads the public names from the imports above; at run time they load from
# their modules on first use. Public name -> its module, for every name that is not a layer's: the
# layers' components and their Args come from the registry (`LAYER_EXPORTS`, one `LayerSpec` per
# layer in llmd_fleet/stack/registry.py), read on first use so `import llmd_fleet` stays light.
# The target kinds' components come from it too (`TARGET_EXPORTS`, from each kind's `TargetSpec`).
# The imports above are generated from this table and the registry's two (`make docs`, which runs
# devtools/facade_imports.py); tests/facade/test_exports.py fails when they are stale.
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
    "AcceleratorPlatform": "llmd_fleet.platform.accelerators",
    "AcceleratorPlatformArgs": "llmd_fleet.platform.accelerators",
    "LeaderWorkerSetController": "llmd_fleet.platform.lws",
    "LeaderWorkerSetControllerArgs": "llmd_fleet.platform.lws",
    "ServingLayers": "llmd_fleet.program",
    "ServingLayersArgs": "llmd_fleet.layers.assembly",
    "add_serving_layers": "llmd_fleet.program",
    "accelerator_platform_args": "llmd_fleet.program",
    "NetworkIsolation": "llmd_fleet.security.isolation",
    "NetworkIsolationArgs": "llmd_fleet.security.isolation",
    "ImageBuild": "llmd_fleet.images.build",
    "ImageBuildArgs": "llmd_fleet.images.build",
    "serving_image": "llmd_fleet.images.build",
}

# Names under a cloud target's folder that need no cloud SDK (pure halves).
_CLOUD_FREE: frozenset[str] = frozenset()


def _exports() -> dict[str, str]:
    """Every public name -> the module that defines it: this module's table, the layers' and the
    target kinds'."""
    registry = import_module("llmd_fleet.stack.registry")
    return {**_EXPORTS, **registry.LAYER_EXPORTS, **registry.TARGET_EXPORTS}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562), `__all__` (every public name,
    sorted) included."""
    if name == "__all__":
        value: Any = sorted(_exports())
        globals()[name] = value
        return value
    module = _EXPORTS.get(name) or (None if name.startswith("_") else _exports().get(name))
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
    return sorted({*globals(), *_exports()})
