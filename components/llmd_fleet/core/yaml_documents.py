"""Reading YAML the package wrote itself or vendored (rendered manifests, CRDs): libyaml's parser.

PyYAML's wheels ship libyaml. Its `CSafeLoader` resolves and constructs exactly as `SafeLoader` does
(same resolver, same constructor) and parses about ten times faster: a stack's manifest tree is
read in a fifth of a second instead of two. A PyYAML built without libyaml falls back to the
pure-Python parser, with the same result.

User input never comes through here: stack files go through `llmd_fleet.cli.stack_file`, whose
loader refuses what the Pulumi CLI would read differently.
"""

from collections.abc import Iterator
from typing import Any

import yaml

FAST_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_documents(text: str | bytes) -> Iterator[Any]:
    """Every document of a YAML stream, as `yaml.safe_load_all` reads it (empty ones as None)."""
    return yaml.load_all(text, Loader=FAST_SAFE_LOADER)


def yaml_document(text: str | bytes) -> Any:
    """The one document of a YAML stream, as `yaml.safe_load` reads it."""
    return yaml.load(text, Loader=FAST_SAFE_LOADER)
