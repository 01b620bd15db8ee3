"""The GKE and EKS pages deploy with docs/deploy.md's steps (secrets, `check --for-deploy`, the
policy pack and its config), not a shorter list of their own: each page's Deploy block is the
block of its recipe in deploy.md, command for command."""

import pytest

from tests.support import REPO


def _bash_block_after(page: str, heading: str) -> list[str]:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    start = text.index("```bash\n", text.index(heading)) + len("```bash\n")
    return text[start : text.index("```", start)].splitlines()


@pytest.mark.parametrize(
    ("page", "recipe"), [("target-gke.md", "### GKE (`gke-h100`)"), ("target-eks.md", "### EKS (`eks-h100`)")]
)
def test_the_target_page_deploys_with_the_recipe_of_deploy_md(page: str, recipe: str) -> None:
    steps = _bash_block_after(page, "## Deploy")
    assert steps == _bash_block_after("deploy.md", recipe)
    assert any(s.startswith("llmd-fleet check $STACK --for-deploy") for s in steps)
    assert any("--policy-pack-config policies/config/$STACK.json" in s for s in steps)
