"""Golden rendered output: every stack's render committed under tests/golden/<stack>/.

    python -m devtools.golden            refresh tests/golden/ from the current code (`make golden`)
    python -m devtools.golden --check    exit 1 and list the files that differ

A change to what a stack deploys then shows up in review as a diff of plain YAML, and
tests/stacks/test_golden.py fails until the golden copy is refreshed on purpose.
"""

import argparse
import shutil
import sys
from pathlib import Path

from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.cli.stack_file import stack_names

ROOT = CHECKOUT
GOLDEN = ROOT / "tests" / "golden"
STACKS = ROOT / "stacks"


def stacks() -> list[str]:
    return stack_names(STACKS)


def rendered(stack: str, build: Path = ROOT / "build") -> dict[str, str]:
    """The files `llmd-fleet render` writes for a stack (the marker file aside): read from
    build/<stack> when a render of this run's code and settings is there (its recorded key, as
    `render --reuse` reads it), else rendered here. A stale build/ is never read."""
    from llmd_fleet.cli.outdir import read_output, recorded_key
    from llmd_fleet.cli.render import render_files
    from llmd_fleet.cli.render_key import render_key
    from llmd_fleet.cli.stack_file import read_stack_file
    from llmd_fleet.cli.synth import synthesize

    earlier = build / stack
    if recorded_key(earlier) == render_key(read_stack_file(STACKS, stack)):
        return read_output(earlier)
    return render_files(synthesize(STACKS, stack))


def committed(stack: str) -> dict[str, str]:
    base = GOLDEN / stack
    return {str(p.relative_to(base)): p.read_text() for p in sorted(base.rglob("*")) if p.is_file()}


def differences(stack: str, files: dict[str, str]) -> list[str]:
    """Relative paths that are new, gone or changed compared with the golden copy."""
    golden = committed(stack)
    return sorted(
        [f"changed {p}" for p in files if p in golden and golden[p] != files[p]]
        + [f"new {p}" for p in files if p not in golden]
        + [f"gone {p}" for p in golden if p not in files]
    )


def refresh(stack: str, files: dict[str, str]) -> None:
    target = GOLDEN / stack
    shutil.rmtree(target, ignore_errors=True)
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.golden")
    parser.add_argument("--check", action="store_true", help="compare instead of refreshing")
    args = parser.parse_args(argv)
    stale = 0
    for stack in stacks():
        files = rendered(stack)
        if args.check:
            diff = differences(stack, files)
            stale += len(diff)
            for line in diff:
                print(f"{stack}: {line}")
        else:
            refresh(stack, files)
            print(f"tests/golden/{stack}: {len(files)} files")
    if args.check and stale:
        print("golden output is stale: review the diff, then `make golden`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
