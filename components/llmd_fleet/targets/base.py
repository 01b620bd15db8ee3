"""What every target kind shares: the target section's common keys, the rules that depend only on
them, and `TargetSpec`, the pure description each kind registers in llmd_fleet/targets/specs.py.
Pure."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import Pattern
from llmd_fleet.core.fabric import Fabric
from llmd_fleet.core.netpol import ClusterRanges, Peer
from llmd_fleet.core.problems import Key, Problem, key
from llmd_fleet.versions import version_tuple, versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

PlatformMode = Literal["install", "preinstalled"]
PrometheusMode = Literal["operator", "gmp", "install", "none"]
"""Who scrapes the fleet (`observability.prometheus`, llmd_fleet/layers/observability/config.py);
each kind names its default (`TargetSpec.prometheus`)."""
Settings = TypeVar("Settings", bound=ConfigModel)


@dataclass(frozen=True)
class SystemPool:
    """The CPU nodes a target creates for the fleet's system pods (the endpoint pickers among
    them): the keys and values of their machine type and count."""

    machine_key: Key
    machine_type: str
    count_key: Key
    count: int


def _no_problems(config: "StackConfig") -> list[Problem]:
    return []


@dataclass(frozen=True)
class ResponsesStore:
    """Where a kind keeps the PostgreSQL of `llmd-fleet:responses`: what the Responses layer's
    rules and NetworkPolicies need to know of it (llmd_fleet/layers/responses/rules.py, flows.py)."""

    section: str
    """The `responses.database.<section>` the kind reads (its model is in the kind's folder; a
    section under another kind is refused)."""
    managed: bool
    """Whether the kind's platform runs the database (Cloud SQL, RDS: its own backups, storage
    that grows to `maxStorageGiB`); False: the layer declares CloudNativePG in the cluster, and
    `responses.backup` is required."""
    settings: type[ConfigModel]
    """The model of its `responses.database.<section>` (in the kind's folder): the database model
    (llmd_fleet/layers/responses/config.py) has one optional field of it per section."""
    settings_doc: str
    """That field's description (the config reference and the component schema show it)."""
    problems: "Callable[[StackConfig], list[Problem]]" = _no_problems
    """The kind's rules of its database (GKE: the Cloud SQL tier and ranges, the gateway address;
    on-prem: the backup store outside the cluster's ranges)."""
    peers: "Callable[[StackConfig], list[Peer]] | None" = None
    """Where a managed database answers, the agentic API's egress to it (Cloud SQL's private
    service range, RDS's subnets); None: the CloudNativePG pods."""
    gateway_address: "Callable[[StackConfig], str | None]" = lambda config: None
    """The address reserved for a gateway the kind's platform manages, which the agentic API sends
    its inference requests to (GKE's gke-l7-rilb); None: the gateway's proxy pods."""


class TargetBase(ConfigModel):
    """Where the fleet runs. `kind` chooses the section that applies: `gke` for kind gke, `eks`
    for kind eks, `onprem` for kinds onprem and local (one model per kind, llmd_fleet/targets/<kind>/
    config.py; a section under another kind is refused)."""

    kind: str
    """Target platform. `onprem`: an existing Kubernetes cluster reached through a kubeconfig.
    `gke`: a GKE Standard cluster with A3 Mega GPU pools, created by the stack (`gke` section).
    `eks`: an EKS cluster with p5.48xlarge GPU node groups on EFA, created by the stack (`eks`
    section). `local`: an existing kind cluster on a laptop, reached through the kubeconfig like
    onprem, with plain CPU nodes (no GPU drivers, no DRA claims) and `serving.engine: simulator`
    (docs/local-sim.md)."""
    kubernetes_version: Annotated[str, Pattern(r"1\.[0-9]{1,3}(\.[0-9]{1,3})?")]
    """Kubernetes version of the cluster (e.g. "1.34.2"); manifests are validated against it."""
    kubeconfig_context: Annotated[str, Pattern(r"[\x20-\x7e]{1,253}")] | None = None
    """kubeconfig context to use (printable ASCII); the kubeconfig's current context when unset."""
    platform: PlatformMode = "install"
    """Who installs the cluster-wide software the fleet runs on. `install`: the stack releases it
    (GPU Operator, NVIDIA DRA driver, DRANET, the LWS controller, the gateway's CRDs and
    controller, KEDA, the CloudNativePG operator, the router's and ModelExpress' CRD bundles),
    each at the version matrix's pin. `preinstalled`: the cluster already runs them (most on-prem
    clusters, a shared platform team's cluster, the twin) and the stack declares only its own
    objects; the NIC DeviceClass the stack names is still created. Kinds onprem and local only:
    a gke or eks cluster is created by the stack and has nothing installed (docs/deploy.md)."""
    gpu_driver: Literal["host", "gpu-operator"] = "host"
    """Where the NVIDIA driver comes from: preinstalled on the hosts (DGX OS, driver root /) or
    the GPU Operator's driver container (/run/nvidia/driver). Must stay `host` (unused) on kind
    local, whose nodes have no GPUs."""

    @property
    def installs_platform(self) -> bool:
        """Whether the stack releases the third-party cluster software (`platform: install`)."""
        return self.platform == "install"


def managed_cluster_problems(
    target: TargetBase, kind: str, pinned_version: str, driver_source: str
) -> list[Problem]:
    """What a target whose cluster the stack creates (gke, eks) fixes itself: the control-plane
    minor pinned in the version matrix, the host GPU driver and the kubeconfig."""
    path = Key("llmd-fleet:target", target)
    problems = []
    if version_tuple(target.kubernetes_version)[:2] != version_tuple(pinned_version)[:2]:
        problems.append(
            Problem(
                path.at("kubernetes_version"),
                f"must be the minor the {kind.upper()} cluster is created at ({pinned_version}) "
                f"(got {target.kubernetes_version!r})",
            )
        )
    if target.gpu_driver != "host":
        problems.append(Problem(path.at("gpu_driver"), f"must be host on {kind}: {driver_source}"))
    if target.kubeconfig_context is not None:
        problems.append(
            Problem(path.at("kubeconfig_context"), f"not used on {kind}: the stack builds the kubeconfig")
        )
    if target.platform != "install":
        problems.append(
            Problem(
                path.at("platform"),
                f"must be install on {kind}: the stack creates the cluster, so nothing is preinstalled "
                "(preinstalled is for kind onprem or local)",
            )
        )
    return problems


@dataclass(frozen=True)
class TargetSpec:
    """A target kind's pure half: what config parsing, sizing and the NetworkPolicies need to know.
    Its Pulumi half (the cluster, the image build's arguments, the managed database) is the module
    `BUILDS[kind]` names, imported only for a stack of that kind."""

    kind: str
    """The `target.kind` value that selects this spec (`SPECS` is keyed by it)."""
    config: type[TargetBase]
    """The kind's model of `llmd-fleet:target` (its `kind: Literal["<kind>"]` and its section): the
    stack's `target` union is built from these, in registry order (llmd_fleet/stack/model.py)."""
    fabric: Fabric
    """How KV and the all-to-all move between nodes (NIXL backends, env, pod additions)."""
    nic_gbps: int
    """Line rate of one GPU-fabric NIC, the default of `fleet.nodeGroups.<name>.nicGbps`."""
    prometheus: PrometheusMode
    """Who scrapes the fleet when `observability.prometheus` is unset."""
    problems: "Callable[[StackConfig], list[Problem]]"
    """The kind's cross-field rules (its section against the fleet, what it cannot run)."""
    cluster_ranges: "Callable[[StackConfig], ClusterRanges]"
    """The cluster's pod and Service ranges, and where gateway and health-check traffic comes from."""
    fleet_problems: "Callable[[StackConfig], list[Problem]]"
    """The kind's rules of the other sections (its node groups, the serving engine), reported after
    the Kubernetes version rule: a GPU kind's (llmd_fleet/targets/rules.py
    `gpu_fleet_problems`) or the simulator's (kind local)."""
    defaults: "Callable[[StackConfig], StackConfig]" = lambda config: config
    """The kind's defaults of other sections (an explicit value is always kept)."""
    section: str | None = None
    """The `target.<section>` key this kind reads (kinds may share one: local reads `onprem`)."""
    platform_gateways: tuple[str, ...] = ()
    """`gateway.implementation` values the kind's platform provides itself (GKE's managed gateway
    class): refused under any other kind."""
    platform_prometheus: tuple[tuple[str, str], ...] = ()
    """(`observability.prometheus` value, what it is) the kind's platform provides itself (GKE's
    Managed Service for Prometheus): refused under any other kind."""
    creates_cluster: bool = False
    """Whether the stack creates the cluster (and its credentials) rather than reaching an
    existing one through a kubeconfig."""
    system_pool: "Callable[[StackConfig], SystemPool | None]" = lambda config: None
    """The CPU pool the stack creates for system pods, None where the cluster is not the stack's."""
    simulated: bool = False
    """Whether the kind runs CPU nodes and the engine simulator only (a laptop's kind cluster):
    `serving.simulator` may be set without the simulator engine (the engine itself is refused
    otherwise) and the router's tokenizer is sized for a try-out."""
    image_registry: str | None = None
    """Where the serving image goes when the stack names no registry, said when `images.registry`
    is set anyway ("the build pushes to ECR": the registry its Pulumi half's `image_registry`
    creates; kind local: nothing is built); None: the stack names its own (`images.registry`,
    required with `images.build`)."""
    upstream_fabric: Fabric | None = None
    """The fabric when the stack runs the upstream vLLM image (`images.build: false`), where that
    image lacks the user space of the kind's own fabric (EKS: no EFA, so KV moves over TCP);
    None: the same fabric as with a build."""
    responses: ResponsesStore | None = None
    """Where the kind keeps the response store (`llmd-fleet:responses`); None: the kind keeps none
    (kind local refuses the key)."""
    sdk_extra: tuple[str, str, str] | None = None
    """(extra, distribution, module) of the cloud SDK the kind's Pulumi half loads: the
    package's optional extra (`llmd-fleet[<extra>]`, pyproject.toml) checked before the stack
    imports that half; None: the core install serves it."""
    components: tuple[str, ...] = ()
    """`module:Component` of each public component under the kind's folder: `llmd_fleet` exports
    it and its `<Component>Args` (llmd_fleet/stack/registry.py `TARGET_EXPORTS`)."""


def store_settings(database: object, section: str, model: type[Settings]) -> Settings:
    """A kind's section of `responses.database` (`section`, its `ResponsesStore.section`), its
    model's defaults when unset. The database model's sections are built from the registry, so
    the type checker sees the kind's own model only through this."""
    value = getattr(database, section, None)
    if value is None:
        return model()
    assert isinstance(value, model), f"responses.database.{section} is a {type(value).__name__}"
    return value


def kubernetes_version_problems(config: "StackConfig") -> list[Problem]:
    """The cluster runs the DRA API the fleet's claims use (resource.k8s.io/v1)."""
    minimum = versions().kubernetes.minimum
    if version_tuple(config.target.kubernetes_version)[:2] >= version_tuple(minimum)[:2]:
        return []
    return [
        Problem(
            key(config, "target", "kubernetes_version"),
            f"must be {minimum} or newer (DRA resource.k8s.io/v1) (got {config.target.kubernetes_version!r})",
        )
    ]
