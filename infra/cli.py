"""`llmd-fleet`: render, check and plan stacks offline.

    llmd-fleet plan STACK                           print the fleet plan
    llmd-fleet render STACK [--out DIR]             synthesize under mocks into build/STACK/
    llmd-fleet check STACK [--crd-dir DIR]...       render, then validate every manifest

Exit codes: 0 fine, 1 the rendered output failed a check, 2 bad input (config, plan or usage).
"""

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from components.config import ConfigError
from components.plan import PlanError

if TYPE_CHECKING:
    from infra.synth import Synthesis

EXIT_OK, EXIT_INVALID_OUTPUT, EXIT_BAD_INPUT = 0, 1, 2


def _project_root() -> Path:
    """The directory holding Pulumi.yaml: the current one or one of its parents."""
    here = Path.cwd()
    for candidate in (here, *here.parents):
        if (candidate / "Pulumi.yaml").is_file():
            return candidate
    return here


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmd-fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stacks-dir",
        type=Path,
        default=None,
        help="directory of Pulumi.<stack>.yaml files (default: stacks/)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print the fleet plan of a stack")
    plan.add_argument("stack")
    render = sub.add_parser("render", help="synthesize a stack offline into files")
    render.add_argument("stack")
    render.add_argument("--out", type=Path, default=None, help="output directory (default: build/STACK)")
    check = sub.add_parser("check", help="render a stack and validate every manifest")
    check.add_argument("stack")
    check.add_argument("--out", type=Path, default=None, help="output directory (default: build/STACK)")
    check.add_argument(
        "--crd-dir", type=Path, action="append", default=[], help="directory of CRD YAML files (repeatable)"
    )
    return parser


def _render(stacks_dir: Path, stack: str, out: Path) -> "Synthesis":
    from infra.render import render_files, write_atomically
    from infra.synth import synthesize

    synthesis = synthesize(stacks_dir, stack)
    files = render_files(synthesis)
    write_atomically(files, out)
    print(f"rendered {stack}: {len(files)} files in {out}")
    return synthesis


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    root = _project_root()
    stacks_dir = args.stacks_dir or root / "stacks"
    try:
        if args.command == "plan":
            import pulumi

            from components.config import load_from_pulumi
            from components.plan import plan_fleet
            from infra.render import plan_table
            from infra.synth import read_stack_file

            stack_file = read_stack_file(stacks_dir, args.stack)
            pulumi.runtime.set_all_config(stack_file.values, sorted(stack_file.secret_keys))
            plan = plan_fleet(load_from_pulumi())
            print(f"# plan of {args.stack}: {plan.gpus} GPUs on {plan.nodes} nodes\n")
            print(plan_table(plan))
            return EXIT_OK
        out = args.out or root / "build" / args.stack
        synthesis = _render(stacks_dir, args.stack, out)
    except (ConfigError, PlanError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "render":
        return EXIT_OK
    from infra.check import check_manifests

    try:
        count, findings = check_manifests(
            out / "manifests",
            synthesis.config.target.kubernetes_version,
            args.crd_dir,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for finding in findings:
        print(f"INVALID {finding}")
    bad = len({(f.file, f.object) for f in findings})
    print(f"checked {count} objects in {out / 'manifests'}: {count - bad} valid, {bad} invalid")
    return EXIT_INVALID_OUTPUT if findings else EXIT_OK


def main() -> None:
    code = run(sys.argv[1:])
    # The mock engine leaves its event loop open; close it so interpreter exit stays quiet.
    with contextlib.suppress(RuntimeError):
        asyncio.get_event_loop_policy().get_event_loop().close()
    sys.exit(code)


if __name__ == "__main__":
    main()
