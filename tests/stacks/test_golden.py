"""Golden rendered output: what every stack deploys is committed under tests/golden/<stack>/, so a
change to it is visible in review. Refresh on purpose with `make golden`."""

import pytest

from devtools import golden


@pytest.mark.parametrize("stack", golden.stacks())
def test_the_rendered_stack_matches_its_golden_copy(stack):
    assert golden.committed(stack), f"no golden copy of {stack}: run `make golden`"
    assert golden.differences(stack, golden.rendered(stack)) == [], (
        f"{stack} renders differently from tests/golden/{stack}: review, then `make golden`"
    )
