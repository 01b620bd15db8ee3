"""`target.platform`: `preinstalled` drops every third-party release and remote manifest and
keeps every object of the stack's own; it is refused where the stack creates the cluster."""

from pathlib import Path

import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.stack.parse import parse_config
from tests.support import STACKS_DIR, stack_raw_config

# The namespaces only the charts live in: gone with them.
CHART_NAMESPACES = {
    "manifests/cluster/namespace-gpu-operator.yaml",
    "manifests/cluster/namespace-nvidia-dra-driver-gpu.yaml",
    "manifests/cluster/namespace-lws-system.yaml",
    "manifests/cluster/namespace-agentgateway-system.yaml",
    "manifests/cluster/namespace-cnpg-system.yaml",
    "manifests/cluster/namespace-keda.yaml",
}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _render(tmp_path: Path, stack: str, platform: str) -> dict[str, bytes]:
    stacks = tmp_path / f"stacks-{platform}"
    stacks.mkdir()
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    document["config"]["llmd-fleet:target"]["platform"] = platform
    if document["config"].get("llmd-fleet:observability", {}).get("prometheus") == "install":
        # kube-prometheus-stack is a chart too (refused with preinstalled); the same in both
        # renders, so they differ only by the platform.
        document["config"]["llmd-fleet:observability"]["prometheus"] = "operator"
    scaling = document["config"]["llmd-fleet:serving"].get("autoscaling")
    if platform == "preinstalled" and scaling is not None:
        scaling["keda"] = "preinstalled"
    (stacks / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    out = tmp_path / f"out-{platform}"
    assert run(["--stacks-dir", str(stacks), "render", stack, "--out", str(out)]) == 0
    return _tree(out)


@pytest.mark.parametrize("stack", ["onprem-h100", "onprem-h100-autoscale", "local-sim"])
def test_preinstalled_keeps_every_object_of_ours_and_nothing_else(tmp_path, stack):
    installed = _render(tmp_path, stack, "install")
    preinstalled = _render(tmp_path, stack, "preinstalled")
    assert any(name.startswith("helm/") for name in installed)
    assert not [name for name in preinstalled if name.startswith(("helm/", "remote/"))]
    ours = {n for n in installed if n.startswith("manifests/")}
    kept = {n for n in preinstalled if n.startswith("manifests/")}
    # Exactly the charts' own namespaces (and, with KEDA, its namespace's policies) go away.
    dropped = ours - kept
    assert kept <= ours
    assert {n for n in dropped if not n.startswith("manifests/keda/")} <= CHART_NAMESPACES
    for name in kept:
        assert preinstalled[name] == installed[name], name


def test_preinstalled_still_creates_the_nic_device_class(tmp_path):
    preinstalled = _render(tmp_path, "onprem-h100", "preinstalled")
    classes = [yaml.safe_load(body) for name, body in preinstalled.items() if "deviceclass-" in name]
    assert [c["metadata"]["name"] for c in classes] == ["rdma-nic.llmd-fleet.io"]


@pytest.mark.parametrize("stack", ["gke-h100", "eks-h100"])
def test_preinstalled_is_refused_where_the_stack_creates_the_cluster(stack):
    raw = stack_raw_config(stack)
    raw["target"]["platform"] = "preinstalled"
    with pytest.raises(ConfigError) as failure:
        parse_config(raw)
    assert "llmd-fleet:target.platform: must be install on" in str(failure.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("observability", {"prometheus": "install"}), ("serving.autoscaling", {"keda": "install"})],
)
def test_preinstalled_refuses_a_section_that_asks_for_a_chart(key, value):
    raw = stack_raw_config("onprem-h100-autoscale")
    raw["target"]["platform"] = "preinstalled"
    section = raw
    for part in key.split("."):
        section = section.setdefault(part, {})
    section.update(value)
    with pytest.raises(ConfigError) as failure:
        parse_config(raw)
    (field,) = value
    assert f"llmd-fleet:{key}.{field}: must" in str(failure.value)
    assert "target.platform: preinstalled" in str(failure.value)


@pytest.mark.parametrize("value", ["Preinstalled", "none", "", 1, None, ["install"]])
def test_platform_accepts_only_its_two_words(value):
    raw = stack_raw_config("onprem-h100")
    raw["target"]["platform"] = value
    with pytest.raises(ConfigError) as failure:
        parse_config(raw)
    assert "llmd-fleet:target.platform" in str(failure.value)
