"""Placeholder secrets: what `llmd-fleet check --for-deploy` and the stack program under
`pulumi up` refuse. The example stack files carry placeholder ciphertext
(`secure: v1:placeholder-...`) so they render offline; before a deploy each must be replaced with
`pulumi config set --secret KEY VALUE`. Each refusal names the key and the exact command. Pure."""

import re
from collections.abc import Mapping

from llmd_fleet.core.problems import PROJECT, Problem

_PLACEHOLDER = re.compile(r"placeholder|^<.*>$|^hf_\.\.\.$|^change-?me$|^$", re.IGNORECASE)

# How each secret the stacks use is set, copy-pasteable (docs/deploy.md).
_SET_VALUE = {
    "responsesDbPassword": '"$(openssl rand -hex 24)"',
    "hfToken": '"$HF_TOKEN"',
    "kubeconfig": '"$(cat kubeconfig.yaml)"',
}


def is_placeholder(value: str) -> bool:
    """A secret's value (or a stack file's `secure:` ciphertext) that is a stand-in, not a secret."""
    return bool(_PLACEHOLDER.search(value.strip()))


def set_secret_command(key: str, stack: str) -> str:
    """The command that sets secret `key` of `stack` (run from the project directory)."""
    return f"pulumi config set --secret {key} {_SET_VALUE.get(key, '<value>')} --stack {stack}"


def placeholder_secret_problems(secrets: Mapping[str, str], stack: str) -> list[Problem]:
    """One problem per secret (key without the project prefix -> its value or ciphertext) that is
    a placeholder, naming the key and the command that sets it; sorted by key."""
    return [
        Problem(f"{PROJECT}:{key}", f"is a placeholder secret; set it: {set_secret_command(key, stack)}")
        for key, value in sorted(secrets.items())
        if is_placeholder(value)
    ]
