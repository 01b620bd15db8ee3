"""Kind local's fabric: none. Pure."""

from llmd_fleet.core.fabric import Fabric

# kind local: no GPU fabric. The simulator's P/D "transfer" is a timed wait on the decode pod
# (serving.simulator.kvCacheTransferTimePerTokenUs); nothing moves over NIXL, so no backend, no
# fabric env and no pod additions.
LOCAL = Fabric(name="none", nixl_backends=())
