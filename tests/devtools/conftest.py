"""The reference stack's rendering and its vLLM command lines, rendered once per test session for
the vLLM argument check's tests (test_vllm_check.py, test_vllm_check_command.py), which only read
them."""

from pathlib import Path

import pytest

from devtools.vllm_check.extract import stack_command_lines
from devtools.vllm_check.lines import CommandLine
from llmd_fleet.cli.main import run
from tests.support import REFERENCE_STACK


@pytest.fixture(scope="session")
def reference_manifests(tmp_path_factory) -> Path:
    """The manifests folder of `llmd-fleet render` of the reference stack."""
    out = tmp_path_factory.mktemp("render")
    assert run(["render", REFERENCE_STACK, "--out", str(out / REFERENCE_STACK)]) == 0
    return out / REFERENCE_STACK / "manifests"


@pytest.fixture(scope="session")
def reference_lines(reference_manifests) -> list[CommandLine]:
    """Every vLLM command line of the reference stack's rendering (no finding)."""
    lines, findings = stack_command_lines(REFERENCE_STACK, reference_manifests)
    assert findings == []
    return lines
