"""docs/quickstart.md's prerequisites (devtools/quickstart_prerequisites.py): the committed page is
the generated one, and its DRA path installs exactly what `target.platform: install` releases for
the quickstart stack (charts, versions, namespaces and their Pod Security labels, values, CRD
manifests), read from the synthesized stack, not from the functions the generator calls. The CI
walk of the page (devtools/twin/quickstart.py) does not run this section."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import quickstart_prerequisites as prerequisites
from devtools.twin import quickstart as walk
from llmd_fleet.cli.synth import synthesize
from tests.support import STACKS_DIR

PAGE = prerequisites.DOC.read_text(encoding="utf-8")
_HELM = re.compile(
    r"helm upgrade --install (\S+) (\S+)(?: --repo (\S+))? --version (\S+) \\\n"
    r"  --namespace (\S+) --wait(?: -f - <<'EOF'\n(.*?)\nEOF)?",
    re.S,
)
_NAMESPACE = re.compile(r"kubectl apply -f - <<'EOF'\n(apiVersion: v1\nkind: Namespace\n.*?)\nEOF", re.S)


def _part(heading_start: str, heading_end: str) -> str:
    start = PAGE.index(heading_start)
    return PAGE[start : PAGE.index(heading_end, start)]


def _helm(text: str) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "chart": chart,
            "repo": repo or None,
            "version": version,
            "namespace": namespace,
            "values": yaml.safe_load(values) if values else {},
        }
        for name, chart, repo, version, namespace, values in _HELM.findall(text)
    }


def test_the_committed_page_is_the_generated_one() -> None:
    assert prerequisites.main(["--check"]) == 0, "run python -m devtools.quickstart_prerequisites"


def test_the_walk_runs_none_of_it() -> None:
    """The prerequisites lie outside both sections the CI walk reads."""
    generated = prerequisites.generated()
    for heading in (walk.DEPLOY_SECTION, walk.TEARDOWN_SECTION):
        assert "helm upgrade" not in walk.section(PAGE, heading)
    assert generated in PAGE and "helm upgrade" in generated


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The quickstart stack with `target.platform: install`, synthesized under mocks."""
    stacks = tmp_path_factory.mktemp("stacks")
    text = (STACKS_DIR / f"Pulumi.{prerequisites.STACK}.yaml").read_text()
    assert "    platform: preinstalled\n" in text
    (stacks / f"Pulumi.{prerequisites.STACK}.yaml").write_text(
        text.replace("    platform: preinstalled\n", "    platform: install\n")
    )
    return synthesize(Path(stacks), prerequisites.STACK)


def test_the_dra_path_releases_what_platform_install_releases(installed: Any) -> None:
    documented = _helm(_part("### 3b.", "<!-- prerequisites: end -->"))
    released = {
        r.inputs["name"]: {
            "chart": r.inputs["chart"],
            "repo": (r.inputs.get("repositoryOpts") or {}).get("repo"),
            "version": r.inputs["version"],
            "namespace": r.inputs["namespace"],
            "values": r.inputs.get("values") or {},
        }
        for r in installed.resources
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    assert documented == released


def test_the_namespaces_have_the_stacks_pod_security_labels(installed: Any) -> None:
    documented = {
        doc["metadata"]["name"]: doc["metadata"]["labels"]
        for doc in (
            yaml.safe_load(m) for m in _NAMESPACE.findall(_part("### 3b.", "<!-- prerequisites: end -->"))
        )
    }
    created = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels") or {}
        for r in installed.resources
        if r.type == "kubernetes:core/v1:Namespace"
    }
    assert documented
    for name, labels in documented.items():
        psa = {k: v for k, v in created[name].items() if k.startswith("pod-security.kubernetes.io/")}
        assert labels == psa, name


def test_the_crd_manifests_are_the_stacks(installed: Any) -> None:
    documented = re.findall(r"kubectl apply --server-side -f (\S+)", PAGE)
    applied = [r.inputs["file"] for r in installed.resources if r.type == "kubernetes:yaml/v2:ConfigFile"]
    assert documented == applied


def test_the_device_plugin_path_is_one_line_of_the_stack_file() -> None:
    text = (STACKS_DIR / f"Pulumi.{prerequisites.STACK}.yaml").read_text()
    assert text.count(prerequisites.DRA_LINE) == 1
    assert f"s/{prerequisites.DRA_LINE}/{prerequisites.DEVICE_PLUGIN_LINE}/" in PAGE


def test_the_pulumi_cli_is_the_one_ci_runs() -> None:
    from llmd_fleet.versions import versions

    version = versions().twin.pulumi_cli.removeprefix("v")
    assert f"sh -s -- --version {version}\n" in PAGE
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" in PAGE and "--yes --non-interactive" in PAGE


def test_the_device_plugin_mode_requests_gpus_without_claims(tmp_path: Path) -> None:
    """The stack after the page's one-line change: GPUs as `nvidia.com/gpu` limits, no
    ResourceClaimTemplate and no NIC DeviceClass (so no DRA driver or DRANET is needed)."""
    text = (STACKS_DIR / f"Pulumi.{prerequisites.STACK}.yaml").read_text()
    (tmp_path / f"Pulumi.{prerequisites.STACK}.yaml").write_text(
        text.replace(prerequisites.DRA_LINE, prerequisites.DEVICE_PLUGIN_LINE)
    )
    types = {r.type for r in synthesize(tmp_path, prerequisites.STACK).resources}
    assert "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate" not in types
    assert "kubernetes:resource.k8s.io/v1:DeviceClass" not in types
    assert "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet" in types


def test_every_block_is_valid_bash() -> None:
    import subprocess

    blocks = re.findall(r"```bash\n(.*?)```", prerequisites.generated(), re.S)
    assert len(blocks) >= 5
    for block in blocks:
        result = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True, check=False)
        assert result.returncode == 0, (block, result.stderr)
