"""The version matrix (images/versions.toml), loaded once and typed.

Every chart, image and software version the fleet uses comes from this file. Installed as a
wheel the matrix ships inside the package; in a checkout it is read from images/.
"""

import functools
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

_PACKAGED = Path(__file__).with_name("versions.toml")
# llmd_fleet/versions.py -> the repository root is two directories up.
_CHECKOUT = Path(__file__).resolve().parents[2] / "images" / "versions.toml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Image(_Frozen):
    """A container image pinned by tag, and by digest where one is known."""

    repository: str
    tag: str
    digest: str | None = None

    @property
    def ref(self) -> str:
        """The reference a pod uses: repository:tag, plus @digest when pinned."""
        return f"{self.repository}:{self.tag}" + (f"@{self.digest}" if self.digest else "")


class Chart(_Frozen):
    """A Helm chart: an OCI reference (oci://...) or a chart name in an HTTP repository."""

    chart: str
    version: str
    repository: str | None = None


class Manifest(_Frozen):
    """A release asset of plain YAML (CRD bundles): its pinned URL and the version it carries."""

    url: str
    version: str


class KubernetesVersions(_Frozen):
    """[kubernetes]: the lowest minor the fleet runs on, and what the managed targets request."""

    minimum: str
    """Lowest Kubernetes minor the fleet supports (checked against target.kubernetesVersion)."""
    gke: str
    """Control-plane version the GKE target requests."""
    eks: str
    """Cluster version the EKS target requests."""


class VllmVersions(_Frozen):
    """[vllm]: one vLLM release for the serving image and the offline argument-parser check."""

    version: str
    """The vLLM release (the image's VLLM_VERSION build argument and tag prefix)."""


class ToolVersions(_Frozen):
    """[tools]: checkers that run in their own cached environment, outside the project's lock."""

    checkov: str
    """checkov release `make checkov` installs (devtools/checkov_scan/env.py)."""
    promtool: str
    """github.com/prometheus/prometheus module version `make promtool` builds cmd/promtool from
    (infra/promtool); Prometheus 3.x is tagged v0.3xx.y there."""
    custom_metrics_apiserver: str = Field(alias="custom-metrics-apiserver")
    """sigs.k8s.io/custom-metrics-apiserver module version `make day-two`'s external-metrics
    stand-in is built with (devtools/daytwo/scaling.py)."""
    prometheus_operator: str = Field(alias="prometheus-operator")
    """github.com/prometheus-operator/prometheus-operator module version whose resource selector
    and config generator write `make day-two`'s scrape configuration (devtools/daytwo/operator_config.py)."""
    inference_perf: str = Field(alias="inference-perf")
    """inference-perf release: the load generator of `llmd-fleet bench` and the config models
    `make bench-workload` validates its workload with (devtools/bench/env.py)."""
    inference_perf_python: str = Field(alias="inference-perf-python")
    """Python minor (`X.Y`) the inference-perf environment is built from."""
    preflight_numpy: str = Field(alias="preflight-numpy")
    """numpy of the preflight probe's test environment (devtools/preflight_probe/env.py)."""
    cloud_check_botocore: str = Field(alias="cloud-check-botocore")
    """botocore release whose service models `make check-cloud` reads (devtools/cloud_check/env.py)."""
    cloud_check_google_api_python_client: str = Field(alias="cloud-check-google-api-python-client")
    """google-api-python-client release whose discovery documents `make check-cloud` reads."""


class TwinVersions(_Frozen):
    """[twin]: Go modules the control-plane twin builds (infra/twin, docs/twin.md)."""

    etcd: str
    """go.etcd.io/etcd/server/v3 module version."""
    kubernetes: str
    """k8s.io/kubernetes module version (kube-apiserver, scheduler, controller-manager, kubectl)."""
    kwok: str
    """sigs.k8s.io/kwok module version."""
    pulumi_cli: str = Field(alias="pulumi-cli")
    """github.com/pulumi/pulumi/pkg/v3 module version (the Pulumi CLI of the engine run)."""
    pulumi_language_nodejs_sdk: str = Field(alias="pulumi-language-nodejs-sdk")
    """sdk/v3 and pkg/v3 version the Node.js language host builds against (not the CLI's)."""
    npm_pulumi: str = Field(alias="npm-pulumi")
    """@pulumi/pulumi of the TypeScript program of `make components`."""
    npm_typescript: str = Field(alias="npm-typescript")
    npm_ts_node: str = Field(alias="npm-ts-node")
    npm_types_node: str = Field(alias="npm-types-node")
    pulumi_yaml: str = Field(alias="pulumi-yaml")
    """github.com/pulumi/pulumi-yaml module version (the YAML language host of `make components`)."""
    kubernetes_provider: str = Field(alias="kubernetes-provider")
    """github.com/pulumi/pulumi-kubernetes/provider/v4 module version (a pseudo-version)."""
    kubernetes_provider_tag: str = Field(alias="kubernetes-provider-tag")
    """The upstream tag of that pseudo-version's commit (what the provider's code is)."""
    pulumi_language_python: str = Field(alias="pulumi-language-python")
    """pulumi/pulumi commit the Python language host is built from (a source snapshot)."""
    pulumi_language_python_version: str = Field(alias="pulumi-language-python-version")
    """The version that host is stamped with and reports (its source's sdk/.version, `-dev`)."""
    lws: str
    """kubernetes-sigs/lws commit of the twin's LWS controller manager: that of the release tag
    v<[charts.lws].version> (built from a source snapshot, which must hold this commit)."""


