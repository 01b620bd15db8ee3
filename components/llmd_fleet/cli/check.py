"""Validate rendered manifests: built-in kinds against the Kubernetes OpenAPI schemas of the
stack's version (kubernetes-validate, strict: unknown fields are errors), custom resources
against the openAPIV3Schema of their CRD (unknown fields rejected as the API server prunes them).

CRDs come from the directories given (`--crd-dir`) and, always, from the project's own
`schemas/crds/` (upstream CRDs vendored byte-identical, listed in its SOURCES.md).
"""

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import yaml
from kubernetes_validate import utils as kv_utils

from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.core.problems import clip, printable
from llmd_fleet.core.yaml_documents import yaml_documents

# API groups the kube-apiserver serves itself ("" is the core group).
BUILTIN_GROUPS = frozenset(
    {
        "", "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
        "apps", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch",
        "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io",
        "flowcontrol.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "policy",
        "rbac.authorization.k8s.io", "resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io",
    }
)  # fmt: skip


_PACKAGED_CRD_DIR = Path(__file__).resolve().parent / "schemas" / "crds"
_CHECKOUT_CRD_DIR = CHECKOUT / "schemas" / "crds"


def project_crd_dir() -> Path:
    """The project's vendored CRDs: the packaged copy if installed as a wheel, else the checkout."""
    return _PACKAGED_CRD_DIR if _PACKAGED_CRD_DIR.is_dir() else _CHECKOUT_CRD_DIR


def crd_directories(given: list[Path]) -> list[Path]:
    """The directories given, then the project's own, each once."""
    unique: dict[Path, Path] = {}
    for directory in [*given, project_crd_dir()]:
        unique.setdefault(directory.resolve(), directory)
    return list(unique.values())


@dataclass(frozen=True)
class Finding:
    file: str
    object: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.object}: {self.message}"


def schema_version(kubernetes_version: str) -> str:
    """Newest schema set kubernetes-validate ships that is not newer than the cluster's minor."""
    wanted = tuple(int(p) for p in kubernetes_version.split(".")[:2])
    available: list[str] = sorted(
        {v for v in kv_utils.all_versions()}, key=lambda v: tuple(int(p) for p in v.split("."))
    )
    usable = [v for v in available if tuple(int(p) for p in v.split(".")[:2]) <= wanted]
    if not usable or tuple(int(p) for p in available[-1].split(".")[:2]) < wanted:
        raise ValueError(
            f"kubernetes-validate has schemas for {available[0]}..{available[-1]}, "
            f"not Kubernetes {kubernetes_version}"
        )
    return usable[-1]


def _strict_int(_checker: Any, value: Any) -> bool:
    # A float such as 2.0 is not an integer to the API server.
    return isinstance(value, int) and not isinstance(value, bool)


_Validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_int),
)


def structural_to_json_schema(node: Any, in_junction: bool = False) -> Any:
    """A CRD structural schema (OpenAPI v3.0 dialect) as JSON Schema 2020-12, with the API
    server's pruning made explicit: objects reject undeclared fields."""
    if not isinstance(node, dict):
        return node
    out = dict(node)
    if "properties" in out:
        out["properties"] = {
            k: structural_to_json_schema(v, in_junction) for k, v in out["properties"].items()
        }
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = structural_to_json_schema(out[key], in_junction or key == "not")
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [structural_to_json_schema(x, True) for x in out[key]]
    if out.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        out.pop("anyOf", None)
    if out.pop("nullable", False) and "type" in out:
        types = [out["type"]] if isinstance(out["type"], str) else list(out["type"])
        out["type"] = [*types, "null"]
    if out.get("x-kubernetes-embedded-resource"):
        out.setdefault("properties", {})
        for key in ("apiVersion", "kind", "metadata"):
            out["properties"].setdefault(key, {})
    pruned = not in_junction and not out.get("x-kubernetes-preserve-unknown-fields")
    if pruned and "additionalProperties" not in out and ("properties" in out or out.get("type") == "object"):
        out["additionalProperties"] = False
    return out


