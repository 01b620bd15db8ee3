"""How a serving pod gets its weights: from the hub, or with ModelExpress from a peer over the
GPU fabric, and how long its startup probe waits for them. Pure: the ports and the transfer
budget of one role, from the stack config and the target's fabric (llmd_fleet/plan/fleet.py calls
`weight_load_plan` for each role)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from llmd_fleet.core.fabric import Fabric

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

# ModelExpress client ports (serving.weightLoading: modelexpress), each + the GPU's device index
# (modelexpress load_strategy/base.py and metadata/publish.py at the pinned tag): the NIXL listen port of
# the weights (MX_METADATA_PORT, upstream default 5555, which is DP_RPC_PORT here) and the worker
# gRPC server peers read tensor metadata from (MX_WORKER_GRPC_PORT, upstream default 6555).
MX_METADATA_PORT = 5700
MX_WORKER_GRPC_PORT = 6555
# The ModelExpress server's gRPC port (its clients' MX_SERVER_ADDRESS).
MX_SERVER_PORT = 8001
# A target tries this many peer sources before it falls back to the hub (rdma_strategy.py
# MAX_SOURCE_RETRIES at the pinned tag); each wedged source costs one MX_TRANSFER_TIMEOUT.
MX_SOURCE_ATTEMPTS = 3
# Share of the fabric's line rate a weight transfer is planned at, and the margin and floor of the
# per-source timeout over that estimate.
MX_FABRIC_EFFICIENCY = 0.5
MX_TIMEOUT_MARGIN = 4
MX_MIN_TRANSFER_TIMEOUT_S = 120


@dataclass(frozen=True)
class WeightLoadPlan:
    """How a pod of a role gets its weights, and how long its startup probe waits for them."""

    mode: Literal["hub", "modelexpress"]
    hub_seconds: int
    """The configured load budget from the hub (`serving.modelLoadMinutes`)."""
    peer_transfer_seconds: float = 0.0
    """modelexpress: estimated time to receive one GPU's weights from a peer (fabric line rate
    x MX_FABRIC_EFFICIENCY); 0 for hub."""
    transfer_timeout_seconds: int = 0
    """modelexpress: MX_TRANSFER_TIMEOUT, the receive budget per peer source; 0 for hub."""
    metadata_ports: tuple[int, ...] = ()
    worker_grpc_ports: tuple[int, ...] = ()

    @property
    def startup_seconds(self) -> int:
        """The startup probe's budget: the hub load, plus with ModelExpress every peer attempt a
        pod may spend before it falls back to the hub (a cold fleet has no peer)."""
        return self.hub_seconds + MX_SOURCE_ATTEMPTS * self.transfer_timeout_seconds


def weight_load_plan(
    config: StackConfig, weights_gib: float, gpus_per_node: int, fabric: Fabric
) -> WeightLoadPlan:
    """The weight-loading plan of one role whose GPUs each hold `weights_gib` of weights
    (replicated and expert): the hub budget, and with ModelExpress the peer transfer estimate,
    its per-source timeout and the client's ports."""
    hub = config.serving.model_load_seconds
    if config.serving.weight_loading == "hub":
        return WeightLoadPlan(mode="hub", hub_seconds=hub)
    rate = max(1, fabric.weight_gbps_per_gpu) * 1e9 * MX_FABRIC_EFFICIENCY / 8
    estimate = weights_gib * 2**30 / rate
    timeout = max(MX_MIN_TRANSFER_TIMEOUT_S, math.ceil(MX_TIMEOUT_MARGIN * estimate))
    return WeightLoadPlan(
        mode="modelexpress",
        hub_seconds=hub,
        peer_transfer_seconds=estimate,
        transfer_timeout_seconds=timeout,
        metadata_ports=tuple(MX_METADATA_PORT + i for i in range(gpus_per_node)),
        worker_grpc_ports=tuple(MX_WORKER_GRPC_PORT + i for i in range(gpus_per_node)),
    )
