"""Downloads that retry from scratch: a tool build that failed while fetching an artifact (a
truncated wheel, a module zip whose hash does not match, a dropped connection) removes that
artifact from the tool's own cache and runs once more.

    python3 devtools/download_retry.py uv -- uv sync --frozen     (standard library only: `make setup`
                                                                   runs it before the venv exists)

`run` is the one way: it runs the command, and when it fails with a download failure it knows
(`diagnose`), it prints

    retry: <tool> <artifact>: <reason>; once more from scratch

on stderr, cleans the artifact (`pip cache remove <name>` and a retry without pip's cache;
`uv cache clean <name>` and `--refresh-package <name>`; the module's files under the Go module
cache's download directory and its extracted tree; `npm cache clean --force`) and runs the command
once more. Any other failure is returned as it is: a compile error is not retried.
"""

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("pip", "uv", "go", "npm")

# Messages that mean an artifact did not arrive whole (each tool's own wording), and the reason
# printed for them.
_REASONS: tuple[tuple[str, str], ...] = (
    (r"THESE PACKAGES DO NOT MATCH THE HASHES", "hash mismatch"),
    (r"[Hh]ash mismatch|EINTEGRITY|integrity checksum failed", "hash mismatch"),
    (r"checksum mismatch", "checksum mismatch"),
    (r"BadZipFile|not a valid zip file|zip: not a valid|[Ii]nvalid zip|bad zip", "corrupt archive"),
    (r"IncompleteRead|unexpected EOF|ContentTooShort|incomplete body|[Tt]runcated", "truncated download"),
    (r"Connection reset|ConnectionResetError|connection reset by peer", "connection reset"),
    (r"ReadTimeout|[Rr]ead timed out|i/o timeout|TLS handshake timeout|operation timed out", "timeout"),
    (
        r"\b(?:500|502|503|504) (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Time-?out)",
        "server error",
    ),
    (r"ECONNRESET|ETIMEDOUT|ECONNREFUSED", "network error"),
)

# Where each tool names the artifact it was fetching, most specific first.
_ARTIFACTS: dict[str, tuple[str, ...]] = {
    "pip": (
        r"^\s+([A-Za-z0-9][A-Za-z0-9._-]*)==[^\s:]+ from ",  # the hash-mismatch table
        r"(?:Downloading|Collecting) ([A-Za-z0-9][A-Za-z0-9._-]*?)"
        r"(?:-\d[^\s/]*\.(?:whl|tar\.gz|zip)|[=<>! ]|$)",
    ),
    "uv": (
        r"`([A-Za-z0-9][A-Za-z0-9._-]*)==[^`]+`",
        r"[Hh]ash mismatch for `([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"(?:download|fetch|build)(?:ing)? `?([A-Za-z0-9][A-Za-z0-9._-]*)`?",
    ),
    "go": (
        r"(?:verifying|downloading) ([^\s@:]+)@(v[^\s:]+)",
        r"([a-z0-9.-]+\.[a-z]{2,}/[^\s@:]+)@(v[^\s:/]+)",
    ),
    "npm": (r"(?:integrity|tarball).*?(@?[a-z0-9][a-z0-9._/-]*@\d[^\s'\"]*)", r"(@?[a-z0-9][a-z0-9._-]*)@\d"),
}


@dataclass(frozen=True)
class Diagnosis:
    """A failed download: what was being fetched and why it failed."""

    tool: str
    artifact: str
    reason: str

    def line(self) -> str:
        return f"retry: {self.tool} {self.artifact}: {self.reason}; once more from scratch"


def diagnose(tool: str, output: str) -> Diagnosis | None:
    """The download failure `output` (a failed run's combined output) shows, or None when the
    failure is not a download's (then nothing is retried)."""
    reason = next((why for pattern, why in _REASONS if re.search(pattern, output)), None)
    if reason is None:
        return None
    artifact = ""
    for pattern in _ARTIFACTS[tool]:
        found = re.findall(pattern, output, re.M)
        if found:
            last = found[-1]  # the artifact in flight when the run stopped
            artifact = "@".join(last) if isinstance(last, tuple) else last
            break
    return Diagnosis(tool, artifact or "(unnamed artifact)", reason)


