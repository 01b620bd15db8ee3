"""`python -m devtools.checkov_scan STACK...`: checkov over every rendered stack.

Reads build/<stack>/manifests (render first: `llmd-fleet render <stack>`), writes the scan
directory (manifests plus the pod templates of DisaggregatedSets and LeaderWorkerSets as Pods,
devtools/checkov_scan/extract.py) and runs the pinned checkov from its own environment twice: as
rendered, and with every skip annotation removed. Prints one line of figures per stack and every
problem (devtools/checkov_scan/report.py). Exit 0 when no stack has a problem, 1 otherwise.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools.checkov_scan import env
from devtools.checkov_scan.extract import write_scan_dir
from devtools.checkov_scan.report import Report, figures, parse, problems, skipped_by_check
from devtools.vllm_check.env import EnvError, child_environ
from llmd_fleet.cli.paths import CHECKOUT

PROJECT_ROOT = CHECKOUT
# No network: no policy or guideline download, no update check (every check is in the package).
CHECKOV_ENV = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE", "LOG_LEVEL": "WARNING"}


class ScanError(Exception):
    """checkov did not produce a report."""


def checkov_command(checkov: Path, directory: Path) -> list[str]:
    return [str(checkov), "--directory", str(directory), "--framework", "kubernetes", "--output", "json"]


def run_checkov(checkov: Path, directory: Path) -> Report:
    proc = subprocess.run(
        [*checkov_command(checkov, directory), "--skip-download"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=child_environ(**CHECKOV_ENV),
        check=False,
    )
    # Exit 1 only means that checks failed; the report says which.
    if proc.returncode not in (0, 1):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise ScanError(f"checkov exited {proc.returncode} on {directory}:\n{tail}")
    try:
        return parse(proc.stdout)
    except ValueError as exc:
        raise ScanError(f"checkov's report on {directory}: {exc}") from None


def scan_stack(checkov: Path, version: str, stack: str, build_dir: Path) -> tuple[Report, list[str]]:
    """Scan one stack; returns its report and problems, after printing its figures."""
    manifests = build_dir / stack / "manifests"
    with tempfile.TemporaryDirectory(prefix=f"checkov-{stack}-") as tmp:
        annotated_dir, bare_dir = Path(tmp) / "annotated", Path(tmp) / "bare"
        pods = write_scan_dir(manifests, annotated_dir)
        write_scan_dir(manifests, bare_dir, without_skips=True)
        annotated, bare = run_checkov(checkov, annotated_dir), run_checkov(checkov, bare_dir)
    print(figures(stack, version, annotated, [f"{p.source} -> {p.name}" for p in pods]))
    found = problems(annotated, bare)
    for problem in found:
        print(f"  PROBLEM {stack}: {problem}")
    return annotated, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.checkov_scan", description=__doc__.splitlines()[0]
    )
    parser.add_argument("stacks", nargs="+", metavar="STACK")
    parser.add_argument("--build-dir", type=Path, default=PROJECT_ROOT / "build")
    args = parser.parse_args(argv)
    version = env.checkov_version()
    try:
        checkov = env.ensure(version)
        reports, total = [], 0
        for stack in args.stacks:
            report, found = scan_stack(checkov, version, stack, args.build_dir)
            reports.append(report)
            total += len(found)
    except (EnvError, ScanError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    explained = ", ".join(f"{check} x{n}" for check, n in skipped_by_check(reports).items())
    print(f"skipped with a reason: {explained or 'none'}")
    if total:
        print(f"checkov: {total} problem(s); every failure needs a fix or a checkov.io/skipN annotation")
        return 1
    print(f"checkov: {len(args.stacks)} stack(s), no unexplained failure")
    return 0
