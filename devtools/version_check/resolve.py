"""The package clients asked whether one pin exists, and the serving image's wheel set resolved.

Python: `uv pip compile --no-deps` of `<package>==<version>` for the pin's Python on x86_64 Linux
(metadata only, nothing installed; uv's own cache answers what it has seen). Go: `go list -m -json
<module>@<version>` outside any module (the module cache answers what the proxy served before).
A client that fails for a reason other than "no such version" (no network, a registry that does
not answer) is asked once more; failing again, the pin is "not checkable now", never resolved.
"""

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

PLATFORM = "x86_64-manylinux_2_28"
# uv's words for a version the index does not have.
_UV_MISSING = re.compile(
    r"there is no version of|was not found in the package registry"
    r"|was not found in the provided package locations"
)
# The module proxy's and go's words for a version that does not exist.
_GO_MISSING = re.compile(
    r"not available|unknown revision|invalid version|no matching versions|404 Not Found|410 Gone"
)
_NO_VERSION = re.compile(r"there is no version of (\S+?)[,.]?(?:\s|$)")
_REQUIRED = re.compile(r"you require (\S+?)[,.]?(?:\s|$)")


class Status(Enum):
    RESOLVED = "resolved"
    UNPUBLISHED = "unpublished"
    NOW = "not checkable now"


@dataclass(frozen=True)
class Answer:
    status: Status
    detail: str = ""


def _last_line(text: str) -> str:
    lines = [line.strip().removeprefix("cause:").strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else ""


def _run(
    command: Sequence[str], stdin: str = "", env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), input=stdin, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=300
    )


def _ask(
    command: Sequence[str],
    missing: re.Pattern[str],
    stdin: str = "",
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Answer:
    detail = "timed out"
    for _ in range(2):  # one retry when the registry did not answer
        try:
            proc = _run(command, stdin, env, cwd)
        except subprocess.TimeoutExpired:
            continue
        if proc.returncode == 0:
            return Answer(Status.RESOLVED)
        if missing.search(proc.stderr):
            return Answer(Status.UNPUBLISHED, _last_line(proc.stderr))
        detail = _last_line(proc.stderr)
    return Answer(Status.NOW, detail)


def uv_env() -> dict[str, str]:
    # Never download a Python for --python-version: only the package index is asked.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}


def uv_command(python: str, *extra: str) -> list[str]:
    uv = shutil.which("uv") or "uv"
    return [
        uv,
        "pip",
        "compile",
        "--quiet",
        "--no-header",
        "--python-version",
        python,
        "--python-platform",
        PLATFORM,
        *extra,
        "-",
    ]


def python_pin(package: str, version: str, python: str) -> Answer:
    return _ask(uv_command(python, "--no-deps"), _UV_MISSING, f"{package}=={version}\n", uv_env())


def go_pin(module: str, version: str) -> Answer:
    go = shutil.which("go")
    if go is None:
        return Answer(Status.NOW, "no `go` on PATH")
    with tempfile.TemporaryDirectory(prefix="version-check-") as outside_any_module:
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GO111MODULE": "on"}
        return _ask(
            [go, "list", "-m", "-json", f"{module}@{version}"], _GO_MISSING, env=env, cwd=outside_any_module
        )


@dataclass(frozen=True)
class WheelSetResult:
    versions: dict[str, str]
    """Normalised package name -> version, when it resolved."""
    failure: str = ""
    """The requirement that cannot resolve and uv's reason, when it did not."""
    now: bool = False
    """The index did not answer (not checkable now)."""


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def unresolvable_requirement(stderr: str) -> str:
    """The requirement uv names as the one that cannot be satisfied: a version that does not exist,
    else the last of the caller's requirements uv's explanation reaches (the one that conflicts)."""
    if match := _NO_VERSION.search(stderr):
        return match.group(1)
    required = _REQUIRED.findall(stderr)
    return required[-1] if required else ""


def _reason(stderr: str) -> str:
    """uv's explanation, on one line (its `error:` and `hint:` lines left out)."""
    lines = [line.strip().removeprefix("cause:").strip() for line in stderr.splitlines()]
    return " ".join(line for line in lines if line and not line.startswith(("error:", "hint:", "warning:")))


def wheel_set(requirements: Sequence[str], python: str, index_args: Sequence[str] = ()) -> WheelSetResult:
    """`uv pip compile` of the serving image's requirements for its Python on x86_64 Linux."""
    command = uv_command(python, *index_args)
    proc = None
    for _ in range(2):
        proc = _run(command, "\n".join(requirements) + "\n", uv_env())
        if proc.returncode == 0:
            versions = {}
            for line in proc.stdout.splitlines():
                if "==" in line and not line.startswith(" "):
                    name, _, version = line.partition("==")
                    versions[normalise(name.split("[")[0])] = version.strip()
            return WheelSetResult(versions)
        if _UV_MISSING.search(proc.stderr) or "unsatisfiable" in proc.stderr:
            requirement = unresolvable_requirement(proc.stderr) or "?"
            return WheelSetResult({}, f"{requirement}: {_reason(proc.stderr)}")
    return WheelSetResult({}, _last_line(proc.stderr) if proc else "", now=True)