class CrdDirError(ValueError):
    """A `--crd-dir` that cannot be read as CRDs (bad input: refused before anything is written)."""


# {version: (served, openAPIV3Schema as JSON Schema)} of one CRD.
CrdVersions = dict[str, tuple[bool, dict[str, Any]]]


def _crd_versions(doc: dict[str, Any]) -> tuple[tuple[str, str], CrdVersions]:
    """(group, kind) and {version: (served, openAPIV3Schema)} of one CRD document; KeyError,
    TypeError or ValueError when it is not shaped like a CRD."""
    spec = doc["spec"]
    group, kind = spec["group"], spec["names"]["kind"]
    if not isinstance(group, str) or not isinstance(kind, str):
        raise ValueError("spec.group and spec.names.kind must be strings")
    versions: CrdVersions = {}
    for version in spec.get("versions") or []:
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
        if not isinstance(version["name"], str) or not isinstance(schema, dict):
            raise ValueError("each version needs a name and an openAPIV3Schema object")
        # Converted once here, so a schema the checker cannot use is refused while reading.
        structural_to_json_schema(schema)
        versions[version["name"]] = (bool(version.get("served")), schema)
    return (group, kind), versions


@functools.lru_cache(maxsize=512)
def _crds_in_file(path: Path, mtime_ns: int, size: int) -> tuple[tuple[tuple[str, str], CrdVersions], ...]:
    """The CRDs of one file, parsed and converted once per process while the file is unchanged
    (keyed by its modification time and size): the vendored CRDs are 3.5 MB of YAML, and a program
    that checks several stacks reads them for each. Errors are raised, never cached. Callers share
    the result and must not change it."""
    return tuple(
        _crd_versions(doc)
        for doc in yaml_documents(path.read_bytes())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    )


class CrdSchemas:
    """CRD schemas found under some directories, by (group, kind, version).

    Every file is read, parsed and converted here, before `check` writes anything: a directory
    or file that cannot be read, YAML that does not parse, a CRD without its fields, nesting too
    deep, or the same CRD defined twice differently raise CrdDirError naming the directory and
    the file (docs/bad-input.md)."""

    def __init__(self, directories: list[Path]):
        self._schemas: dict[tuple[str, str], CrdVersions] = {}
        self._validators: dict[tuple[str, str, str], Any] = {}
        sources: dict[tuple[str, str], Path] = {}
        for directory in directories:
            where = f"--crd-dir {printable(str(directory))}"
            if not directory.is_dir():
                raise CrdDirError(f"{where}: not a directory")
            try:
                paths = sorted(directory.rglob("*.y*ml"))
            except OSError as exc:
                raise CrdDirError(f"{where}: cannot be read: {exc.strerror}") from None
            for path in paths:
                try:
                    stat = path.stat()
                    crds = _crds_in_file(path.resolve(), stat.st_mtime_ns, stat.st_size)
                except OSError as exc:
                    raise CrdDirError(f"{where}: {printable(str(path))}: {exc.strerror}") from None
                except yaml.YAMLError as exc:
                    mark = getattr(exc, "problem_mark", None)
                    at = f" at line {mark.line + 1}" if mark is not None else ""
                    reason = clip(str(getattr(exc, "problem", None) or exc))
                    raise CrdDirError(
                        f"{where}: {printable(str(path))}: not valid YAML{at}: {reason}"
                    ) from None
                except RecursionError:
                    raise CrdDirError(f"{where}: {printable(str(path))}: nested too deeply") from None
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise CrdDirError(
                        f"{where}: {printable(str(path))}: not a CustomResourceDefinition with "
                        f"spec.group, spec.names.kind and spec.versions ({type(exc).__name__}: "
                        f"{clip(str(exc))})"
                    ) from None
                for key, versions in crds:
                    # The same CRD in two directories must not make the result depend on their order.
                    if key in self._schemas and self._schemas[key] != versions:
                        raise CrdDirError(
                            f"CRD {printable(key[1])}.{printable(key[0])} differs between "
                            f"{printable(str(sources[key]))} and {printable(str(path))}"
                        )
                    self._schemas[key] = versions
                    sources.setdefault(key, path)

    def validator(self, group: str, version: str, kind: str) -> Any:
        key = (group, version, kind)
        if key not in self._validators:
            self._validators[key] = self._build_validator(group, version, kind)
        return self._validators[key]

    def _build_validator(self, group: str, version: str, kind: str) -> Any:
        versions = self._schemas.get((group, kind))
        if versions is None:
            raise LookupError(f"no CRD for {group}/{version} {kind} (pass its directory with --crd-dir)")
        served, schema = versions.get(version, (False, {}))
        if not served:
            ok = ", ".join(sorted(v for v, (s, _) in versions.items() if s))
            raise LookupError(f"{kind} version {version} is not served by its CRD (served: {ok})")
        root = structural_to_json_schema(schema)
        root.setdefault("properties", {})
        root["properties"].update(
            {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}
        )
        return _Validator(root)


