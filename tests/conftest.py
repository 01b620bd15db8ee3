"""Shared fixtures: raw config of the reference stack, the CRD folder, a clean Pulumi config, the
mock engine, rendered stacks. What tests share besides fixtures is in tests/support.py."""

import copy
from pathlib import Path
from typing import Any

import pulumi
import pytest

from llmd_fleet.cli.synth import RecordingMocks
from llmd_fleet.core.yaml_documents import yaml_documents
from tests.support import CRD_DIR, stack_raw_config, start_mock_engine


@pytest.fixture
def raw_config() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config())


@pytest.fixture
def crd_dir() -> Path:
    assert CRD_DIR.is_dir(), f"CRD schemas not found at {CRD_DIR}; set LLMD_CRD_DIR"
    return CRD_DIR


@pytest.fixture(autouse=True)
def reset_pulumi_config():
    """Config set by one test must never leak into the next."""
    pulumi.runtime.set_all_config({}, [])
    yield
    pulumi.runtime.set_all_config({}, [])


@pytest.fixture
def mock_engine() -> RecordingMocks:
    """Pulumi's mock engine for this test (project llmd-fleet, stack test), recording every resource
    registered; `mock_engine.created` is what was."""
    return start_mock_engine(RecordingMocks())


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """`rendered(stack)`: every object `llmd-fleet render` writes for a stack, rendered once per
    test session."""
    from llmd_fleet.cli.main import run

    objects: dict[str, list[dict[str, Any]]] = {}

    def render(stack: str) -> list[dict[str, Any]]:
        if stack not in objects:
            out = tmp_path_factory.mktemp(f"rendered-{stack}") / "out"
            assert run(["render", stack, "--out", str(out)]) == 0
            objects[stack] = [
                document
                for path in sorted((out / "manifests").rglob("*.yaml"))
                for document in yaml_documents(path.read_text())
                if document
            ]
        return objects[stack]

    return render
