"""`python -m devtools.promtool [build | gomod | check STACK...]` (build.py, rules.py)."""

import sys

from devtools.promtool.build import BuildError, ensure, regenerate_gomod
from devtools.promtool.rules import main


def _cli(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("check", [])
    try:
        if command == "build":
            print(ensure())
            return 0
        if command == "gomod":
            regenerate_gomod()
            return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if command == "check":
        return main(rest)
    print(
        f"usage: python -m devtools.promtool [build | gomod | check STACK...] (got {command!r})",
        file=sys.stderr,
    )
    return 2


sys.exit(_cli(sys.argv[1:]))
