"""checkov's JSON report as per-stack figures, and the verdict on it.

A stack passes when checkov reports no failed check and every skipped check carries a reason
and explains a real failure: scanned again with every skip annotation removed, the same check
fails on the same object. A skip that explains nothing (the object was fixed, or the annotation
sits on the wrong object) is an error as well, so the annotations cannot drift from the objects.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

NO_REASON = "No comment provided"
"""What checkov records for a skip annotation without `=<reason>`."""


@dataclass(frozen=True, order=True)
class CheckResult:
    check_id: str
    resource: str
    """checkov's resource id, e.g. `Deployment.llm-d.glm52-epp` or `Pod.llm-d.glm52-decode-worker`."""
    file: str = field(compare=False)
    name: str = field(compare=False, default="")
    reason: str = field(compare=False, default="")
    """A skipped check's reason (checkov's `suppress_comment`)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.check_id, self.resource)


@dataclass(frozen=True)
class Report:
    """One checkov run over one scan directory."""

    passed: int
    failed: list[CheckResult]
    skipped: list[CheckResult]
    parsing_errors: list[str]


def _result(item: dict[str, Any]) -> CheckResult:
    return CheckResult(
        check_id=str(item.get("check_id", "")),
        resource=str(item.get("resource", "")),
        file=str(item.get("file_path", "")),
        name=str(item.get("check_name", "")),
        # A skipped check's reason sits in its check_result (checkov 3.x).
        reason=str(
            item.get("suppress_comment") or (item.get("check_result") or {}).get("suppress_comment") or ""
        ),
    )


def parse(text: str) -> Report:
    """checkov's `-o json` output for the kubernetes framework (one report, or a list of one)."""
    data = json.loads(text)
    if isinstance(data, list):
        reports = [d for d in data if isinstance(d, dict) and d.get("check_type") == "kubernetes"]
        if len(reports) != 1:
            raise ValueError(f"expected one kubernetes report, got {len(reports)}")
        data = reports[0]
    if not isinstance(data, dict) or "summary" not in data:
        raise ValueError("not a checkov JSON report (no summary)")
    results = data.get("results") or {}
    summary = data["summary"]
    report = Report(
        passed=int(summary.get("passed", 0)),
        failed=sorted(_result(r) for r in results.get("failed_checks") or ()),
        skipped=sorted(_result(r) for r in results.get("skipped_checks") or ()),
        parsing_errors=sorted(str(p) for p in results.get("parsing_errors") or ()),
    )
    if len(report.failed) != int(summary.get("failed", 0)) or len(report.skipped) != int(
        summary.get("skipped", 0)
    ):
        raise ValueError("checkov's summary does not match its result lists")
    return report


def problems(annotated: Report, bare: Report) -> list[str]:
    """Everything that makes a stack fail: failures without a skip annotation, skips without a
    reason, skips that explain no failure of the bare scan, files checkov could not parse."""
    found = [f"cannot parse {path}" for path in annotated.parsing_errors]
    found += [
        f"unexplained failure {r.check_id} on {r.resource} ({r.file}): {r.name}" for r in annotated.failed
    ]
    found += [
        f"skip of {r.check_id} on {r.resource} has no reason (checkov.io/skipN: {r.check_id}=<reason>)"
        for r in annotated.skipped
        if not r.reason.strip() or r.reason == NO_REASON
    ]
    failing = {r.key for r in bare.failed}
    found += [
        f"skip of {r.check_id} on {r.resource} explains nothing: the check passes without it"
        for r in annotated.skipped
        if r.key not in failing
    ]
    return found


def figures(stack: str, version: str, report: Report, pods: Sequence[str]) -> str:
    """The line `make checkov` prints per stack."""
    templates = f"{len(pods)} pod template(s) from custom resources included"
    return (
        f"checkov {version} {stack}: {report.passed} passed, {len(report.failed)} failed, "
        f"{len(report.skipped)} skipped ({templates}: {', '.join(pods) or 'none'})"
    )


def skipped_by_check(reports: Iterable[Report]) -> dict[str, int]:
    """How many objects skip each check, over several reports."""
    counts: dict[str, int] = {}
    for report in reports:
        for result in report.skipped:
            counts[result.check_id] = counts.get(result.check_id, 0) + 1
    return dict(sorted(counts.items()))
