"""`python -m devtools.vllm_check STACK...`: check every rendered vLLM command line of the stacks.

Reads build/<stack>/manifests (render first: `llmd-fleet render <stack>`), extracts the argv of
every vLLM container for every worker, builds (or reuses) the parser environment, and checks the
stacks' command lines plus the self-test's broken ones in one checker process. Exit 0 when the
self-test rejects every broken line for its reason and no stack has a finding; 1 otherwise.

The same run builds vLLM's own engine configuration for every engine (devtools/vllm_check/
engine_config.py, engines.py) with its negative controls, and checks the launch scripts' NIC
pinning on a fake sysfs (devtools/vllm_check/sysfs.py); docs/vllm-check.md shows the lines.

A stack whose config sets `serving.engine: simulator` runs no vLLM (llmd_fleet/layers/serving/simulator.py)
and is skipped, with that reason printed; its config is read and validated like every stack's,
so a stack that cannot be read is an error, never a skip.
"""

import argparse
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devtools.vllm_check import env
from devtools.vllm_check.engines import (
    NOT_CHECKED,
    Control,
    Engine,
    Verdict,
    control_line,
    engine_for,
    negative_controls,
    stack_line,
    verdict,
)
from devtools.vllm_check.extract import stack_command_lines
from devtools.vllm_check.lines import CommandLine, Finding, Origin, Problem
from devtools.vllm_check.selftest import BrokenLine, broken_lines, self_test_base, verdicts
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.core.problems import ConfigError

# Where the committed parser-name lists differ from the pinned vLLM's registries.
REGISTRY_ORIGIN = Origin("llmd_fleet/config/vllm_registry.py")


class CheckerError(Exception):
    """The checker process could not check the command lines."""


@dataclass
class EngineJobs:
    """The engine-configuration check's work: every engine, then the negative controls."""

    engines: list[Engine] = field(default_factory=list)
    controls: list[Control] = field(default_factory=list)
    cache: str = ""
    """vLLM's cache root shared by both processes (the model-info cache the checker fills)."""

    @property
    def all(self) -> list[Engine]:
        return [*self.engines, *(c.engine for c in self.controls)]

    def models(self) -> list[str]:
        """Every vendored model's folder: those the engines serve and those only a card uses,
        whose ModelConfig vLLM resolves all the same (`card_lines`)."""
        return sorted({e.model_dir for e in self.all} | set(vendored_dirs().values()))


def vendored_dirs() -> dict[str, str]:
    """Model id -> its vendored folder (components/llmd_fleet/models/)."""
    from llmd_fleet.models import FOLDERS, vendored_config

    found = {model_id: vendored_config(model_id) for model_id in FOLDERS}
    return {model_id: str(v.directory) for model_id, v in found.items() if v is not None}


def card_lines(served: set[str], models: dict[str, str | None], version: str) -> list[str]:
    """One line per model card no checked stack serves: vLLM's ModelConfig of its vendored
    config.json (a refusal is a FINDING, in `engine_report`), or why it has none."""
    from llmd_fleet.models import NOT_VENDORED

    out: list[str] = []
    for model_id, directory in sorted(vendored_dirs().items()):
        if model_id in served or models.get(directory, "not resolved") is not None:
            continue
        out.append(
            f"engine config: model {model_id}: vLLM {version}'s ModelConfig resolves its vendored "
            "config.json; no checked stack serves it, so no engine is built"
        )
    for model_id, why in sorted(NOT_VENDORED.items()):
        out.append(f"engine config (not checked): model {model_id}: no vendored config.json: {why}")
    return out


