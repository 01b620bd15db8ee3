"""The input types of the `llmd-fleet:index:Fleet` component, generated from the config models.

Pulumi's schema analyzer (`pulumi.provider.experimental.analyzer`) infers a component's schema from
TypedDicts and refuses pydantic models (`issubclass() arg 1 must be a class`), so the facade's
inputs are TypedDicts made here, at import time, from the stack config's JSON schema
(`StackConfig.model_json_schema(by_alias=True)`): one input per stack key (`KNOWN_KEYS`: the
object sections and the secrets), one TypedDict per config model, named after it. A key added to
the config models reaches the schema, and with it the YAML and TypeScript SDKs, without an edit
here; the golden schema (tests/golden/components/schema.json) shows the change.

What the translation keeps and drops, and why:

- Field names are the aliases a stack file uses (`hostMemoryGiB`, not the analyzer's own
  camel-casing of `host_memory_gib`), so what a program passes is what a stack file says.
- Every property is optional in the schema: the component validates its inputs through
  `parse_config`, as a stack's config is validated, so a missing key gets the stack file's error
  (`llmd-fleet:serving: required`) rather than the provider host's. The descriptions say which
  keys the config requires and the allowed values of each enumerated key.
- `Literal` choices become their base type (the analyzer's enums would have to be Python `Enum`
  classes); a union of models becomes one type with every variant's fields (the target kinds:
  `kind` chooses); a union of a model with a constant (`responses.database.backup`) is `Any`.
- Only the target kinds that reach an existing cluster through a kubeconfig (`KUBECONFIG_KINDS`:
  onprem and local) are offered: the cloud kinds create their cluster with the cloud's providers,
  which stay in Python programs (docs/components.md).

The analyzer reads field descriptions from the class's source (`inspect.getsource`), so the
module is compiled from generated source registered with `linecache` under a pseudo file name.
"""

import json
import keyword
import linecache
import sys
import types
from collections.abc import Mapping
from typing import Any

from llmd_fleet.core.problems import PROJECT
from llmd_fleet.stack.model import SECRET_KEYS, StackConfig
from llmd_fleet.stack.parse import KUBECONFIG_KINDS
from llmd_fleet.stack.registry import KNOWN_KEYS, OBJECT_KEYS

MODULE = "llmd_fleet.facade.generated_inputs"
SOURCE_NAME = "<llmd-fleet facade inputs>"
ARGS_TYPE = "FleetArgs"
TARGET_TYPE = "TargetConfig"
# The config model's own fields that are not stack keys (whether a secret is set).
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
SECRET_DESCRIPTIONS = {
    "hfToken": "Hugging Face token (a secret): the token Secret the engines and the router's tokenizer read.",
    "kubeconfig": "kubeconfig of the existing cluster (a secret); the ambient kubeconfig when unset. "
    "The Kubernetes provider of the fleet is made from it.",
    "registryPassword": "password of the image registry (a secret).",
    "responsesDbPassword": "the response store owner's password (a secret), with `responses`.",
}


class _Generator:
    """JSON schema of the config -> Python source of TypedDicts."""

    def __init__(self, schema: Mapping[str, Any]):
        self.defs: Mapping[str, Any] = schema.get("$defs", {})
        self.classes: dict[str, str] = {}
        self.order: list[str] = []

    def ref_name(self, ref: str) -> str:
        return ref.rsplit("/", 1)[-1]

    def type_of(self, node: Mapping[str, Any], hint: str) -> str:
        """The annotation (as source) of a JSON schema node; `hint` names a merged union type."""
        if "$ref" in node:
            name = self.ref_name(node["$ref"])
            if "properties" not in self.defs[name]:  # an enumeration (`Accelerator`), not a model
                return self.type_of(self.defs[name], hint)
            return self.model(name)
        if "oneOf" in node:
            refs = [self.ref_name(v["$ref"]) for v in node["oneOf"] if "$ref" in v]
            if len(refs) == len(node["oneOf"]):
                return self.merged(hint, refs)
            return "Any"
        if "anyOf" in node:
            options = [v for v in node["anyOf"] if v.get("type") != "null"]
            if len(options) == 1:
                return self.type_of(options[0], hint)
            return "Any"
        kind = node.get("type")
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            return f"list[{self.type_of(node.get('items', {}), hint)}]"
        if kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
            return f"dict[str, {self.type_of(node['additionalProperties'], hint)}]"
        if kind == "object":
            return "dict[str, Any]"
        if "enum" in node or "const" in node:
            values = node.get("enum", [node.get("const")])
            kinds = {type(v) for v in values}
            return (
                {str: "str", int: "int", float: "float", bool: "bool"}.get(kinds.pop(), "Any")
                if len(kinds) == 1
                else "Any"
            )
        return "Any"

    def model(self, name: str, only: frozenset[str] | None = None) -> str:
        """The TypedDict of `$defs[name]` (generated once)."""
        if name not in self.classes:
            self.classes[name] = ""  # cycles resolve to the name being made
            definition = self.defs[name]
            self.classes[name] = self.class_source(
                name, definition.get("description", ""), [(definition, set(definition.get("required", [])))]
            )
            self.order.append(name)
        return name

    def merged(self, hint: str, refs: list[str]) -> str:
        """One TypedDict with the fields of every variant of a union (the first variant's
        description and type win; a field of differing types is `Any`)."""
        name = TARGET_TYPE if hint == "target" else f"{hint[:1].upper()}{hint[1:]}Config"
        if name not in self.classes:
            self.classes[name] = ""
            variants = [(self.defs[r], set(self.defs[r].get("required", []))) for r in refs]
            self.classes[name] = self.class_source(name, "", variants)
            self.order.append(name)
        return name

    def class_source(self, name: str, doc: str, variants: list[tuple[Mapping[str, Any], set[str]]]) -> str:
        fields: dict[str, tuple[str, str]] = {}
        constants: dict[str, list[Any]] = {}
        for definition, required in variants:
            for key, node in definition.get("properties", {}).items():
                annotation = self.type_of(node, key)
                if "$ref" in node and "properties" not in self.defs[self.ref_name(node["$ref"])]:
                    node = {**self.defs[self.ref_name(node["$ref"])], **node}
                if "const" in node:  # a union's discriminator (`kind`): each variant's value
                    constants.setdefault(key, []).append(node["const"])
                    node = {**node, "enum": constants[key]}
                    fields.pop(key, None)
                text = describe(node, key in required)
                if key in fields and fields[key][0] != annotation:
                    fields[key] = ("Any", fields[key][1])
                fields.setdefault(key, (annotation, text))
        return render_class(name, doc, fields)


