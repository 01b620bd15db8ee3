"""`llmd-fleet check --for-deploy`: before rendering, refuse a stack file whose secrets are still
placeholders (the example stacks' `secure: v1:placeholder-...`), one line per key with the command
that sets it (llmd_fleet/config/deploy_secrets.py). The stack program refuses the same under
`pulumi up`. Also refused: remote code from a moving revision (llmd_fleet/config/remote_code.py)."""

from pathlib import Path

import yaml

from llmd_fleet.cli.stack_file import stack_file_path
from llmd_fleet.config.deploy_secrets import placeholder_secret_problems
from llmd_fleet.config.remote_code import remote_code_problem
from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import PROJECT, Problem


def stack_file_secrets(stacks_dir: Path, stack: str) -> dict[str, str]:
    """The `secure:` values of the project's keys in a stack file (read_stack_file has already
    accepted it), by key without the project prefix."""
    document = yaml.safe_load(stack_file_path(stacks_dir, stack).read_text(encoding="utf-8")) or {}
    secrets: dict[str, str] = {}
    for key, value in (document.get("config") or {}).items():
        project, _, name = key.rpartition(":")
        if project in ("", PROJECT) and isinstance(value, dict) and set(value) == {"secure"}:
            secrets[name] = str(value["secure"])
    return secrets


def deploy_problems(stacks_dir: Path, stack: str, config: StackConfig) -> list[Problem]:
    problems = placeholder_secret_problems(stack_file_secrets(stacks_dir, stack), stack)
    remote = remote_code_problem(config.model)
    return problems + ([remote] if remote is not None else [])
