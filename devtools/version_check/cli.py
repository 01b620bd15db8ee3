"""`python -m devtools.version_check`: every version images/versions.toml pins, checked to exist.

Python pins resolve through uv and Go pins through `go list -m` (devtools/version_check/resolve.py);
the serving image's wheel set (`uv pip compile` of vLLM with the build pins, for the image's Python
on x86_64 Linux) must resolve, and the pins that record what arrives inside it must be what it
resolves to. Pins no package client here can resolve (images, charts, source tags, cloud APIs) are
listed as not checkable offline with where they come from. One line, then the details indented:

    versions: <N> pinned, <R> resolved, <U> not checkable offline, <P> unpublished, <C> not checkable now

Exit 1 when P > 0, when the wheel set does not resolve (the requirement that cannot is named) or
disagrees with a pin, or when a version key is not classified; 0 otherwise. A registry that does
not answer after one retry makes a pin "not checkable now": never counted as resolved.
"""

import argparse
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from devtools.version_check.pins import GoModule, Offline, Pin, PyPI, WheelSet, pins
from devtools.version_check.resolve import Answer, Status, go_pin, normalise, python_pin, wheel_set
from llmd_fleet.cli.paths import CHECKOUT

MATRIX = CHECKOUT / "images" / "versions.toml"


def image_requirements(matrix: dict[str, Any]) -> list[str]:
    """What images/Dockerfile.wide-ep installs with its dependencies (`nixl` itself goes in with
    --no-deps, so it is checked on its own)."""
    build = matrix["build"]
    cuda_major = str(build["cuda"]).split(".")[0]
    return [
        f"vllm=={matrix['vllm']['version']}",
        f"torch=={build['torch']}",
        f"nixl-cu{cuda_major}=={build['nixl']}",
        f"modelexpress=={build['modelexpress']}",
    ]


def _pythons(matrix: dict[str, Any]) -> dict[str, str]:
    return {
        "build": str(matrix["build"]["python"]),
        "inference-perf": str(matrix["tools"]["inference-perf-python"]),
    }


def check_pin(pin: Pin, pythons: dict[str, str]) -> Answer:
    check = pin.check
    if isinstance(check, PyPI):
        python = pythons.get(check.python, check.python)
        answers = [python_pin(package, pin.version, python) for package in check.packages]
        for status in (Status.UNPUBLISHED, Status.NOW):
            bad = [a for a in answers if a.status is status]
            if bad:
                return Answer(status, "; ".join(a.detail for a in bad))
        return Answer(Status.RESOLVED)
    if isinstance(check, GoModule):
        return go_pin(check.module, pin.version)
    raise AssertionError(check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.version_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--matrix", type=Path, default=MATRIX)
    args = parser.parse_args(argv)
    matrix = tomllib.loads(args.matrix.read_text(encoding="utf-8"))
    every = pins(matrix)
    pythons = _pythons(matrix)
    problems: list[str] = []
    if unclassified := [p.key for p in every if p.check is None]:
        problems.append(f"not classified in devtools/version_check/pins.py: {', '.join(unclassified)}")
    asked = [p for p in every if isinstance(p.check, (PyPI, GoModule))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        wheels = pool.submit(wheel_set, image_requirements(matrix), pythons["build"])
        answers = dict(
            zip([p.key for p in asked], pool.map(lambda p: check_pin(p, pythons), asked), strict=True)
        )
        resolved_set = wheels.result()
    detail: list[str] = []
    counts = {status: 0 for status in Status}
    offline = 0
    for pin in every:
        if isinstance(pin.check, Offline):
            offline += 1
            detail.append(f"  not checkable offline: {pin.key} = {pin.version}: {pin.check.where}")
        elif isinstance(pin.check, WheelSet):
            got = resolved_set.versions.get(normalise(pin.check.package))
            if resolved_set.now:
                counts[Status.NOW] += 1
                detail.append(
                    f"  not checkable now: {pin.key} = {pin.version}: the wheel set did not resolve"
                )
            elif got == pin.version:
                counts[Status.RESOLVED] += 1
            elif got is None and resolved_set.failure:
                counts[Status.NOW] += 1
                detail.append(
                    f"  not checkable now: {pin.key} = {pin.version}: the wheel set did not resolve"
                )
            else:
                counts[Status.RESOLVED] += 1 if got else 0
                counts[Status.UNPUBLISHED] += 0 if got else 1
                problems.append(
                    f"{pin.key} = {pin.version}: the serving image's wheel set resolves {pin.check.package} "
                    f"{got or 'not at all'}"
                )
        elif pin.key in answers:
            answer = answers[pin.key]
            counts[answer.status] += 1
            if answer.status is not Status.RESOLVED:
                detail.append(f"  {answer.status.value}: {pin.key} = {pin.version}: {answer.detail}")
    if resolved_set.failure and not resolved_set.now:
        problems.append(f"the serving image's wheel set does not resolve: {resolved_set.failure}")
    elif resolved_set.now:
        detail.append(f"  not checkable now: the serving image's wheel set: {resolved_set.failure}")
    resolved, unpublished, now = counts[Status.RESOLVED], counts[Status.UNPUBLISHED], counts[Status.NOW]
    print(
        f"versions: {len(every)} pinned, {resolved} resolved, {offline} not checkable offline, "
        f"{unpublished} unpublished, {now} not checkable now"
    )
    for line in detail:
        print(line)
    for problem in problems:
        print(f"  PROBLEM {problem}")
    return 1 if counts[Status.UNPUBLISHED] or problems else 0
