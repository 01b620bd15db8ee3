"""Reading a stack file the way the Pulumi CLI hands it to a program, and validating it.

Light on purpose (PyYAML, pydantic, the config models; no Pulumi): every command reads and
validates the stack file first, so bad input is refused before any SDK is imported.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmd_fleet.core.problems import PROJECT, ConfigError, clip, quote
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.parse import check_stack_secrets, parse_config, read_pulumi_config

# Stand-in for each `secure:` value of a stack file: its ciphertext is never decrypted offline.
SECRET_PLACEHOLDER = "offline-render-placeholder"


class _DuplicateKey(yaml.YAMLError):
    """A mapping names the same key twice."""


class _Refused(yaml.YAMLError):
    """YAML the stack reader does not take: too many aliases or merge keys, or a tag."""


# Aliases and merge keys a stack file may use, and the size their expansion may reach (in nodes):
# a few KB of nested aliases can otherwise expand to gigabytes (an "alias bomb"), even under a
# key the program ignores. Stack files need neither in practice.
MAX_ALIASES = 16
MAX_EXPANDED_NODES = 100_000
# Tags a stack file may spell out: the plain ones a config value can hold. Anything else
# (`!!binary`, `!!set`, `!!timestamp`, `!!python/...`, local `!tags`) is refused.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")
) | {"!"}


class _Resolver(yaml.resolver.BaseResolver):
    """Plain scalars read as the Pulumi CLI reads them (YAML 1.2's core schema): booleans are
    only true/false, and an unquoted date, `yes`, `on` or `1:20` stay strings."""


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+|0o[0-7]+)$"), list("-+0123456789")
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Resolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


# No setting takes an integer of more digits (Pulumi reads config integers as int64): a longer
# one is refused while the file is read, before Python would refuse to convert it.
MAX_INT_DIGITS = 18


def _yaml_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    digits = len(text.lstrip("+-").removeprefix("0x").removeprefix("0o").lstrip("0"))
    if digits > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", node.start_mark
        )
    if text.startswith(("0x", "0o")):
        return int(text, 0)
    return int(text, 10)


class _StackLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.constructor.SafeConstructor,
    _Resolver,
):
    """The stack file reader: YAML 1.2 core scalars, a bound on aliases and their expansion, plain
    tags only, and a key given twice in one mapping refused (YAML keeps the last value silently; a
    second `llmd-fleet:model:` block would replace the first; the Pulumi CLI refuses such a file)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self.aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(
                    f"line {line}: more than {MAX_ALIASES} aliases (*name) and "
                    "merge keys (<<): write the values out"
                )
        # The parser has expanded `!!x` to `tag:yaml.org,2002:x`; `!` alone marks a quoted scalar.
        elif (
            isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent))
            and event.tag is not None
            and event.tag not in _PLAIN_TAGS
        ):
            raise _Refused(
                f"line {line}: tag {event.tag.replace('tag:yaml.org,2002:', '!!')} "
                "is not allowed: a stack file "
                "holds plain strings, numbers, booleans, lists and mappings"
            )
        return super().compose_node(parent, index)

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            _check_expansion(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _Refused(
                        f"line {key_node.start_mark.line + 1}: more than {MAX_ALIASES} aliases "
                        "(*name) and merge keys (<<): write the values out"
                    )
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                earlier = first_line.get(key)
            except TypeError:  # an unhashable key; the caller refuses non-string keys
                continue
            if earlier is not None:
                raise _DuplicateKey(
                    f"duplicate key {quote(key)} at lines {earlier} and {line} (YAML would keep only the "
                    "last; the Pulumi CLI refuses the file): keep one"
                )
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


_StackLoader.add_constructor("tag:yaml.org,2002:int", _yaml_int)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases would expand beyond MAX_EXPANDED_NODES nodes (counted
    over the shared node graph, so the count itself stays cheap)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            raise _Refused(f"line {node.start_mark.line + 1}: an alias refers to a node that holds it")
        if depth > 100:
            raise _Refused(f"line {node.start_mark.line + 1}: nested more than 100 levels deep")
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        if total > MAX_EXPANDED_NODES:
            raise _Refused(
                f"line {node.start_mark.line + 1}: its aliases expand to more than "
                f"{MAX_EXPANDED_NODES:,} values: write the values out"
            )
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root, 0)


