"""Check that the parser environment holds versions vLLM itself declares (run inside it).

vLLM is installed with --no-deps and its dependencies from requirements.txt, so nothing else
enforces vLLM's own `Requires-Dist` ranges. Every installed package vLLM declares must satisfy
vLLM's specifier, except the deliberate CPU torch (requirements.txt says why).
"""

import importlib.metadata
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ALLOWED_DEVIATIONS = frozenset({"torch"})


def mismatches(distribution: str = "vllm") -> list[str]:
    """Installed packages whose version falls outside the range `distribution` declares."""
    out = []
    for text in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(requirement.name) in ALLOWED_DEVIATIONS:
            continue
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            out.append(f"{requirement.name} {installed} is outside {distribution}'s range {requirement}")
    return out


def main() -> int:
    problems = mismatches()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