_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_API_VERSION = re.compile(r"(?:[a-z0-9][a-z0-9.-]*/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?")


@functools.lru_cache(maxsize=256)
def _builtin_validator(version: str, api_version: str, kind: str) -> Any:
    """kubernetes-validate's strict schema of one built-in kind for a schema set `schema_version`
    chose, as the validator `kubernetes_validate.validate` builds: its `validate` reads the kind's
    schema and the 1 MB definitions file again for every object, which was most of a check's
    time. FileNotFoundError when the set has no such kind."""
    # The names become a file name: anything but a Kubernetes kind and apiVersion is no kind here
    # (a kind of "../x" would otherwise read another file of the package).
    if not (_KIND.fullmatch(kind) and _API_VERSION.fullmatch(api_version)):
        raise FileNotFoundError(f"{api_version} {kind}")
    # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"kubernetes-json-schema/v{version}-local-strict"
    schema = kv_utils.schema_contents(f"{schema_dir}/{kind.lower()}-{group_version}.json", version)
    definitions = kv_utils.schema_contents(f"{schema_dir}/_definitions.json", version)
    registry: referencing.Registry[Any] = referencing.Resource.from_contents(schema) @ referencing.Registry()
    registry = referencing.Resource.from_contents(definitions) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "<root>"


def check_object(obj: Any, version: str, crds: CrdSchemas) -> list[str]:
    """Problems with one manifest document (empty when valid)."""
    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        return ["not a Kubernetes object (apiVersion/kind missing)"]
    if not (obj.get("metadata") or {}).get("name"):
        return ["metadata.name is required"]
    group, _, api_version = str(obj["apiVersion"]).rpartition("/")
    if group in BUILTIN_GROUPS:
        try:
            validator = _builtin_validator(version, str(obj["apiVersion"]), str(obj["kind"]))
        except FileNotFoundError:
            return [f"{obj['apiVersion']} {obj['kind']} is not a Kubernetes {version} kind"]
        error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
        return [] if error is None else [f"{_path(error.path)}: {error.message[:300]}"]
    try:
        validator = crds.validator(group, api_version, str(obj["kind"]))
    except LookupError as exc:
        return [str(exc)]
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e.absolute_path)}: {e.message[:300]}" for e in errors]


def check_manifests(
    manifest_dir: Path, kubernetes_version: str, crd_dirs: "list[Path] | CrdSchemas"
) -> tuple[int, list[Finding]]:
    """Validate every YAML document under manifest_dir against the CRDs of crd_dirs (directories,
    or CRDs read from them already) and of the project's own schemas directory; returns
    (objects checked, findings)."""
    version = schema_version(kubernetes_version)
    crds = crd_dirs if isinstance(crd_dirs, CrdSchemas) else CrdSchemas(crd_directories(crd_dirs))
    findings: list[Finding] = []
    count = 0
    for path in sorted(manifest_dir.rglob("*.yaml")):
        rel = str(path.relative_to(manifest_dir))
        for doc in yaml_documents(path.read_bytes()):
            if doc is None:
                continue
            count += 1
            name = (
                f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
                if isinstance(doc, dict)
                else "?"
            )
            findings += [Finding(rel, name, message) for message in check_object(doc, version, crds)]
    return count, findings