def _one_line(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: what is wrong and where."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        text = f"{where}{exc.problem or exc.context or 'invalid'}"
    else:
        text = str(exc)
    return " ".join(text.split())


@dataclass(frozen=True)
class StackFile:
    """A stack's config as the Pulumi CLI would pass it to the program."""

    stack: str
    values: dict[str, str]
    secret_keys: frozenset[str]
    # The `secure:` values as written (ciphertext, or an example's placeholder), by full key:
    # what `check --for-deploy` inspects; never decrypted.
    ciphertexts: Mapping[str, str] = field(default_factory=dict)


def stack_file_path(stacks_dir: Path, stack: str) -> Path:
    return stacks_dir / f"Pulumi.{stack}.yaml"


def stack_names(stacks_dir: Path) -> list[str]:
    """The stacks with a `Pulumi.<stack>.yaml` in `stacks_dir`, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


# Pulumi's stack-name rule (pulumi/pulumi sdk/go/common/tokens/stack_name.go, ParseStackName):
# 1 to 100 characters, each alphanumeric, a hyphen, an underscore or a period.
MAX_STACK_NAME = 100
_STACK_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*")


class StackArgumentError(ValueError):
    """A command's STACK argument that is neither an existing .yaml file nor a stack name."""


def stack_name_problem(name: str) -> str | None:
    """Why `name` is not a Pulumi stack name (what is allowed included), or None when it is."""
    rule = (
        f"a stack name is 1-{MAX_STACK_NAME} characters, each alphanumeric, a hyphen, an underscore "
        "or a period (Pulumi's rule), or give the path of an existing .yaml stack file"
    )
    if not name:
        return f"is empty: {rule}"
    if len(name) > MAX_STACK_NAME:
        return f"has {len(name)} characters: {rule}"
    match = _STACK_NAME_CHARS.match(name)
    end = match.end() if match else 0
    if end != len(name):
        return f"has {quote(name[end])} at position {end}: {rule}"
    return None


def resolve_stack(argument: str, stacks_dir: Path) -> tuple[str, Path]:
    """The stack name and stack file an argument of plan/render/check/status/bench names: an
    argument that names an existing `.yaml` file is that file (its stack is `<stack>` of
    `Pulumi.<stack>.yaml`, else the file name without `.yaml`); anything else is a stack name,
    which must pass Pulumi's rule, in `stacks_dir`. Raises StackArgumentError (one line)."""
    given = Path(argument)
    if argument.endswith(".yaml") and given.is_file():
        base = given.name[: -len(".yaml")]
        stack = base[len("Pulumi.") :] if base.startswith("Pulumi.") and base != "Pulumi." else base
        if problem := stack_name_problem(stack):
            raise StackArgumentError(
                f"stack file {clip(argument, 200)}: its stack name {quote(stack)} {problem}"
            )
        return stack, given
    if problem := stack_name_problem(argument):
        raise StackArgumentError(f"stack {quote(argument)} {problem}")
    return argument, stack_file_path(stacks_dir, argument)


def _non_string_key(value: object, path: str) -> tuple[str, str] | None:
    """The first mapping key below `path` that is not a string (`true:`, `1:`, `null:`), as a
    problem: JSON, the form the Pulumi CLI hands a program, has only string keys, so `true` and
    `"true"` would collide and one would silently win."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    shown = json.dumps(k) if isinstance(k, (bool, int, float)) or k is None else quote(k)
                    return (
                        f"{where}.{shown}",
                        f'a key must be a string (got {_kind(k)}): quote it, "{shown}", as JSON has only '
                        "string keys",
                    )
                stack.append((v, f"{where}.{k}"))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return None


def _kind(value: object) -> str:
    """What a value is, without echoing it (it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    names = {bool: "a boolean", int: "an integer", float: "a number", dict: "a mapping", list: "a list"}
    return names.get(type(value), type(value).__name__)


def load_stack_document(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a stack file, read by the one stack reader (`_StackLoader`: YAML
    1.2 core scalars as the Pulumi CLI reads them, bounded aliases, plain tags, no duplicate keys).
    Every command and tool that reads a stack file reads it here (raises ConfigError)."""
    try:
        loader = _StackLoader(path.read_text(encoding="utf-8"))
        try:
            document = loader.get_single_data() or {}
        finally:
            loader.dispose()
    except (_DuplicateKey, _Refused) as exc:
        raise ConfigError([(str(path), str(exc))]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([(str(path), f"not valid YAML: {_one_line(exc)}")]) from None
    except RecursionError:
        raise ConfigError([(str(path), "not valid YAML: nested too deeply")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([(str(path), f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    except OSError as exc:
        raise ConfigError([(str(path), f"cannot be read: {exc.strerror}")]) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise ConfigError([(str(path), "must contain a `config:` mapping")])
    return config


def read_stack_file(stacks_dir: Path, stack: str, path: Path | None = None) -> StackFile:
    """Read stacks/Pulumi.<stack>.yaml (or `path`, the stack's file given as a path). Objects
    become JSON text and `secure:` values a placeholder, exactly the shapes the Pulumi CLI hands a
    Python program."""
    path = path or stack_file_path(stacks_dir, stack)
    if not path.is_file():
        known = stack_names(stacks_dir)
        hint = f"; no file {stack} either" if stack.endswith(".yaml") else ""
        raise ConfigError([("stack", f"no stack file {path} (stacks: {', '.join(known) or 'none'}){hint}")])
    config = load_stack_document(path)
    values: dict[str, str] = {}
    given_as: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError([(str(path), f"config keys must be strings (got {quote(key)})")])
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if full_key in given_as:
            raise ConfigError(
                [
                    (
                        full_key,
                        f"given twice, as {quote(given_as[full_key])} and {quote(key)} (one key): keep one",
                    )
                ]
            )
        given_as[full_key] = key
        if isinstance(value, dict) and set(value) == {"secure"}:
            # The Pulumi CLI refuses a secure value that is not its ciphertext (a string).
            if not isinstance(value["secure"], str) or not value["secure"].strip():
                raise ConfigError(
                    [
                        (
                            full_key,
                            "`secure:` must be the ciphertext `pulumi config set --secret` writes, a "
                            f"non-empty string (got {_kind(value['secure'])}; not echoed): "
                            f"pulumi config set --secret {key.removeprefix(PROJECT + ':')} <value>",
                        )
                    ]
                )
            values[full_key] = SECRET_PLACEHOLDER
            secrets[full_key] = str(value["secure"])
        elif isinstance(value, (dict, list)):
            if (where := _non_string_key(value, full_key)) is not None:
                raise ConfigError([where])
            values[full_key] = json.dumps(value)
        elif isinstance(value, bool):
            values[full_key] = "true" if value else "false"
        else:
            values[full_key] = str(value)
    return StackFile(stack=stack, values=values, secret_keys=frozenset(secrets), ciphertexts=secrets)


def stack_config(stack_file: StackFile) -> StackConfig:
    """The validated config of a stack file, read exactly as the program reads it from Pulumi
    (raises ConfigError)."""
    raw, secrets = read_pulumi_config(
        stack_file.values.__getitem__, list(stack_file.values), stack_file.secret_keys.__contains__
    )
    return check_stack_secrets(parse_config(raw, secrets))