def run_checker(
    python: Path, version: str, lines: Sequence[CommandLine], engines: EngineJobs | None = None
) -> tuple[list[Finding], list[str | None], dict[str, str | None]]:
    """Check all command lines in one process of the parser environment; with `engines`, also the
    MoE oracle per engine and each vendored model's ModelConfig."""
    engines = engines or EngineJobs()
    jobs = {
        "vllm_version": version,
        "lines": [line.to_json() for line in lines],
        "models": engines.models(),
        "engine_moe": [
            {"argv": list(e.line.argv), "env": [list(p) for p in e.line.env], "model_dir": e.model_dir}
            for e in engines.all
        ],
    }
    extra = {"VLLM_CACHE_ROOT": engines.cache} if engines.cache else {}
    try:
        data = env.run_in_env(python, "devtools.vllm_check.checker", jobs, "the checker", **extra)
    except env.EnvError as exc:
        raise CheckerError(str(exc)) from None
    per_line = data["results"]
    if len(per_line) != len(lines):
        raise CheckerError(f"the checker returned {len(per_line)} results for {len(lines)} command lines")
    moe = list(data.get("engine_moe", []))
    if len(moe) != len(engines.all):
        raise CheckerError(f"the checker returned {len(moe)} MoE verdicts for {len(engines.all)} engines")
    registry = [Finding(REGISTRY_ORIGIN, Problem(None, text)) for text in data.get("registry_problems", [])]
    findings = registry + [
        Finding(line.origin, Problem.from_json(problem))
        for line, problems in zip(lines, per_line, strict=True)
        for problem in problems
    ]
    return findings, moe, dict(data.get("models", {}))


def run_engine_config(python: Path, version: str, engines: EngineJobs) -> list[dict[str, object]]:
    """Build every engine's configuration in one process presenting an H100 (engine_config.py)."""
    jobs = {"vllm_version": version, "engines": [e.to_json() for e in engines.all]}
    try:
        data = env.run_in_env(
            python,
            "devtools.vllm_check.engine_config",
            jobs,
            "the engine-configuration check",
            VLLM_CACHE_ROOT=engines.cache,
            HF_HUB_OFFLINE="1",
        )
    except env.EnvError as exc:
        raise CheckerError(str(exc)) from None
    results: list[dict[str, object]] = list(data["results"])
    if len(results) != len(engines.all):
        raise CheckerError(f"the engine check returned {len(results)} results for {len(engines.all)} engines")
    return results


def engine_report(
    stacks: Sequence[str],
    skipped: dict[str, str],
    per_stack: dict[str, list[CommandLine]],
    jobs: EngineJobs,
    verdicts: Sequence[Verdict],
    models: dict[str, str | None],
    version: str,
) -> tuple[list[str], bool]:
    """The engine-configuration lines (one per stack in stack order, then the controls and what is
    not checked) and whether everything came out as it must."""
    out: list[str] = []
    ok = True
    by_line = dict(zip((e.line for e in jobs.engines), verdicts[: len(jobs.engines)], strict=True))
    for stack in stacks:
        if stack in skipped:
            out.append(f"engine config: {stack}: no vLLM engines ({skipped[stack]})")
            continue
        lines = per_stack.get(stack, [])
        missing = sorted({line.argv[2] for line in lines if line not in by_line})
        if missing or not lines:
            what = ", ".join(missing) or "no engine"
            out.append(
                f"engine config: {stack}: not checked: no vendored config.json for {what} "
                "(components/llmd_fleet/models/)"
            )
            ok = False
            continue
        stack_verdicts = [by_line[line] for line in lines]
        rebuilt = sorted({k for line in lines for k in _rebuilt(line)})
        out.append(stack_line(stack, version, stack_verdicts, rebuilt))
        for line, result in zip(lines, stack_verdicts, strict=True):
            if result.refused is not None:
                ok = False
                out.append(f"FINDING {line.origin}: engine config: {result.refused}")
    for problem_dir, problem in models.items():
        if problem is not None:
            ok = False
            out.append(f"FINDING {problem_dir}: ModelConfig: {problem}")
    served = {line.argv[2] for lines in per_stack.values() for line in lines if len(line.argv) > 2}
    out += card_lines(served, models, version)
    for control, result in zip(jobs.controls, verdicts[len(jobs.engines) :], strict=True):
        text, expected = control_line(control, result)
        out.append(text)
        ok = ok and expected
    for what, why in NOT_CHECKED:
        out.append(f"engine config (not checked): {what}: {why}")
    return out, ok


# The NIC the negative control leaves out of the fake sysfs.
MISSING_NIC = 3


