"""The clouds' own API models, read from the cached environment's packages, and one value checked
against the field it becomes.

A field is named `<model>:<Shape>.<member>.<member>...`:

    ec2:CreateVpcRequest.CidrBlock          botocore's ec2 service model, shape CreateVpcRequest
    eks:CreateClusterRequest.tags{key}      a map shape's key ({value}: its value)
    container.v1:NodeConfig.machineType     a Google discovery document (container v1), schema NodeConfig
    compute.v1:compute.subnetworks.insert(region)   a method's parameter

Lists are stepped through where the path meets one (a list of structures, or the member shape of a
list of scalars). Constraints, as each model states them:

- botocore (Smithy semantics): `type` (string, integer, long, boolean, ...), `enum`, `pattern`
  (not implicitly anchored: a search), `min`/`max` (a string's length, a number's value).
- discovery documents: `type` and `format` (int32, uint32; int64 and uint64 travel as strings),
  `enum`, `pattern` (the whole value: a resource name matches the documented expression entirely),
  `minimum`/`maximum`.

Booleans: the AWS provider passes some booleans as the strings "true"/"false" (launch template
block devices and network interfaces); those two strings are accepted for a boolean field.
"""

import gzip
import json
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

INT32 = (-(2**31), 2**31 - 1)
UINT32 = (0, 2**32 - 1)
_SEGMENT = re.compile(r"([A-Za-z0-9_]+)(\{key\}|\{value\})?$")


class ModelError(Exception):
    """A table names a field the model does not have."""


_PROPERTY = re.compile(r"\\p\{([A-Za-z]{1,2})\}")


@cache
def _category_ranges(category: str) -> str:
    """The code points of a Unicode general category (`L`, `Nd`, ...) as character-class ranges."""
    ranges: list[str] = []
    start = previous = -2
    for point in range(sys.maxunicode + 1):
        if unicodedata.category(chr(point)).startswith(category):
            if point != previous + 1:
                if start >= 0:
                    ranges.append(_span(start, previous))
                start = point
            previous = point
    if start >= 0:
        ranges.append(_span(start, previous))
    return "".join(ranges)


def _span(first: int, last: int) -> str:
    return f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}"


@cache
def python_pattern(pattern: str) -> re.Pattern[str]:
    """A model's pattern for Python's `re`: Unicode property classes (`\\p{L}`, which Smithy's
    ECMA 262 patterns use and `re` lacks) become the category's code point ranges."""
    out, in_class, index = [], False, 0
    while index < len(pattern):
        match = _PROPERTY.match(pattern, index)
        if match:
            ranges = _category_ranges(match.group(1))
            out.append(ranges if in_class else f"[{ranges}]")
            index = match.end()
            continue
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        index += 1
    try:
        return re.compile("".join(out))
    except re.error as exc:
        raise ModelError(f"pattern {pattern!r}: {exc}") from None


@dataclass(frozen=True)
class Leaf:
    """The shape (AWS) or schema (Google) a field ends in, and the structures the path went through:
    (structure name, member) pairs, for the required-member check."""

    constraints: dict[str, Any]
    through: tuple[tuple[str, str], ...] = field(default=())


def _aws_path(path: str) -> list[tuple[str, str]]:
    out = []
    for part in path.split("."):
        match = _SEGMENT.match(part)
        if not match:
            raise ModelError(f"bad field segment {part!r}")
        out.append((match.group(1), match.group(2) or ""))
    return out


@dataclass(frozen=True)
class AwsModel:
    """One botocore service model (the newest API version the package ships)."""

    name: str
    shapes: dict[str, Any]

    def resolve(self, shape: str, path: str) -> Leaf:
        through: list[tuple[str, str]] = []
        current = self._shape(shape)
        name = shape
        for member, part in _aws_path(path):
            while current.get("type") == "list":
                name = current["member"]["shape"]
                current = self._shape(name)
            if current.get("type") != "structure" or member not in current.get("members", {}):
                raise ModelError(f"{self.name}: shape {name} has no member {member}")
            through.append((name, member))
            name = current["members"][member]["shape"]
            current = self._shape(name)
            if part:
                if current.get("type") != "map":
                    raise ModelError(f"{self.name}: {name} is not a map")
                name = current["key" if part == "{key}" else "value"]["shape"]
                current = self._shape(name)
        while current.get("type") == "list":
            name = current["member"]["shape"]
            current = self._shape(name)
        return Leaf(current, tuple(through))

    def required(self, shape: str) -> list[str]:
        return list(self._shape(shape).get("required", []))

    def _shape(self, name: str) -> dict[str, Any]:
        try:
            shape: dict[str, Any] = self.shapes[name]
        except KeyError:
            raise ModelError(f"{self.name}: no shape {name}") from None
        return shape

    def problems(self, leaf: Leaf, value: Any) -> list[str]:
        c = leaf.constraints
        kind = c.get("type")
        if kind == "boolean":
            if isinstance(value, bool) or value in ("true", "false"):
                return []
            return [f"{value!r} is not a boolean"]
        if kind in ("integer", "long"):
            if not isinstance(value, int) or isinstance(value, bool):
                return [f"{value!r} is not an integer"]
            out = []
            if "min" in c and value < c["min"]:
                out.append(f"{value} is below the minimum {c['min']}")
            if "max" in c and value > c["max"]:
                out.append(f"{value} is above the maximum {c['max']}")
            return out
        if kind in ("string", "blob"):
            if not isinstance(value, str):
                return [f"{value!r} is not a string"]
            out = []
            if "enum" in c and value not in c["enum"]:
                out.append(f"{value!r}: refused: {' | '.join(c['enum'])}")
            if "pattern" in c and not python_pattern(c["pattern"]).search(value):
                out.append(f"{value!r} does not match the pattern {c['pattern']}")
            if "min" in c and len(value) < c["min"]:
                out.append(f"{value!r} is shorter than {c['min']} characters")
            if "max" in c and len(value) > c["max"]:
                out.append(f"{value!r} is longer than {c['max']} characters")
            return out
        return [f"{value!r}: the field's shape is a {kind}, not a value"]


