"""Config problems and the key paths they name.

A problem names the key a person edits: `llmd-fleet:serving.roles.decode.maxModelLen`. That path is
built from the models' field aliases (the names a stack file uses), never written by hand, so a
renamed field cannot leave an error pointing at a key that no longer exists: `Key.at` refuses a
name the model does not have.

Pure: pydantic only.
"""

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Union

from pydantic import BaseModel

PROJECT = "llmd-fleet"


def printable(text: str) -> str:
    """Text safe to print on one line: every character Python does not call printable (control
    characters, line and paragraph separators, invisible format characters such as bidi
    overrides, spaces other than ' ') is written as its escape (`\\n`, `\\x1b`, `\\u202e`), so
    a key or value from a stack file cannot forge or reorder output lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


QUOTE_LIMIT = 80
NAMES_LIMIT = 20
MAX_KEY = 200
MAX_MESSAGE = 2000


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A value as an error line quotes it: its repr, escaped by `printable`, at most `limit`
    characters of it followed by its length when longer (`'aaa...' (5000000 characters)`), so a
    5 MB value or a 5,000-digit integer makes a short line and never a traceback. Every error
    path that echoes a value goes through here (docs/bad-input.md)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        try:
            digits = str(value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
        return digits if len(digits) <= limit else f"{digits[:limit]}... ({len(digits.lstrip('-'))} digits)"
    if isinstance(value, str):
        if len(value) <= limit:
            return printable(repr(value))
        return f"{printable(repr(value[:limit]))}... ({len(value)} characters)"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"a {type(value).__name__} too large to show"
    if len(text) <= limit:
        return printable(text)
    return f"{printable(text[:limit])}... ({len(text)} characters of {type(value).__name__})"


def clip(text: str, limit: int = 200) -> str:
    """A message on one line (a multi-line one, a parser's or the system's, joined), escaped, at
    most `limit` characters, then its length when longer."""
    if not text.isprintable():
        text = " ".join(text.split())
    return printable(text) if len(text) <= limit else f"{printable(text[:limit])}... ({len(text)} characters)"


def names(items: Sequence[object], limit: int = NAMES_LIMIT) -> str:
    """At most `limit` names of a list, comma-separated, each escaped and at most 80 characters,
    then how many more there are (`a, b, c, and 480 more`)."""
    shown = [
        printable(i) if isinstance(i, str) and len(i) <= QUOTE_LIMIT else quote(i) for i in items[:limit]
    ]
    more = len(items) - limit
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")


class Problem(NamedTuple):
    """One thing wrong with the stack configuration: the key path and what is allowed there."""

    key: str
    message: str


class ConfigError(Exception):
    """Invalid stack configuration: one message, one line per problem, each naming its key path."""

    def __init__(self, problems: Sequence[tuple[str, str]]):
        # A key path or a message may quote what a stack file holds: printed with escapes, one line.
        self.problems = [Problem(printable(key), printable(message)) for key, message in problems]
        # At most NAMES_LIMIT problems are printed, each line bounded: a file of 5,000 unknown
        # keys or a 5 MB key makes a short message (the first problems are the ones to fix first).
        lines = [f"{clip(key, MAX_KEY)}: {clip(message, MAX_MESSAGE)}" for key, message in self.problems]
        more = len(lines) - NAMES_LIMIT
        if more > 0:
            lines = [*lines[:NAMES_LIMIT], f"... and {more} more problems"]
        super().__init__("invalid stack configuration:\n  " + "\n  ".join(lines))


def _unwrap(annotation: Any) -> Any:
    """The type under `Annotated[...]` and `X | None`; a union of several types stays as it is."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


class Key(str):
    """A key path of the stack configuration (a `str`: it is the path an error prints), carrying
    the value found there (a model, a mapping, a list; None when unset) and its declared type."""

    value: Any
    declared: Any

    def __new__(cls, path: str, value: Any = None, declared: Any = None) -> "Key":
        key = super().__new__(cls, path)
        key.value = value
        key.declared = declared if declared is not None or value is None else type(value)
        return key

    def at(self, *names: str | int) -> "Key":
        """The key below this one: Python field names (rendered as their aliases), mapping keys
        (rendered as they are) and list indices (`[i]`)."""
        key = self
        for name in names:
            key = key._child(name)
        return key

    def _child(self, name: str | int) -> "Key":
        declared = _unwrap(self.declared)
        if isinstance(name, int):
            value = self.value[name] if isinstance(self.value, Sequence) and name < len(self.value) else None
            args = typing.get_args(declared)
            return Key(f"{self}[{name}]", value, args[0] if args else None)
        if isinstance(declared, type) and issubclass(declared, BaseModel):
            field = declared.model_fields.get(name)
            if field is None:
                raise KeyError(f"{declared.__name__} has no field {name!r} (below {self})")
            value = getattr(self.value, name, None) if isinstance(self.value, BaseModel) else None
            annotation = type(value) if isinstance(value, BaseModel) else field.annotation
            return Key(f"{self}.{field.alias or name}", value, annotation)
        if typing.get_origin(declared) in (dict, Mapping) or isinstance(self.value, Mapping):
            value = self.value.get(name) if isinstance(self.value, Mapping) else None
            args = typing.get_args(declared)
            item = type(value) if isinstance(value, BaseModel) else (args[1] if len(args) == 2 else None)
            return Key(f"{self}.{name}", value, item)
        raise KeyError(f"{self} is a value, not a section: no key {name!r} below it")


def key(config: BaseModel, section: str, *names: str | int) -> Key:
    """The key path of `config.<section>.<names...>` (`llmd-fleet:<alias>.<alias>...`), read from
    the models' aliases: a name the model does not have raises KeyError."""
    field = type(config).model_fields.get(section)
    if field is None:
        raise KeyError(f"{type(config).__name__} has no section {section!r}")
    value = getattr(config, section)
    declared = type(value) if isinstance(value, BaseModel) else field.annotation
    return Key(f"{PROJECT}:{field.alias or section}", value, declared).at(*names)