def nic_report(
    stacks: Sequence[str],
    skipped: dict[str, str],
    per_stack: dict[str, list[CommandLine]],
    stacks_dir: Path,
    build_dir: Path,
) -> tuple[list[str], bool]:
    """One line per stack: the pods whose script paired rank i with NIC i on the fake sysfs (or why
    the stack pins no NIC), then the control: a tree with one NIC missing stops the script."""
    from devtools.vllm_check.sysfs import expected_mapping, pairs
    from llmd_fleet.layers.serving.vllm import NIC_MAPPING_VAR, nic_pinning_reason
    from llmd_fleet.plan.fleet import plan_fleet

    expected = expected_mapping(pairs())
    out: list[str] = []
    ok = True
    control_stack = None
    for stack in stacks:
        if stack in skipped:
            out.append(f"nic pinning: {stack}: no vLLM engines")
            continue
        lines = per_stack.get(stack, [])
        mappings = [line.environ.get(NIC_MAPPING_VAR) for line in lines]
        if not any(mappings):
            plan = plan_fleet(stack_config(read_stack_file(stacks_dir, stack)))
            reasons = sorted({nic_pinning_reason(r) or "" for r in plan.roles})
            out.append(f"nic pinning: {stack}: not rendered ({'; '.join(reasons)})")
            continue
        pinned = sum(1 for mapping in mappings if mapping == expected)
        out.append(
            f"nic pinning: {stack}: {pinned} of {len(lines)} pods pin rank i to NIC i "
            f"({NIC_MAPPING_VAR} on a fake /sys: 8 GPUs, 8 NICs, 8 PCIe roots)"
        )
        ok = ok and pinned == len(lines)
        control_stack = control_stack or stack
    if control_stack is not None:
        _, findings = stack_command_lines(control_stack, build_dir / control_stack / "manifests", MISSING_NIC)
        stopped = [f.problem.message for f in findings if "has no RDMA NIC" in f.problem.message]
        case = f"nic pinning (negative control): NIC {MISSING_NIC} missing ({control_stack})"
        if stopped and len(stopped[0].splitlines()) == 1:
            out.append(f"{case}: stopped: {stopped[0]}")
        else:
            ok = False
            out.append(
                f"{case}: NOT STOPPED with one line: {stopped or [f.problem.message for f in findings]}"
            )
    return out, ok


def _rebuilt(line: CommandLine) -> tuple[str, ...]:
    from llmd_fleet.models import vendored_config

    vendored = vendored_config(line.argv[2])
    return vendored.rebuilt if vendored is not None else ()


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
    requested = list(stacks)
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
    jobs = EngineJobs(
        engines=[e for e in (engine_for(line) for line in lines) if e is not None],
        controls=negative_controls(base),
    )
    with tempfile.TemporaryDirectory(prefix="vllm-check-cache-") as cache:
        jobs.cache = cache
        try:
            python = env.ensure(version)
            checked, moe, models = run_checker(
                python, version, [*lines, *(case.line for case in cases)], jobs
            )
            configs = run_engine_config(python, version, jobs)
        except (env.EnvError, CheckerError) as exc:
            print(f"error: {exc}")
            return 1
    engine_verdicts = [verdict(config, refusal) for config, refusal in zip(configs, moe, strict=True)]
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
    report, engines_ok = engine_report(requested, skipped, per_stack, jobs, engine_verdicts, models, version)
    for text in report:
        print(text)
    nic, nic_ok = nic_report(requested, skipped, per_stack, stacks_dir, build_dir)
    for text in nic:
        print(text)
    return 1 if failed_cases or findings or not engines_ok or not nic_ok else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.vllm_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "stacks", nargs="+", help="stacks to check (rendered into BUILD_DIR/<stack>/manifests)"
    )
    parser.add_argument("--build-dir", type=Path, default=env.PROJECT_ROOT / "build", help="default: build/")
    parser.add_argument(
        "--stacks-dir",
        type=Path,
        default=None,
        help="where the stack files are (default: stacks/); for a variant rendered with "
        "`llmd-fleet --stacks-dir DIR render STACK --out BUILD_DIR/STACK`",
    )
    args = parser.parse_args(argv)
    return check(args.stacks, args.build_dir, args.stacks_dir)


if __name__ == "__main__":
    sys.exit(main())
