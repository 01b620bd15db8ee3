"""The policy pack: the pack itself."""

import re
from pathlib import Path

import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
)

from llmd_fleet.cli.policy_check import (
    load_policy_config,
)
from llmd_fleet.cli.synth import synthesize
from llmd_fleet.policies.pack import all_policies
from llmd_fleet.policies.rules import _k8s
from tests.policies.helpers import (
    POLICIES,
    violations,
)
from tests.support import REPO, STACKS_DIR, all_stacks


def test_every_policy_is_documented_with_an_explicit_level():
    assert len(POLICIES) == len(all_policies()) >= 24
    for policy in all_policies():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name), policy.name
        assert policy.enforcement_level in (EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY)
        # One sentence: ends with a period and has no other sentence end inside.
        assert policy.description.endswith(".") and ". " not in policy.description[:-1], policy.name
        assert policy.remediation_steps and len(policy.remediation_steps) > 40, policy.name
        assert policy.severity is not None
        for prop, spec in (policy.config_schema.properties if policy.config_schema else {}).items():
            assert "default" in spec and spec.get("description"), (policy.name, prop)


def test_conventions_match_the_components():
    from llmd_fleet.layers.serving import pod

    assert pod.ENGINE_NAME == _k8s.ENGINE_CONTAINER and pod.SIDECAR_NAME == _k8s.SIDECAR_CONTAINER


PACKAGED_PACK = REPO / "components" / "llmd_fleet" / "policies"


@pytest.mark.parametrize("pack_dir", [REPO / "policies", PACKAGED_PACK], ids=["checkout", "packaged"])
def test_pack_entry_points_only_serve_the_pack(pack_dir):
    main = (pack_dir / "__main__.py").read_text()
    assert "serve()" in main and "def " not in main and "PolicyPack(" not in main
    project = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text())
    assert project["version"] == pyproject_version()
    if pack_dir == PACKAGED_PACK:
        # Installed, the pack runs in whatever environment holds the package: no virtualenv option.
        assert project["runtime"] == "python"
    else:
        assert project["runtime"]["name"] == "python"
        assert (pack_dir / project["runtime"]["options"]["virtualenv"]).resolve() == REPO / ".venv"


def pyproject_version() -> str:
    import tomllib

    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_the_pack_is_built_in_one_place():
    from llmd_fleet.policies import pack

    source = Path(pack.__file__).read_text()
    assert source.count("PolicyPack(") == 1 and "def serve()" in source


@pytest.mark.parametrize("stack", all_stacks())
def test_shipped_stacks_have_no_mandatory_violation(stack):
    resources = list(synthesize(STACKS_DIR, stack).resources)
    config_file = REPO / "policies" / "config" / f"{stack}.json"
    config = load_policy_config(config_file) if config_file.is_file() else {}
    for policy in all_policies():
        if policy.enforcement_level == EnforcementLevel.MANDATORY:
            settings = config.get(policy.name)
            assert (
                violations(policy.name, resources, settings if isinstance(settings, dict) else None) == []
            ), policy.name


def test_the_reference_stack_has_a_gpu_budget(reference_policy_config):
    assert reference_policy_config["gpu-budget"]["maxGpus"] == 544
