"""How every version of images/versions.toml is checked, or why it cannot be checked here.

A pin is a key whose value is a version: `version` and `tag` keys of the [images.*], [charts.*]
and [manifests.*] tables and every key of [kubernetes], [vllm], [tools], [twin], [build],
[build.bundled] and [software] except the few that are not versions (NOT_VERSIONS). Each is one of:

- `PyPI(package, python)`: `<package>==<pin>` must resolve through uv for that Python on
  x86_64 Linux (several packages: each must);
- `GoModule(module)`: `<module>@<pin>` must resolve through `go list -m`;
- `WheelSet(package)`: the version the serving image's wheel set resolves `package` to must be the
  pin (the pin records what arrives inside other wheels);
- `Offline(where)`: not resolvable with a package client here (a container registry, a chart
  repository, a source tag, a cloud API), listed with where it comes from.

A key of the matrix that is neither classified here nor in NOT_VERSIONS fails the check and
tests/devtools/test_version_check.py.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PyPI:
    packages: tuple[str, ...]
    python: str


@dataclass(frozen=True)
class GoModule:
    module: str


@dataclass(frozen=True)
class WheelSet:
    package: str


@dataclass(frozen=True)
class Offline:
    where: str


Check = PyPI | GoModule | WheelSet | Offline

# Keys of the version tables that are not versions.
NOT_VERSIONS = frozenset({"build.cuda_arch", "build.base_repository"})
# The Python of the project and its tool environments (pyproject.toml requires-python; the tool
# environments are built from it); the image's comes from [build].python.
HOST_PYTHON = "3.11"
_CLOUD_API = "a cloud API"

FIXED: dict[str, Check] = {
    "kubernetes.minimum": Offline("a Kubernetes minor; GKE and EKS offer it through their APIs (cloud APIs)"),
    "kubernetes.gke": Offline(f"GKE's server config (`gcloud container get-server-config`), {_CLOUD_API}"),
    "kubernetes.eks": Offline(f"EKS's cluster versions (`aws eks describe-cluster-versions`), {_CLOUD_API}"),
    "vllm.version": PyPI(("vllm",), "build"),
    "tools.checkov": PyPI(("checkov",), HOST_PYTHON),
    "tools.promtool": GoModule("github.com/prometheus/prometheus"),
    "tools.custom-metrics-apiserver": GoModule("sigs.k8s.io/custom-metrics-apiserver"),
    "tools.prometheus-operator": GoModule("github.com/prometheus-operator/prometheus-operator"),
    "tools.inference-perf": PyPI(("inference-perf",), "inference-perf"),
    "tools.inference-perf-python": Offline(
        "a Python minor taken from the machine (PATH, pyenv), never downloaded"
    ),
    "tools.preflight-numpy": PyPI(("numpy",), HOST_PYTHON),
    "tools.cloud-check-botocore": PyPI(("botocore",), HOST_PYTHON),
    "tools.cloud-check-google-api-python-client": PyPI(("google-api-python-client",), HOST_PYTHON),
    "twin.etcd": GoModule("go.etcd.io/etcd/server/v3"),
    "twin.kubernetes": GoModule("k8s.io/kubernetes"),
    "twin.kwok": GoModule("sigs.k8s.io/kwok"),
    "twin.pulumi-cli": GoModule("github.com/pulumi/pulumi/pkg/v3"),
    "twin.pulumi-yaml": GoModule("github.com/pulumi/pulumi-yaml"),
    "twin.pulumi-language-nodejs-sdk": GoModule("github.com/pulumi/pulumi/pkg/v3"),
    **{
        f"twin.npm-{name}": Offline(
            f"an npm package ({package}), installed by exact version in `make components`"
        )
        for name, package in (
            ("pulumi", "@pulumi/pulumi"),
            ("typescript", "typescript"),
            ("ts-node", "ts-node"),
            ("types-node", "@types/node"),
        )
    },
    "twin.kubernetes-provider": GoModule("github.com/pulumi/pulumi-kubernetes/provider/v4"),
    "twin.kubernetes-provider-tag": Offline("a git tag of pulumi/pulumi-kubernetes (its source repository)"),
    "twin.pulumi-language-python": Offline(
        "a commit of pulumi/pulumi, built from a source snapshot (the module proxy refuses "
        "github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)"
    ),
    "twin.pulumi-language-python-version": Offline(
        "the version stamped into the host built from that commit (its sdk/.version, -dev)"
    ),
    "twin.lws": Offline(
        "the commit of kubernetes-sigs/lws tag v<[charts.lws].version>, built from a source snapshot "
        "that must hold it (the module proxy refuses sigs.k8s.io/lws)"
    ),
    "build.cuda": Offline("the base image's tag <cuda>-devel-ubuntu<ubuntu> in [build].base_repository"),
    "build.ubuntu": Offline("the base image's tag <cuda>-devel-ubuntu<ubuntu> in [build].base_repository"),
    "build.python": Offline("the base image's Ubuntu Python (a distribution package)"),
    "build.torch": PyPI(("torch",), "build"),
    "build.nixl": PyPI(("nixl", "nixl-cu{cuda_major}"), "build"),
    "build.nvshmem": Offline("a source tag of NVIDIA/nvshmem, built from source in the image"),
    "build.deepep": Offline("a commit of deepseek-ai/DeepEP, built from source in the image"),
    "build.gdrcopy": Offline("a release tag of NVIDIA/gdrcopy, built from source in the image"),
    "build.efa_installer": Offline("AWS's EFA installer tarball, downloaded by the image build"),
    "build.modelexpress": PyPI(("modelexpress",), "build"),
    "build.bundled.nccl": WheelSet("nvidia-nccl-cu{cuda_major}"),
    "build.bundled.ucx": Offline("the UCX build inside the nixl-cu<major> wheel, not a package of its own"),
    "build.bundled.deepgemm": Offline("vendored inside the vLLM wheel (vllm/third_party/deep_gemm)"),
    "build.bundled.flashinfer": WheelSet("flashinfer-python"),
    "software.postgresql-major": Offline(
        "the PostgreSQL majors Cloud SQL (POSTGRES_<major>: make check-cloud checks the sqladmin enum) "
        f"and RDS offer, {_CLOUD_API}"
    ),
    "software.cloudnative-pg": Offline(
        "a release tag of cloudnative-pg/cloudnative-pg (its source repository)"
    ),
}
for _addon in ("vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"):
    FIXED[f"software.eks-addon-{_addon}"] = Offline(
        f"EKS add-on versions (`aws eks describe-addon-versions`), {_CLOUD_API}"
    )


def _flatten(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any, dict[str, Any]]]:
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten(value, path)
        else:
            yield path, value, table


@dataclass(frozen=True)
class Pin:
    key: str
    version: str
    check: Check | None
    """None: a version key nobody classified."""


def pins(matrix: dict[str, Any]) -> list[Pin]:
    """Every version of the raw matrix (images/versions.toml as parsed), in file order."""
    cuda_major = str(matrix["build"]["cuda"]).split(".")[0]
    out = []
    for key, value, table in _flatten(matrix):
        group = key.split(".")[0]
        leaf = key.rsplit(".", 1)[1]
        if key in NOT_VERSIONS:
            continue
        if group in ("images", "charts", "manifests"):
            if leaf not in ("tag", "version"):
                continue
            source = table.get("url") or table.get("repository") or table.get("chart")
            what = {
                "images": "an image tag in",
                "charts": "a chart version in",
                "manifests": "a release file:",
            }[group]
            out.append(Pin(key, str(value), Offline(f"{what} {source}")))
            continue
        check = FIXED.get(key)
        if isinstance(check, PyPI):
            check = PyPI(tuple(p.format(cuda_major=cuda_major) for p in check.packages), check.python)
        elif isinstance(check, WheelSet):
            check = WheelSet(check.package.format(cuda_major=cuda_major))
        out.append(Pin(key, str(value), check))
    return out
