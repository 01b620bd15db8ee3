"""Reading a stack file the way the Pulumi CLI hands it to a program, and validating it.

Light on purpose (PyYAML, pydantic, the config models; no Pulumi): every command reads and
validates the stack file first, so bad input is refused before any SDK is imported.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmd_fleet.config.parse import check_stack_secrets, parse_config, read_pulumi_config
from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import PROJECT, ConfigError

# Stand-in for each `secure:` value of a stack file: its ciphertext is never decrypted offline.
SECRET_PLACEHOLDER = "offline-render-placeholder"


class _DuplicateKey(yaml.YAMLError):
    """A mapping names the same key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key that appears twice in one mapping. Plain YAML keeps the
    last value silently (a second `llmd-fleet:model:` block would replace the first); the Pulumi
    CLI refuses such a file, and so does this."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                earlier = first_line.get(key)
            except TypeError:  # an unhashable key; the caller refuses non-string keys
                continue
            if earlier is not None:
                raise _DuplicateKey(
                    f"duplicate key {key!r} at lines {earlier} and {line} (YAML would keep only the "
                    "last; the Pulumi CLI refuses the file): keep one"
                )
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class StackFile:
    """A stack's config as the Pulumi CLI would pass it to the program."""

    stack: str
    values: dict[str, str]
    secret_keys: frozenset[str]


def stack_file_path(stacks_dir: Path, stack: str) -> Path:
    return stacks_dir / f"Pulumi.{stack}.yaml"


def stack_names(stacks_dir: Path) -> list[str]:
    """The stacks with a `Pulumi.<stack>.yaml` in `stacks_dir`, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_stack_file(stacks_dir: Path, stack: str) -> StackFile:
    """Read stacks/Pulumi.<stack>.yaml. Objects become JSON text and `secure:` values a
    placeholder, exactly the shapes the Pulumi CLI hands a Python program."""
    path = stack_file_path(stacks_dir, stack)
    if not path.is_file():
        known = stack_names(stacks_dir)
        raise ConfigError([("stack", f"no stack file {path} (stacks: {', '.join(known) or 'none'})")])
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}
    except _DuplicateKey as exc:
        raise ConfigError([(str(path), str(exc))]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([(str(path), f"not valid YAML: {exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([(str(path), f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise ConfigError([(str(path), "must contain a `config:` mapping")])
    values: dict[str, str] = {}
    secrets = set()
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError([(str(path), f"config keys must be strings (got {key!r})")])
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[full_key] = SECRET_PLACEHOLDER
            secrets.add(full_key)
        elif isinstance(value, (dict, list)):
            values[full_key] = json.dumps(value)
        elif isinstance(value, bool):
            values[full_key] = "true" if value else "false"
        else:
            values[full_key] = str(value)
    return StackFile(stack=stack, values=values, secret_keys=frozenset(secrets))


def stack_config(stack_file: StackFile) -> StackConfig:
    """The validated config of a stack file, read exactly as the program reads it from Pulumi
    (raises ConfigError)."""
    raw, secrets = read_pulumi_config(
        stack_file.values.__getitem__, list(stack_file.values), stack_file.secret_keys.__contains__
    )
    return check_stack_secrets(parse_config(raw, secrets))
