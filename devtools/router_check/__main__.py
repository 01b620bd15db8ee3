"""`python -m devtools.router_check [build | check STACK... | STACK...]` (build.py, check.py)."""

import sys

from devtools.router_check.build import BuildError, ensure
from devtools.router_check.check import main


def _cli(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        try:
            print(ensure())
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    return main(argv[1:] if argv[:1] == ["check"] else argv)


sys.exit(_cli(sys.argv[1:]))
