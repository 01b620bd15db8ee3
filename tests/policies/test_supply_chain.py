"""The policy pack: supply chain."""

from llmd_fleet.cli.synth import Recorded
from llmd_fleet.images.spec import image_tag
from llmd_fleet.versions import versions
from tests.policies.helpers import (
    PINNED,
    SMALL,
    deployment,
    edited,
    one,
    record,
    violations,
)


def test_images_come_from_the_version_matrix(reference, monkeypatch):
    assert violations("image-pinned", reference) == []
    latest = [{"name": "vllm", "image": "docker.io/vllm/vllm-openai:latest", "resources": SMALL}]
    assert violations("image-pinned", record(deployment("latest", latest))) == [
        "Deployment llm-d/latest: container vllm image docker.io/vllm/vllm-openai:latest uses the moving "
        "tag 'latest'"
    ]
    stray = [{"name": "x", "image": "docker.io/library/busybox:1.36", "resources": SMALL}]
    (message,) = violations("image-pinned", record(deployment("stray", stray)))
    assert "busybox:1.36 is not pinned in images/versions.toml" in message
    assert (
        violations(
            "image-pinned",
            record(deployment("stray", stray)),
            {"additionalImages": ["docker.io/library/busybox:1.36"]},
        )
        == []
    )
    lws = one(reference, "helm.sh/v3:Release", "lws")
    pinned = versions().chart("lws").version
    other = f"{pinned}-other"
    found = violations("image-pinned", edited(reference, lws, lambda i: i.update(version=other)))
    assert found == [
        f"Helm release lws-system/lws: chart oci://registry.k8s.io/lws/charts/lws {other} differs from the "
        f"version matrix ({pinned})"
    ], found


def test_the_wide_ep_build_of_this_matrix_is_pinned_and_a_stale_one_is_not():
    registry = "registry.lab:5000/ml/llmd-fleet/vllm-wide-ep"

    def engine(image: str) -> list[Recorded]:
        return record(deployment("engine", [{"name": "vllm", "image": image, "resources": SMALL}]))

    current = f"{registry}:{image_tag('ib')}"
    assert violations("image-pinned", engine(current)) == []
    assert violations("image-pinned", engine(f"{current}@sha256:{'0' * 64}")) == []
    stale = f"{registry}:v{versions().vllm.version}-ib-000000000000"
    (message,) = violations("image-pinned", engine(stale))
    assert f"image {stale} is not pinned in images/versions.toml" in message
    other = f"registry.lab:5000/ml/llmd-fleet/not-wide-ep:{image_tag('ib')}"
    assert len(violations("image-pinned", engine(other))) == 1


def test_digests_are_advised(reference):
    assert any("pinned by tag only" in m for m in violations("image-digest", reference))
    digest = [{"name": "c", "image": f"{PINNED}@sha256:{'0' * 64}", "resources": SMALL}]
    resources = record(deployment("digest", digest))
    assert violations("image-digest", resources) == [] and violations("image-pinned", resources) == []
