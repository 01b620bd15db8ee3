"""A stack's manifests as the twin's checks handle them: rendered offline, the vendored CRDs, the
order they are applied in, what the server adds to them, and the report the checks write.

The lowest of the twin's check modules: e2e.py, lws_checks.py, pods.py, engine.py, engine_e2e.py,
doctor.py and the data plane read these, and this module imports none of them.
"""

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.twin import cluster
from devtools.twin.kube import walk_paths
from llmd_fleet.core.yaml_documents import yaml_documents

PROJECT_ROOT = cluster.PROJECT_ROOT
CRD_DIR = PROJECT_ROOT / "schemas" / "crds"
# What the server and controllers set on every object (uid, resourceVersion, managedFields,
# controller annotations, status): not counted as defaults.
BOOKKEEPING = ("metadata.", "status")


@dataclass
class Report:
    figures: list[tuple[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """Figure lines printed as they are, each starting with its word (devtools/twin/lws_checks.py,
    and the `engine:` steps)."""

    def figure(self, name: str, value: str) -> None:
        self.figures.append((name, value))
        print(f"  {name}: {value}", flush=True)

    def line(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)
            print(f"  FAIL {message}", flush=True)


def load_documents(paths: Sequence[Path]) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        for doc in yaml_documents(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind"):
                docs.append(doc)
    return docs


def vendored_crds(directory: Path = CRD_DIR) -> list[dict[str, Any]]:
    crds = load_documents(sorted(directory.rglob("*.yaml")))
    return [d for d in crds if d["kind"] == "CustomResourceDefinition"]


def apply_order(objects: Sequence[dict[str, Any]], namespaced: dict[str, bool]) -> list[dict[str, Any]]:
    """Namespaces first, then cluster-scoped objects, then ServiceAccounts, then the other
    namespaced objects (stable within each).

    ServiceAccounts go before the rest as the program's `depends_on` orders them: the token
    controller deletes a `kubernetes.io/service-account-token` Secret whose account does not exist
    yet, so a Secret applied first can vanish before it is read back."""

    def rank(obj: dict[str, Any]) -> int:
        if obj["kind"] == "Namespace":
            return 0
        if obj["kind"] == "CustomResourceDefinition":
            return 1
        if not namespaced.get(f"{obj['apiVersion']}/{obj['kind']}", True):
            return 2
        return 3 if obj["kind"] == "ServiceAccount" else 4

    return sorted(objects, key=rank)


def server_added(rendered: dict[str, Any], stored: dict[str, Any]) -> set[str]:
    """Leaf paths the server added to an object (defaults), bookkeeping left out."""
    mine = set(walk_paths(rendered))
    theirs = set(walk_paths(stored))
    added = set()
    for path in theirs - mine:
        if path.startswith(BOOKKEEPING):
            continue
        added.add(path)
    return added


def cel_rules(schema: Any) -> int:
    """Number of x-kubernetes-validations rules in an OpenAPI schema."""
    if isinstance(schema, dict):
        own = len(schema.get("x-kubernetes-validations", []))
        return own + sum(cel_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return sum(cel_rules(v) for v in schema)
    return 0


def render(stack: str, out: Path) -> list[dict[str, Any]]:
    command = [
        sys.executable,
        "-c",
        "from llmd_fleet.cli.main import main; main()",
        "render",
        stack,
        "--out",
        str(out),
    ]
    subprocess.run(command, cwd=PROJECT_ROOT, check=True, stdout=subprocess.DEVNULL)
    return load_documents(sorted((out / "manifests").rglob("*.yaml")))
