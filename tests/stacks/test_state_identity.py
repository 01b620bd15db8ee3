"""State identity across versions: a resource whose URN changes is replaced by `pulumi up` unless
it keeps its old URN as an alias. tests/fixtures/state/<stack>.txt lists the URNs a stack deployed
with llmd-fleet 0.1.0 holds; every later rendering must still answer to each of them."""

import pytest

from devtools import golden
from tests.support import REPO

STATE_DIR = REPO / "tests" / "fixtures" / "state"
RELEASED = sorted(p.stem for p in STATE_DIR.glob("*.txt"))


def _identities(stack: str) -> list[str]:
    lines = (STATE_DIR / f"{stack}.txt").read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def _current(stack: str) -> tuple[set[str], dict[str, list[str]]]:
    """(URNs, alias -> the resources that claim it) of the stack as it renders now."""
    urns: set[str] = set()
    claims: dict[str, list[str]] = {}
    owner = ""
    for line in golden.rendered(stack)["urns.txt"].splitlines():
        if line.startswith("  alias "):
            claims.setdefault(line.removeprefix("  alias "), []).append(owner)
        else:
            owner = line
            urns.add(line)
    return urns, claims


def test_every_released_stack_has_its_identities_recorded():
    assert RELEASED == ["eks-h100", "gke-h100", "onprem-h100"]
    for stack in RELEASED:
        assert len(_identities(stack)) > 50, stack


@pytest.mark.parametrize("stack", RELEASED)
def test_every_released_resource_keeps_its_identity(stack):
    urns, claims = _current(stack)
    lost = [urn for urn in _identities(stack) if urn not in urns and urn not in claims]
    assert lost == [], f"{stack}: these resources would be replaced (add aliases): {lost}"


@pytest.mark.parametrize("stack", RELEASED)
def test_an_alias_belongs_to_one_resource_and_is_no_current_urn(stack):
    urns, claims = _current(stack)
    assert {alias: owners for alias, owners in claims.items() if len(owners) > 1} == {}
    assert sorted(set(claims) & urns) == []
