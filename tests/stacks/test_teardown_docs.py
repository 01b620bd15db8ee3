"""docs/deploy.md "Teardown" names every resource the stacks protect from deletion, in Pulumi
(`protect=True`) or in the provider's API (`deletion_protection=True`), and the file that marks it."""

import re

from tests.support import REPO

PACKAGE = REPO / "components" / "llmd_fleet"
DEPLOY = REPO / "docs" / "deploy.md"

# The file that marks a resource protected -> how the teardown table names it.
PROTECTED = {
    "layers/responses/component.py": "CloudNativePG `Cluster`",
    "targets/gke/cluster.py": "GKE cluster",
    "targets/gke/database.py": "Cloud SQL instance",
    "targets/eks/database.py": "RDS instance",
    "targets/eks/cluster.py": "EKS cluster",
}


def _teardown_section() -> str:
    text = DEPLOY.read_text()
    start = text.index("## Teardown")
    return text[start : text.index("\n## ", start + 1)]


def _marking_files() -> set[str]:
    pattern = re.compile(r"\b(protect|deletion_protection)=True")
    return {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        # The policy pack's rules check the option; they declare no resource.
        if "policies" not in p.relative_to(PACKAGE).parts and pattern.search(p.read_text())
    }


def test_every_protected_resource_is_in_the_teardown_table():
    assert _marking_files() == set(PROTECTED), (
        "a resource's protection changed: update docs/deploy.md Teardown"
    )
    section = _teardown_section()
    for path, name in PROTECTED.items():
        assert f"`{path}`" in section, path
        assert name in section, name


def test_the_teardown_covers_every_stack():
    section = _teardown_section()
    for stack in sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml")
    ):
        if stack == "local-sim":
            continue  # a kind cluster the twin/local docs tear down with the cluster
        assert f"`{stack}`" in section, stack
    assert "--exclude-protected" in section and "pulumi state unprotect" in section