class BundledVersions(_Frozen):
    """[build.bundled]: versions that come inside pinned wheels (recorded, not build arguments)."""

    nccl: str
    """NCCL of the torch wheel (nvidia-nccl-cu13); DeepEP v2 links and checks it at run time."""
    ucx: str
    """UCX inside the nixl-cu13 wheel."""
    deepgemm: str
    """DeepGEMM vendored in the vLLM wheel."""
    flashinfer: str
    """FlashInfer the vLLM wheel requires."""


class BuildVersions(_Frozen):
    """[build]: everything the wide-EP serving image (images/Dockerfile.wide-ep) pins. Each field
    becomes a build argument (llmd_fleet/images/build.py `build_args`)."""

    cuda: str
    """CUDA toolkit of the base image (also picks the nixl-cu<major> wheel)."""
    ubuntu: str
    """Ubuntu release of the base image."""
    python: str
    """Python of the image's virtual environment (the Ubuntu release's own)."""
    torch: str
    """torch, exactly as the pinned vLLM requires it; DeepEP is compiled against it."""
    nixl: str
    """NIXL (nixl and nixl-cu<major> wheels)."""
    nvshmem: str
    """NVSHMEM source release tag without its leading v (<version>-<release>), built from source."""
    deepep: str
    """DeepEP git commit."""
    gdrcopy: str
    """gdrcopy release (user-space libgdrapi)."""
    efa_installer: str
    """AWS EFA installer release (EFA variant only)."""
    modelexpress: str
    """ModelExpress client (`modelexpress` package), installed beside vLLM."""
    cuda_arch: str
    """TORCH_CUDA_ARCH_LIST / CUDA architectures to compile for."""
    base_repository: str
    """Repository of the CUDA base image."""
    base_digest: str | None = None
    """Digest of the base image, when known; pins it beyond the tag."""
    bundled: BundledVersions

    @property
    def base_tag(self) -> str:
        """The devel flavour: DeepGEMM, DeepEP and FlashInfer compile kernels at run time."""
        return f"{self.cuda}-devel-ubuntu{self.ubuntu}"

    @property
    def base_image(self) -> str:
        """repository:tag of the base image, plus @digest when pinned."""
        digest = f"@{self.base_digest}" if self.base_digest else ""
        return f"{self.base_repository}:{self.base_tag}{digest}"

    @property
    def cuda_major(self) -> str:
        """CUDA major version (the first component of `cuda`)."""
        return self.cuda.split(".")[0]


class VersionMatrix(_Frozen):
    """images/versions.toml. Images and charts are keyed by a stable name; `image(name)` and
    `chart(name)` fail loudly when a name is missing, and a test checks that every name the code
    asks for exists."""

    kubernetes: KubernetesVersions
    vllm: VllmVersions
    tools: ToolVersions
    twin: TwinVersions
    images: dict[str, Image]
    charts: dict[str, Chart]
    build: BuildVersions
    manifests: dict[str, Manifest] = {}
    software: dict[str, str] = {}

    def image(self, name: str) -> Image:
        """`[images.<name>]`; KeyError naming the matrix file and the section when absent."""
        try:
            return self.images[name]
        except KeyError:
            raise KeyError(f"{matrix_path()}: no [images.{name}]") from None

    def manifest(self, name: str) -> Manifest:
        """`[manifests.<name>]`; KeyError naming the matrix file and the section when absent."""
        try:
            return self.manifests[name]
        except KeyError:
            raise KeyError(f"{matrix_path()}: no [manifests.{name}]") from None

    def chart(self, name: str) -> Chart:
        """`[charts.<name>]`; KeyError naming the matrix file and the section when absent."""
        try:
            return self.charts[name]
        except KeyError:
            raise KeyError(f"{matrix_path()}: no [charts.{name}]") from None


def matrix_path() -> Path:
    """Where the matrix is read from: the packaged copy if installed as a wheel, else the checkout."""
    return _PACKAGED if _PACKAGED.exists() else _CHECKOUT


@functools.cache
def versions() -> VersionMatrix:
    """The parsed, validated version matrix."""
    return VersionMatrix.model_validate(tomllib.loads(matrix_path().read_text()))


def version_tuple(version: str) -> tuple[int, ...]:
    """'1.34.2' -> (1, 34, 2); a leading 'v' is ignored."""
    return tuple(int(part) for part in version.lstrip("v").split("."))
