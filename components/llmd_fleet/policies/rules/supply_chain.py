"""Supply chain: every image and chart comes pinned from images/versions.toml."""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import HELM_RELEASE_TYPES, Resource, dig, resource_rule, schema
from llmd_fleet.policies.rules._k8s import WORKLOAD_TYPES, containers, iter_strings, pod_templates


def matrix() -> tuple[frozenset[str], tuple[tuple[str, str | None, str], ...]]:
    """(image refs, (chart, repository, version) of charts) of the project's version matrix
    (read through llmd_fleet.versions, which caches the parsed file)."""
    from llmd_fleet.versions import versions

    matrix = versions()
    images = frozenset(image.ref for image in matrix.images.values())
    charts = tuple((c.chart, c.repository, c.version) for c in matrix.charts.values())
    return images, charts


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """repository, tag, digest of an image reference."""
    name, _, digest = ref.partition("@")
    repository, tag = name, None
    if ":" in name.rsplit("/", 1)[-1]:
        repository, tag = name.rsplit(":", 1)
    return repository, tag, digest or None


def _allowed(ref: str, allowed: set[str]) -> bool:
    from llmd_fleet.images.spec import is_built_image

    # The wide-EP build of this checkout: its tag hashes the Dockerfile and the matrix's build
    # arguments, so only the current matrix's build matches.
    if ref in allowed or is_built_image(ref):
        return True
    repository, tag, digest = split_image(ref)
    # Adding a digest to a tag the matrix pins is stricter, never looser.
    return digest is not None and f"{repository}:{tag}" in allowed


def _images(resource: Resource) -> list[tuple[str, str, str]]:
    """(where, container, image) of every container of a workload."""
    found = []
    for template in pod_templates(resource):
        for c in containers(template.spec):
            found.append((template.where(), c.name, c.image or ""))
    return found


def _check_pinned(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    forbidden = {t.lower() for t in cfg["forbiddenTags"]}
    images, charts = matrix()
    allowed = set(images) | set(cfg["additionalImages"])
    if resource.type in HELM_RELEASE_TYPES:
        _check_chart(resource, charts, forbidden, report)
        return
    for where, name, image in _images(resource):
        _, tag, digest = split_image(image)
        if not image:
            report(f"{where}: container {name} names no image")
        elif tag is None and digest is None:
            report(f"{where}: container {name} image {image} has no tag, so it pulls whatever `latest` is")
        elif tag is not None and tag.lower() in forbidden:
            report(f"{where}: container {name} image {image} uses the moving tag {tag!r}")
        elif not _allowed(image, allowed):
            report(
                f"{where}: container {name} image {image} is not pinned in images/versions.toml "
                f"(allowed: {', '.join(sorted(allowed))})"
            )


def _check_chart(
    resource: Resource, charts: tuple[tuple[str, str | None, str], ...], forbidden: set[str], report: Any
) -> None:
    chart = str(resource.props.get("chart") or "")
    version = resource.props.get("version")
    repository = dig(resource.props, "repositoryOpts", "repo")
    known = [
        c for c in charts if c[0] == chart and (c[1] is None or repository is None or c[1] == repository)
    ]
    if not version:
        report(f"{resource.ref()}: chart {chart} has no version, so every deploy may install a different one")
    elif not known:
        report(f"{resource.ref()}: chart {chart} {version} is not pinned in images/versions.toml")
    elif str(version) not in {c[2] for c in known}:
        report(
            f"{resource.ref()}: chart {chart} {version} differs from the version matrix "
            f"({', '.join(sorted({c[2] for c in known}))})"
        )
    for path, text in iter_strings(resource.props.get("values") or {}):
        if "image" not in path.lower():
            continue
        leaf = path.rsplit(".", 1)[-1]
        tag = text if leaf == "tag" else (split_image(text)[1] if leaf in ("image", "ref") else None)
        if tag is not None and tag.lower() in forbidden:
            report(f"{resource.ref()}: values.{path} pins the moving image tag {tag!r}")


image_pinned = resource_rule(
    name="image-pinned",
    description="Every container image and Helm chart is the version pinned in images/versions.toml "
    "(or the wide-EP image built from it), never a moving tag such as `latest`.",
    remediation="Pin the image or chart in images/versions.toml and read it through "
    "llmd_fleet.versions (versions().image(name).ref / .chart(name)); never use latest, main or "
    "nightly tags.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    types=(*WORKLOAD_TYPES, *sorted(HELM_RELEASE_TYPES)),
    check=_check_pinned,
    config=schema(
        {
            "forbiddenTags": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["latest", "main", "master", "nightly", "dev", "edge", "stable"],
                "description": "Moving tags no image may use.",
            },
            "additionalImages": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Image references allowed besides the version matrix (e.g. a "
                "mirror's copy); each must still carry a fixed tag.",
            },
        }
    ),
    tags=["supply-chain"],
)


def _check_digest(resource: Resource, cfg: dict[str, Any], report: Any) -> None:
    for where, name, image in _images(resource):
        if image and split_image(image)[2] is None:
            report(f"{where}: container {name} image {image} is pinned by tag only; add its @sha256 digest")


image_digest = resource_rule(
    name="image-digest",
    description="Container images are pinned by digest as well as by tag.",
    remediation='Add the image\'s `digest = "sha256:..."` to its entry in images/versions.toml '
    "(the digest of the tag's manifest) so the reference becomes repo:tag@sha256:....",
    level=EnforcementLevel.ADVISORY,
    severity=Severity.LOW,
    types=WORKLOAD_TYPES,
    check=_check_digest,
    tags=["supply-chain"],
)

POLICIES = [image_pinned, image_digest]
