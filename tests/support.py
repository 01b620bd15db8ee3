"""What tests share besides fixtures: the repository's stacks and their raw config, the engine
image, Pulumi config as the CLI sets it, and Pulumi's mock engine recording what is registered.
Fixtures stay in conftest.py; tests import these names from here, never from conftest."""

import copy
import functools
import json
import os
import socketserver
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pulumi
import pytest
from pulumi.runtime import Mocks, mocks

from llmd_fleet.cli.synth import Recorded, RecordingMocks
from llmd_fleet.core.problems import PROJECT, ConfigError, Problem
from llmd_fleet.core.yaml_documents import yaml_document
from llmd_fleet.stack.parse import parse_config
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
    (`serving.engine: simulator`, kind local only; tests/targets/local/test_local_sim.py covers them)."""
    simulated = {s for s in all_stacks() if _serving(s).get("engine") == "simulator"}
    return [s for s in all_stacks() if s not in simulated]


def responses_stacks() -> list[str]:
    """The stacks with the Responses layer (`llmd-fleet:responses`)."""
    return [s for s in all_stacks() if "responses" in stack_raw_config(s)]


def stack_raw_config(stack: str = REFERENCE_STACK) -> dict[str, Any]:
    """The stack file's settings as parse_config takes them (keys without the namespace). Its
    `secure:` values are left out: they are secrets, which a program reads apart from the
    settings (the stack files' ciphertexts are placeholders)."""
    return copy.deepcopy(_stack_settings(stack))


@functools.cache
def _stack_settings(stack: str) -> dict[str, Any]:
    # Read once per test process (collection asks for every stack's settings many times); callers
    # get copies.
    document = yaml_document((STACKS_DIR / f"Pulumi.{stack}.yaml").read_bytes())
    return {
        key.split(":", 1)[1]: value
        for key, value in document["config"].items()
        if not (isinstance(value, dict) and set(value) == {"secure"})
    }


def set_stack_config(raw: dict[str, Any], secrets: dict[str, str] | None = None) -> None:
    """Put raw config (and secret values) into the Pulumi runtime as the CLI would."""
    values = {
        f"{PROJECT}:{k}": json.dumps(v) if isinstance(v, dict | list) else str(v) for k, v in raw.items()
    }
    secret_keys = []
    for key, value in (secrets or {}).items():
        values[f"{PROJECT}:{key}"] = value
        secret_keys.append(f"{PROJECT}:{key}")
    pulumi.runtime.set_all_config(values, secret_keys)


MocksT = TypeVar("MocksT", bound=Mocks)


def start_mock_engine(
    engine: MocksT, *, project: str = PROJECT, stack: str = "test", monitor: Any = None
) -> MocksT:
    """Put Pulumi's mock engine in place for what the test registers next (`engine` answers and,
    for RecordingMocks, records every resource); returns it."""
    pulumi.runtime.set_mocks(engine, project=project, stack=stack, preview=False, monitor=monitor)
    return engine


def record(build: Callable[[], None], engine: RecordingMocks | None = None) -> list[Recorded]:
    """Run `build` (it registers real Pulumi resources) under the mock engine; what it recorded."""
    recorder = start_mock_engine(engine or RecordingMocks())
    mocks.test(build)()
    return list(recorder.created)


def config_problems(raw: dict[str, Any]) -> list[Problem]:
    """The problems parse_config refuses `raw` with; the test fails when it parses."""
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return caught.value.problems


def problems_by_key(raw: dict[str, Any]) -> dict[str, str]:
    """config_problems as a mapping from the key each names to its message."""
    return dict(config_problems(raw))


# serve_forever's default poll interval is 0.5 s, and shutdown() waits for the next poll: every
# test that stops a loopback server would pay up to half a second for nothing.
SHUTDOWN_POLL_S = 0.02


def serve_in_background(server: socketserver.BaseServer) -> socketserver.BaseServer:
    """Serve `server` from a daemon thread until `server.shutdown()`, which then returns within
    SHUTDOWN_POLL_S."""
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    ).start()
    return server
