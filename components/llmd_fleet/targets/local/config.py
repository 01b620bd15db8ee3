"""Kind local: the target model. Pure."""

from typing import Literal

from llmd_fleet.targets.base import TargetBase
from llmd_fleet.targets.onprem.config import OnPremTargetConfig


class LocalTarget(TargetBase):
    """An existing kind cluster on a laptop, reached through the kubeconfig like onprem, with plain
    CPU nodes (no GPU drivers, no DRA claims) and `serving.engine: simulator` (docs/local-sim.md)."""

    kind: Literal["local"]
    onprem: OnPremTargetConfig | None = None
    """kinds onprem and local: the cluster's pod and Service ranges (OnPremTargetConfig's defaults
    when unset; a kind cluster's own defaults are 10.244.0.0/16 and 10.96.0.0/16)."""