def describe(node: Mapping[str, Any], required: bool) -> str:
    """A field's description, with what the schema says of its values."""
    parts = [str(node.get("description", "")).strip()]
    values = (
        node.get("enum")
        or node.get("allOf", [{}])[0].get("enum")
        or next(
            (
                v.get("enum") or ([v["const"]] if "const" in v else None)
                for v in node.get("anyOf", [])
                if "enum" in v or "const" in v
            ),
            None,
        )
    )
    if values:
        parts.append("Allowed: " + ", ".join(json.dumps(v) for v in values) + ".")
    if required:
        parts.append("Required.")
    elif "default" in node and node["default"] is not None:
        parts.append(f"Default: {json.dumps(node['default'])}.")
    return " ".join(p for p in parts if p)


def render_class(name: str, doc: str, fields: Mapping[str, tuple[str, str]]) -> str:
    """`class <name>(TypedDict, total=False):` with a docstring under each field."""
    lines = [f"class {name}(TypedDict, total=False):", f"    {json.dumps(' '.join(doc.split()) or name)}"]
    for key, (annotation, text) in fields.items():
        if not key.isidentifier() or keyword.iskeyword(key):
            raise ValueError(f"config field {key!r} is not usable as a TypedDict key")
        lines.append(f"    {key}: {annotation}")
        if text:
            lines.append(f"    {json.dumps(' '.join(text.split()))}")
    return "\n".join(lines)


def config_schema() -> dict[str, Any]:
    """The stack config's JSON schema (aliases), its target restricted to the kubeconfig kinds."""
    schema = StackConfig.model_json_schema(by_alias=True)
    target = schema["properties"]["target"]
    mapping = target["discriminator"]["mapping"]
    target["oneOf"] = [{"$ref": mapping[kind]} for kind in KUBECONFIG_KINDS]
    return schema


def generate_source(schema: Mapping[str, Any] | None = None) -> str:
    """The generated module's source: one TypedDict per config model, then `FleetArgs`."""
    schema = config_schema() if schema is None else schema
    generator = _Generator(schema)
    fields: dict[str, tuple[str, str]] = {}
    for key, node in schema["properties"].items():
        if key not in KNOWN_KEYS:
            continue
        # The models say "`llmd-fleet:<key>` (optional): ..."; the input says which stack key it is.
        text = describe(node, key in OBJECT_KEYS).removeprefix(f"`{PROJECT}:{key}`").lstrip(" .:")
        fields[key] = (generator.type_of(node, key), f"`{PROJECT}:{key}` of a stack file. {text}".strip())
    for key in SECRET_KEYS:
        fields[key] = ("pulumi.Input[str]", SECRET_DESCRIPTIONS.get(key, "a secret."))
    args = render_class(
        ARGS_TYPE,
        "The fleet's settings: one input per stack config key, validated as a stack file is.",
        fields,
    )
    header = [
        f"# Generated by {__name__} from the config models; not a file on disk.",
        "from typing import Any, TypedDict",
        "import pulumi",
    ]
    return "\n\n\n".join(["\n".join(header), *(generator.classes[n] for n in generator.order), args]) + "\n"


def load(source: str | None = None) -> types.ModuleType:
    """Compile the generated source into the module `MODULE` (registered in sys.modules and with
    linecache, so the analyzer reads its field docstrings)."""
    if source is None and MODULE in sys.modules:
        return sys.modules[MODULE]
    text = generate_source() if source is None else source
    module = types.ModuleType(MODULE)
    module.__file__ = SOURCE_NAME
    linecache.cache[SOURCE_NAME] = (len(text), None, text.splitlines(keepends=True), SOURCE_NAME)
    exec(compile(text, SOURCE_NAME, "exec"), module.__dict__)
    sys.modules[MODULE] = module
    return module
