"""`llmd-fleet check --for-deploy`: before rendering, refuse a stack file that still holds
placeholders, one line per key, in stack file order:

- values that would reach a cloud or cluster and that no deployment means (documentation
  accounts, reservation IDs, addresses and domains, a stand-in project; llmd_fleet/config/
  placeholders.py), each naming its key and what it holds;
- placeholder secrets (the example stacks' `secure: v1:placeholder-...`), each with the command
  that sets it (llmd_fleet/config/deploy_secrets.py). The stack program refuses these under
  `pulumi up` too;
- remote code from a moving revision (llmd_fleet/config/remote_code.py).

All read the stack file through the reader render uses (llmd_fleet/cli/stack_file.py)."""

from llmd_fleet.cli.stack_file import StackFile
from llmd_fleet.config.deploy_secrets import placeholder_secret_problems
from llmd_fleet.config.placeholders import placeholder_value_problems
from llmd_fleet.config.remote_code import remote_code_problem
from llmd_fleet.core.problems import PROJECT, Problem
from llmd_fleet.stack.model import StackConfig


def stack_file_secrets(stack_file: StackFile) -> dict[str, str]:
    """The `secure:` values of the project's keys, by key without the project prefix."""
    secrets: dict[str, str] = {}
    for key, ciphertext in stack_file.ciphertexts.items():
        project, _, name = key.rpartition(":")
        if project == PROJECT:
            secrets[name] = ciphertext
    return secrets


def deploy_problems(stack_file: StackFile, config: StackConfig) -> list[Problem]:
    remote = remote_code_problem(config.model)
    return [
        *placeholder_value_problems(stack_file.values, stack_file.secret_keys),
        *placeholder_secret_problems(stack_file_secrets(stack_file), stack_file.stack),
        *([remote] if remote is not None else []),
    ]
