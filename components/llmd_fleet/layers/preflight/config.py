"""The `serving.preflight` section. Pure."""

from typing import Annotated

from pydantic import Field

from llmd_fleet.config.base import ConfigModel


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class PreflightConfig(_Model):
    """The fabric preflight: a Job of two pods, on two GPU nodes of the serving node group with
    the serving pods' DRA claim, that moves data between them over the fleet's NIXL backend,
    checks every byte and fails below `minEfficiency` x the group's `nicGbps`. The
    DisaggregatedSet waits for it on the first deploy (docs/preflight.md)."""

    enabled: bool = True
    """Render the preflight Job (and its ConfigMap, headless Service and NetworkPolicy). Unset:
    true, except with `serving.engine: simulator`, which has no fabric to probe (false there; true
    is refused)."""
    min_efficiency: Annotated[float, Field(ge=0.05, le=1.0)] = 0.4
    """Fraction of one fabric NIC's line rate (the node group's `nicGbps`) each direction must
    reach; below it the Job fails and serving is not created. Unused on a fabric without a rate
    gate (GKE `tcpxo`: the probe verifies bytes and reports rates only, docs/preflight.md)."""
    transfer_mib: Annotated[int, Field(ge=16, le=8192)] = 1024
    """Bytes moved per transfer, in MiB (host memory registered on each side; the pods' memory
    limit is sized from it)."""
    iterations: Annotated[int, Field(ge=1, le=100)] = 8
    """Timed transfers per direction (READ, then WRITE), after one untimed warm-up each."""
    deadline_minutes: Annotated[int, Field(ge=5, le=240)] = 60
    """The Job's activeDeadlineSeconds, in minutes: image pull, scheduling and the probe itself.
    Pulumi waits as long (`pulumi.com/timeoutSeconds`)."""
    gate_serving: bool = True
    """The DisaggregatedSet depends on the Job, so `pulumi up` creates serving only after the
    probe passed. false: nothing waits for the Job (`pulumi.com/skipAwait`), e.g. to re-run it
    on a fleet that is already serving."""
