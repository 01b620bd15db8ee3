"""Command lines to check and what the check found, shared by both sides of the check.

This module is imported by the project (extraction, reporting) and by the checker that runs inside
the isolated vLLM environment, so it uses the standard library only.
"""

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Origin:
    """Where a command line comes from: the pod that would exec it."""

    stack: str
    role: str = ""
    container: str = ""
    worker: int | None = None

    def __str__(self) -> str:
        parts = [
            f"role {self.role}" if self.role else "",
            f"container {self.container}" if self.container else "",
            f"worker {self.worker}" if self.worker is not None else "",
        ]
        located = ", ".join(p for p in parts if p)
        return f"{self.stack}: {located}" if located else self.stack


@dataclass(frozen=True)
class CommandLine:
    """The argv one container execs, the environment it runs with, and the ports the pod's other
    containers declare (they share the pod's network namespace)."""

    origin: Origin
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    pod_ports: tuple[tuple[int, str], ...] = ()

    @property
    def environ(self) -> dict[str, str]:
        return dict(self.env)

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": vars(self.origin),
            "argv": list(self.argv),
            "env": [list(pair) for pair in self.env],
            "pod_ports": [list(pair) for pair in self.pod_ports],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CommandLine":
        return cls(
            origin=Origin(**data["origin"]),
            argv=tuple(data["argv"]),
            env=tuple((str(k), str(v)) for k, v in data["env"]),
            pod_ports=tuple((int(p), str(what)) for p, what in data["pod_ports"]),
        )


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a command line: the offending flag (None when no single flag is to
    blame) and the message, vLLM's own where vLLM produced it."""

    flag: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Problem":
        return cls(flag=data["flag"], message=data["message"])


@dataclass(frozen=True)
class Finding:
    """A problem, located."""

    origin: Origin
    problem: Problem

    def __str__(self) -> str:
        flag = self.problem.flag or "(command line)"
        lines = self.problem.message.strip().splitlines() or ["(no message)"]
        return f"{self.origin}: {flag}: " + "\n    ".join(line.rstrip() for line in lines)


_ARGPARSE_ARGUMENT = re.compile(r"^argument ([^\s:/]+)(?:/\S+)?: ")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)$", re.MULTILINE)
_ANY_FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9_.-]*[a-z0-9])", re.IGNORECASE)


def blamed_flag(message: str) -> str | None:
    """The flag an error message of vLLM's parser or pre-engine checks is about.

    argparse names it ("argument --all2all-backend: invalid choice ...", "unrecognized arguments:
    --x 1"); vLLM's own checks mention it in the text ("Error: --enable-auto-tool-choice requires
    --tool-call-parser"), the first flag being the one at fault.
    """
    if match := _ARGPARSE_ARGUMENT.match(message):
        return match.group(1)
    if match := _UNRECOGNIZED.search(message):
        words = match.group(1).split()
        flags = [w for w in words if w.startswith("-")]
        return (flags or words or [None])[0]
    if match := _ANY_FLAG.search(message):
        return match.group(1).split("=", 1)[0]
    return None
