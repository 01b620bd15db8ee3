"""`python -m devtools.vllm_check STACK...`: check every rendered vLLM command line of the stacks.

Reads build/<stack>/manifests (render first: `llmd-fleet render <stack>`), extracts the argv of
every vLLM container for every worker, builds (or reuses) the parser environment, and checks the
stacks' command lines plus the self-test's broken ones in one checker process. Exit 0 when the
self-test rejects every broken line for its reason and no stack has a finding; 1 otherwise.

A stack whose config sets `serving.engine: simulator` runs no vLLM (llmd_fleet/layers/serving/simulator.py)
and is skipped, with that reason printed; its config is read and validated like every stack's,
so a stack that cannot be read is an error, never a skip.
"""

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from devtools.vllm_check import env
from devtools.vllm_check.extract import stack_command_lines
from devtools.vllm_check.lines import CommandLine, Finding, Origin, Problem
from devtools.vllm_check.selftest import BrokenLine, broken_lines, self_test_base, verdicts
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.core.problems import ConfigError

# Where the committed parser-name lists differ from the pinned vLLM's registries.
REGISTRY_ORIGIN = Origin("llmd_fleet/config/vllm_registry.py")


class CheckerError(Exception):
    """The checker process could not check the command lines."""


def run_checker(python: Path, version: str, lines: Sequence[CommandLine]) -> list[Finding]:
    """Check all command lines in one process of the parser environment."""
    jobs = {"vllm_version": version, "lines": [line.to_json() for line in lines]}
    try:
        data = env.run_in_env(python, "devtools.vllm_check.checker", jobs, "the checker")
    except env.EnvError as exc:
        raise CheckerError(str(exc)) from None
    per_line = data["results"]
    if len(per_line) != len(lines):
        raise CheckerError(f"the checker returned {len(per_line)} results for {len(lines)} command lines")
    registry = [Finding(REGISTRY_ORIGIN, Problem(None, text)) for text in data.get("registry_problems", [])]
    return registry + [
        Finding(line.origin, Problem.from_json(problem))
        for line, problems in zip(lines, per_line, strict=True)
        for problem in problems
    ]


def _ranges(workers: Iterable[int]) -> str:
    ordered = sorted(set(workers))
    return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])


def coverage(lines: Iterable[CommandLine]) -> str:
    """'role prefill: workers 0-3, role decode: workers 0-7' for the lines of one stack."""
    workers: dict[tuple[str, str], list[int]] = {}
    for line in lines:
        workers.setdefault((line.origin.role, line.origin.container), []).append(line.origin.worker or 0)
    return ", ".join(
        f"role {role} ({container}): workers {_ranges(ws)}" for (role, container), ws in workers.items()
    )


def self_test_report(
    results: list[tuple[BrokenLine, Finding | None]], findings: Sequence[Finding]
) -> list[str]:
    """One line per broken command line: rejected for its reason, or what happened instead."""
    out = []
    for case, match in results:
        if match is not None:
            out.append(
                f"  ok      {case.name}: {match.problem.flag}: {match.problem.message.splitlines()[0]}"
            )
            continue
        got = [f for f in findings if f.origin == case.line.origin]
        why = "; ".join(f"{f.problem.flag}: {f.problem.message.splitlines()[0]}" for f in got) or "accepted"
        out.append(f"  FAILED  {case.name}: expected {case.flag} '{case.reason}', got: {why}")
    return out


def skip_reason(stacks_dir: Path, stack: str) -> str | None:
    """Why `stack` has no vLLM command line to check, or None when it must have some. Raises
    ConfigError for a stack file that does not validate."""
    config = stack_config(read_stack_file(stacks_dir, stack))
    if config.serving.engine == "simulator":
        return (
            "serving.engine is simulator: its pods run llm-d-inference-sim, not vLLM "
            "(llmd_fleet/layers/serving/simulator.py), so there is no vllm serve command line"
        )
    return None


def check(stacks: Sequence[str], build_dir: Path, stacks_dir: Path | None = None) -> int:
    version = env.vllm_version()
    stacks_dir = stacks_dir or env.PROJECT_ROOT / "stacks"
    skipped: dict[str, str] = {}
    for stack in stacks:
        try:
            reason = skip_reason(stacks_dir, stack)
        except ConfigError as exc:
            print(f"error: {stack}: {exc}")
            return 1
        if reason is not None:
            skipped[stack] = reason
    for stack, reason in skipped.items():
        print(f"{stack}: skipped: {reason}")
    stacks = [s for s in stacks if s not in skipped]
    if not stacks:
        # Skips are never a pass: with nothing left there is nothing this check vouches for.
        print("error: every stack was skipped: nothing was checked")
        return 1
    lines: list[CommandLine] = []
    findings: list[Finding] = []
    per_stack: dict[str, list[CommandLine]] = {}
    for stack in stacks:
        stack_lines, extraction = stack_command_lines(stack, build_dir / stack / "manifests")
        per_stack[stack] = stack_lines
        lines += stack_lines
        findings += extraction
    base = self_test_base(lines)
    if base is None:
        for finding in findings:
            print(f"FINDING {finding}")
        print("error: no vLLM command line of a worker 0 to derive the self-test from")
        return 1
    cases = broken_lines(base)
    try:
        python = env.ensure(version)
        checked = run_checker(python, version, [*lines, *(case.line for case in cases)])
    except (env.EnvError, CheckerError) as exc:
        print(f"error: {exc}")
        return 1
    case_origins = {case.line.origin for case in cases}
    self_test = verdicts(cases, [f for f in checked if f.origin in case_origins])
    findings += [f for f in checked if f.origin not in case_origins]

    print(f"vLLM argument check with vLLM {version}'s own parser ({python.parent.parent})")
    failed_cases = [case for case, match in self_test if match is None]
    print(f"self-test: {len(cases)} broken command lines derived from {base.origin}")
    for text in self_test_report(self_test, checked):
        print(text)
    registry = [f for f in findings if f.origin == REGISTRY_ORIGIN]
    print(
        f"parser names the config accepts (llmd_fleet/config/vllm_registry.py): "
        f"{'differ from' if registry else 'match'} vLLM {version}'s registries"
    )
    for finding in registry:
        print(f"FINDING {finding}")
    for stack in stacks:
        stack_findings = [f for f in findings if f.origin.stack == stack]
        count = len(stack_findings)
        print(
            f"{stack}: {len(per_stack[stack])} command lines ({coverage(per_stack[stack]) or 'none'}): "
            f"{count or 'no'} finding{'' if count == 1 else 's'}"
        )
        for finding in stack_findings:
            print(f"FINDING {finding}")
    if failed_cases:
        print(
            f"FAILED: {len(failed_cases)} broken command lines were not rejected for their reason; "
            "the check cannot be trusted"
        )
    return 1 if failed_cases or findings else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.vllm_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "stacks", nargs="+", help="stacks to check (rendered into BUILD_DIR/<stack>/manifests)"
    )
    parser.add_argument("--build-dir", type=Path, default=env.PROJECT_ROOT / "build", help="default: build/")
    args = parser.parse_args(argv)
    return check(args.stacks, args.build_dir)


if __name__ == "__main__":
    sys.exit(main())
