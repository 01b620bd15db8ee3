"""A command-line tool installed from one pinned wheel into its own cached venv (checkov, the
agentic API server): the build both share, so each tool module states only what differs.

The venv lives in the tool cache (devtools/tool_cache.py) under `<name>-<key>`, the key hashing the
build recipe, `<package>==<version>` and the Python version, so a version bump builds beside the
old environment. Build: a venv from Python 3.11, `pip install <package>==<version>`, then
`<command> --version` must print what the tool prints for that version; only then is the
environment marked complete. pip's output goes to `<name>-<key>.log` beside it.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from devtools.tool_cache import build_announced, cache_key, cache_root
from devtools.vllm_check.env import EnvError, base_python, step

PYTHON_VERSION = (3, 11)


@dataclass(frozen=True)
class PipTool:
    name: str
    """The cache directory's prefix and the tool's name in messages."""
    package: str
    """The wheel pip installs, at the pinned version."""
    command: str
    """The executable the wheel puts in the venv's bin/."""
    recipe: str
    """The build steps as hashed into the key: change this text when the steps change."""
    reports: Callable[[str], str]
    """What `<command> --version` prints for a version."""
    pinned_by: str
    """Where the version is pinned, for the error when the binary disagrees."""

    def key(self, version: str, python: Sequence[int] = PYTHON_VERSION) -> str:
        """16 hex digits over everything that decides the environment's contents."""
        return cache_key(
            self.recipe.encode(),
            f"{self.package}=={version}".encode(),
            ".".join(map(str, python[:2])).encode(),
        )

    def env_dir(self, version: str) -> Path:
        return cache_root() / f"{self.name}-{self.key(version)}"

    def executable(self, env: Path) -> Path:
        return env / "bin" / self.command

    def build(self, target: Path, version: str) -> None:
        """Build the environment into `target` (which must not exist)."""
        log = target.with_name(target.name + ".log")
        log.write_text(f"building {target}\n")
        python = target / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        step("create the venv", [base_python(), "-m", "venv", str(target)], log)
        step(f"install {self.package}=={version}", [*pip, f"{self.package}=={version}"], log)
        reported = step(
            f"run {self.command} --version", [str(self.executable(target)), "--version"], log
        ).strip()
        if reported != self.reports(version):
            raise EnvError(
                f"the environment's {self.command} reports {reported!r}, {self.pinned_by} pins {version}"
            )

    def ensure(self, version: str) -> Path:
        """The tool's executable, building the environment first if needed."""
        target = self.env_dir(version)
        build_announced(
            target,
            f"{self.name} {version} environment",
            lambda path: self.build(path, version),
            f"{self.package}=={version}\n",
        )
        return self.executable(target)