@dataclass(frozen=True)
class GoogleModel:
    """One Google discovery document."""

    name: str
    document: dict[str, Any]

    def resolve(self, schema: str, path: str) -> Leaf:
        if path.endswith(")") and "(" in path:
            return Leaf(self._parameter(schema + "." + path))
        through: list[tuple[str, str]] = []
        current = self._schema(schema)
        name = schema
        for member, part in _aws_path(path):
            current, name = self._deref(current, name)
            properties = current.get("properties", {})
            if member not in properties:
                raise ModelError(f"{self.name}: schema {name} has no property {member}")
            through.append((name, member))
            current = properties[member]
            current, name = self._deref(current, name)
            if part:
                if "additionalProperties" not in current:
                    raise ModelError(f"{self.name}: {name}.{member} is not a map")
                current = {"type": "string"} if part == "{key}" else current["additionalProperties"]
                current, name = self._deref(current, name)
        return Leaf(current, tuple(through))

    def required(self, schema: str) -> list[str]:
        """Properties the document marks required (compute's annotations.required)."""
        properties = self._schema(schema).get("properties", {})
        return sorted(n for n, p in properties.items() if p.get("annotations", {}).get("required"))

    def _deref(self, node: dict[str, Any], name: str) -> tuple[dict[str, Any], str]:
        while True:
            if "$ref" in node:
                name = node["$ref"]
                node = self._schema(name)
            elif node.get("type") == "array":
                node = node["items"]
            else:
                return node, name

    def _schema(self, name: str) -> dict[str, Any]:
        try:
            schema: dict[str, Any] = self.document["schemas"][name]
        except KeyError:
            raise ModelError(f"{self.name}: no schema {name}") from None
        return schema

    def _parameter(self, spec: str) -> dict[str, Any]:
        method_id, _, parameter = spec[:-1].partition("(")
        parts = method_id.split(".")[1:]
        node: dict[str, Any] = self.document
        for resource in parts[:-1]:
            node = node.get("resources", {}).get(resource, {})
        method = node.get("methods", {}).get(parts[-1])
        if method is None or parameter not in method.get("parameters", {}):
            raise ModelError(f"{self.name}: method {method_id} has no parameter {parameter}")
        found: dict[str, Any] = method["parameters"][parameter]
        return found

    def problems(self, leaf: Leaf, value: Any) -> list[str]:
        c = leaf.constraints
        kind, fmt = c.get("type"), c.get("format")
        if kind == "boolean":
            return [] if isinstance(value, bool) else [f"{value!r} is not a boolean"]
        if kind == "integer" or (kind == "string" and fmt in ("int64", "uint64")):
            if not isinstance(value, int) or isinstance(value, bool):
                return [f"{value!r} is not an integer"]
            low, high = {"int32": INT32, "uint32": UINT32}.get(fmt or "", (None, None))
            if "minimum" in c:
                low = int(c["minimum"])
            if "maximum" in c:
                high = int(c["maximum"])
            if fmt == "uint64" and low is None:
                low = 0
            out = []
            if low is not None and value < low:
                out.append(f"{value} is below the minimum {low}")
            if high is not None and value > high:
                out.append(f"{value} is above the maximum {high}")
            return out
        if kind == "string":
            if not isinstance(value, str):
                return [f"{value!r} is not a string"]
            out = []
            if "enum" in c and value not in c["enum"]:
                out.append(f"{value!r}: refused: {' | '.join(c['enum'])}")
            if "pattern" in c and not python_pattern(c["pattern"]).fullmatch(value):
                out.append(f"{value!r} does not match the pattern {c['pattern']}")
            return out
        return [f"{value!r}: the field is a {kind}, not a value"]


Model = AwsModel | GoogleModel


@dataclass(frozen=True)
class Models:
    """Every model of the pinned packages, loaded on first use."""

    site_packages: Path

    @cache  # noqa: B019 (one Models per run)
    def get(self, name: str) -> Model:
        if "." in name:
            path = self.site_packages / "googleapiclient" / "discovery_cache" / "documents" / f"{name}.json"
            if not path.is_file():
                raise ModelError(f"no discovery document {path.name} in google-api-python-client")
            return GoogleModel(name, json.loads(path.read_text(encoding="utf-8")))
        service = self.site_packages / "botocore" / "data" / name
        versions = sorted(p for p in service.glob("*") if p.is_dir()) if service.is_dir() else []
        if not versions:
            raise ModelError(f"no service model {name} in botocore")
        newest = versions[-1]
        gz, plain = newest / "service-2.json.gz", newest / "service-2.json"
        text = gzip.decompress(gz.read_bytes()).decode() if gz.is_file() else plain.read_text()
        return AwsModel(name, json.loads(text)["shapes"])

    def resolve(self, spec: str) -> tuple[Model, Leaf]:
        model_name, _, rest = spec.partition(":")
        root, _, path = rest.partition(".")
        model = self.get(model_name)
        if isinstance(model, GoogleModel) and "(" in rest:
            return model, model.resolve(rest.rsplit(".", 1)[0], rest.rsplit(".", 1)[1])
        return model, model.resolve(root, path)
