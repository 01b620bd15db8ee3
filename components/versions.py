"""The version matrix (images/versions.toml), loaded once and typed.

Every chart, image and software version the fleet uses comes from this file. Installed as a
wheel the matrix ships inside the package; in a checkout it is read from images/.
"""

import functools
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

_PACKAGED = Path(__file__).with_name("versions.toml")
_CHECKOUT = Path(__file__).resolve().parent.parent / "images" / "versions.toml"


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


class KubernetesVersions(_Frozen):
    minimum: str


class VllmVersions(_Frozen):
    version: str


class VersionMatrix(_Frozen):
    """images/versions.toml. Images and charts are keyed by a stable name; `image(name)` and
    `chart(name)` fail loudly when a name is missing, and a test checks that every name the code
    asks for exists."""

    kubernetes: KubernetesVersions
    vllm: VllmVersions
    images: dict[str, Image]
    charts: dict[str, Chart]
    software: dict[str, str] = {}

    def image(self, name: str) -> Image:
        try:
            return self.images[name]
        except KeyError:
            raise KeyError(f"{matrix_path()}: no [images.{name}]") from None

    def chart(self, name: str) -> Chart:
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
