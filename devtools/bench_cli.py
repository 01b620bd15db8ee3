"""`make bench-cli`: how long `llmd-fleet render` and `check` take, as ratios to the bare SDK import.

    python -m devtools.bench_cli [STACK ...] [--repeat N]

Absolute times are noisy on shared machines, so every figure is also given as a ratio to the
bare `import pulumi, pulumi_kubernetes` measured in the same run (the floor any render pays).
Each command runs in its own process, as a user runs it; the best of `--repeat` runs counts, after
one untimed warm-up per stack (it compiles bytecode the first run of a fresh environment would
otherwise pay). Peak memory is the process's maximum resident set (wait4's ru_maxrss), the pack's
process excluded. A config error is timed too: it must be refused before any SDK is imported.

Targets (docs/performance.md): on-prem render within 3x the bare import, every stack within 4x,
a config error within 2 s.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from llmd_fleet.cli.children import popen
from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.cli.stack_file import stack_names

ROOT = CHECKOUT
BARE_IMPORT = "import pulumi, pulumi_kubernetes"


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_mib: float


def timed(command: list[str]) -> Run:
    """Wall time and peak resident memory of one process (its children not counted)."""
    started = time.perf_counter()
    process = popen(
        command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    assert process.stderr is not None
    errors = process.stderr.read().decode()
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 2) or (process.returncode == 2 and "error:" not in errors):
        raise SystemExit(f"{' '.join(command)} failed (exit {process.returncode}):\n{errors}")
    return Run(elapsed, usage.ru_maxrss / 1024)  # ru_maxrss is in KiB on Linux


def best(command: list[str], repeat: int) -> Run:
    runs = [timed(command) for _ in range(repeat)]
    return Run(min(r.seconds for r in runs), max(r.peak_mib for r in runs))


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmd_fleet.cli.main", *args]


def stacks() -> list[str]:
    return stack_names(ROOT / "stacks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.bench_cli", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("stacks", nargs="*", help="stacks to time (default: every stack in stacks/)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command; the best counts (default 3)")
    args = parser.parse_args(argv)
    chosen = args.stacks or stacks()
    bare = best([sys.executable, "-c", BARE_IMPORT], args.repeat)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        bad_stacks = Path(tmp) / "stacks"
        bad_stacks.mkdir()
        (bad_stacks / "Pulumi.empty.yaml").write_text("config: {}\n")
        config_error = best(cli("--stacks-dir", str(bad_stacks), "render", "empty"), args.repeat)
        for stack in chosen:
            out = str(Path(tmp) / stack)
            timed(cli("render", stack, "--out", out))  # warm-up
            render = best(cli("render", stack, "--out", out), args.repeat)
            check = best(cli("check", stack, "--out", out), args.repeat)
            rows.append((stack, render, check))
    print(f"bare `{BARE_IMPORT}`: {bare.seconds:.2f} s, {bare.peak_mib:.0f} MiB peak")
    ratio = config_error.seconds / bare.seconds
    print(f"config error (empty stack file): {config_error.seconds:.2f} s ({ratio:.1f}x)")
    print()
    print("| stack | render | render / import | check | check / import | peak MiB (render, check) |")
    print("|---|---|---|---|---|---|")
    for stack, render, check in rows:
        print(
            f"| {stack} | {render.seconds:.2f} s | {render.seconds / bare.seconds:.1f}x | "
            f"{check.seconds:.2f} s | {check.seconds / bare.seconds:.1f}x | "
            f"{render.peak_mib:.0f}, {check.peak_mib:.0f} |"
        )
    return 0


if __name__ == "__main__":
    from llmd_fleet.cli.children import handle_signals

    handle_signals()  # SIGTERM and SIGHUP stop the run like Ctrl-C; the timed child dies with it
    sys.exit(main())