def _escape_module(path: str) -> str:
    """The module cache's case encoding: each upper-case letter as '!' and its lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m[0].lower(), path)


def _go_env(name: str) -> str:
    return subprocess.run(["go", "env", name], capture_output=True, text=True, check=True).stdout.strip()


def _remove_tree(path: Path) -> None:
    """Remove a tree the module cache made read-only (every directory made writable first)."""
    for root, dirs, _files in os.walk(path):
        os.chmod(root, stat.S_IRWXU)
        for name in dirs:
            os.chmod(os.path.join(root, name), stat.S_IRWXU)
    shutil.rmtree(path)


def clean_go(artifact: str, modcache: Path | None = None) -> list[Path]:
    """Remove `module@version` from the Go module cache: its downloaded files (zip, ziphash, mod,
    info) and its extracted tree. The paths removed."""
    module, _, version = artifact.partition("@")
    if not module or not version:
        return []
    root = modcache or Path(_go_env("GOMODCACHE"))
    escaped = _escape_module(module)
    removed: list[Path] = []
    download = root / "cache" / "download" / escaped / "@v"
    for suffix in (".zip", ".ziphash", ".mod", ".info", ".lock", ".partial"):
        path = download / f"{version}{suffix}"
        if path.exists():
            path.chmod(stat.S_IRWXU)
            path.unlink()
            removed.append(path)
    tree = root / f"{escaped}@{version}"
    if tree.exists():
        _remove_tree(tree)
        removed.append(tree)
    return removed


def _package_name(artifact: str) -> str:
    return re.split(r"[=<>!@ ]", artifact, maxsplit=1)[0]


def cleaned_command(
    diagnosis: Diagnosis, command: Sequence[str], env: dict[str, str] | None = None
) -> list[str]:
    """Clean `diagnosis.artifact` from its tool's cache and return the command to run once more."""
    tool, name = diagnosis.tool, _package_name(diagnosis.artifact)
    named = diagnosis.artifact != "(unnamed artifact)"
    if tool == "pip":
        python = command[0] if "pip" in command[1:3] else sys.executable
        if named:
            _quietly([python, "-m", "pip", "cache", "remove", name], env)
        # pip's HTTP cache is not keyed by package: the retry does not read it at all.
        return [*command, "--no-cache-dir"]
    if tool == "uv":
        if named:
            _quietly([command[0], "cache", "clean", name], env)
            return [*command, "--refresh-package", name]
        return [*command, "--refresh"]
    if tool == "go":
        if named:
            clean_go(diagnosis.artifact)
        return list(command)
    _quietly(["npm", "cache", "clean", "--force"], env)
    return list(command)


def _quietly(command: Sequence[str], env: dict[str, str] | None) -> None:
    """A cache-cleaning command; its failure is not the build's (the retry says what happens)."""
    subprocess.run(list(command), capture_output=True, env=env, check=False)


def _run(
    command: Sequence[str], cwd: Path | None, env: dict[str, str] | None
) -> subprocess.CompletedProcess[str]:
    """`command` with stdout and stderr combined, stdin closed (a build never prompts)."""
    return subprocess.run(
        list(command),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )


def run(
    tool: str,
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    output: Callable[[str], None] | None = None,
    announce: Callable[[str], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `command`; when it fails on a download (`diagnose`), clean that artifact from `tool`'s
    cache, announce the retry line (stderr unless `announce` is given) and run once more. Each
    run's combined output goes to `output` (stdout unless given); the last run's result."""
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    emit = output or (lambda text: sys.stdout.write(text))
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    result = subprocess.run(
        list(command),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    emit(result.stdout)
    if result.returncode == 0:
        return result
    diagnosis = diagnose(tool, result.stdout)
    if diagnosis is None:
        return result
    say(diagnosis.line())
    again = cleaned_command(diagnosis, command, env)
    result = _run(again, cwd, env)
    emit(result.stdout)
    return result


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[0] not in TOOLS or argv[1] != "--":
        print(f"usage: download_retry.py {{{'|'.join(TOOLS)}}} -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    return run(argv[0], argv[2:]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
