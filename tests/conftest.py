"""Shared fixtures: the repository's stacks, raw config of the reference stack, a clean engine."""

import copy
import os
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from llmd_fleet.core.problems import PROJECT
from llmd_fleet.versions import versions

REPO = Path(__file__).resolve().parent.parent
STACKS_DIR = REPO / "stacks"
REFERENCE_STACK = "onprem-h100"
# Every CRD schema the check needs is vendored in the repository (schemas/crds/SOURCES.md);
# LLMD_CRD_DIR points the tests at another copy to cross-check.
CRD_DIR = Path(os.environ.get("LLMD_CRD_DIR", REPO / "schemas" / "crds"))
# The engine image pure pod builders get in tests (the program passes serving_image()'s answer).
ENGINE_IMAGE = versions().image("vllm").ref


def all_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def single_model_stacks() -> list[str]:
    """The stacks in the single-model form (no `llmd-fleet:models`)."""
    return [s for s in all_stacks() if "models" not in stack_raw_config(s)]


def _serving(stack: str) -> dict[str, Any]:
    return dict(stack_raw_config(stack).get("serving") or {})


def vllm_stacks() -> list[str]:
    """The GPU stacks: every stack but those whose serving pods run the simulator
    (`serving.engine: simulator`, kind local only; tests/targets/test_local_sim.py covers them)."""
    simulated = {s for s in all_stacks() if _serving(s).get("engine") == "simulator"}
    return [s for s in all_stacks() if s not in simulated]


def responses_stacks() -> list[str]:
    """The stacks with the Responses layer (`llmd-fleet:responses`)."""
    return [s for s in all_stacks() if "responses" in stack_raw_config(s)]


def stack_raw_config(stack: str = REFERENCE_STACK) -> dict[str, Any]:
    """The stack file's settings as parse_config takes them (keys without the namespace). Its
    `secure:` values are left out: they are secrets, which a program reads apart from the
    settings (the stack files' ciphertexts are placeholders)."""
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    return {
        key.split(":", 1)[1]: value
        for key, value in document["config"].items()
        if not (isinstance(value, dict) and set(value) == {"secure"})
    }


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


def set_stack_config(raw: dict[str, Any], secrets: dict[str, str] | None = None) -> None:
    """Put raw config (and secret values) into the Pulumi runtime as the CLI would."""
    import json

    values = {
        f"{PROJECT}:{k}": json.dumps(v) if isinstance(v, dict | list) else str(v) for k, v in raw.items()
    }
    secret_keys = []
    for key, value in (secrets or {}).items():
        values[f"{PROJECT}:{key}"] = value
        secret_keys.append(f"{PROJECT}:{key}")
    pulumi.runtime.set_all_config(values, secret_keys)


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
                for document in yaml.safe_load_all(path.read_text())
                if document
            ]
        return objects[stack]

    return render
