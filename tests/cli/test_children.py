"""Children die with their parent: `check`'s policy pack on SIGINT, SIGTERM, SIGHUP and SIGKILL
of `llmd-fleet check`; any `children.popen` child when its parent is killed. One line, no traceback."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REFERENCE_STACK, REPO


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _wait_for_pack(check: "subprocess.Popen[str]", seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for child in _children(check.pid):
            if "pulumi.policy" in _cmdline(child):
                return child
        assert check.poll() is None, check.communicate()
        time.sleep(0.05)
    raise AssertionError("the policy pack never started")


def _sigint_as_at_a_terminal() -> None:
    """A shell without job control starts background commands with SIGINT ignored, and Python
    keeps an ignored SIGINT ignored: a test run started that way (`make test &` in a script) would
    send its SIGINT into nothing. `check` started from a terminal has the default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's prctl")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_policy_pack_dies_with_check(signum, tmp_path):
    check = subprocess.Popen(
        [sys.executable, "-m", "llmd_fleet.cli.main", "check", REFERENCE_STACK, "--out", str(tmp_path / "o")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_as_at_a_terminal,
    )
    try:
        pack = _wait_for_pack(check)
        check.send_signal(signum)
        _, err = check.communicate(timeout=30)
        assert _wait_gone(pack), f"the policy pack {pack} outlived check"
    finally:
        if check.poll() is None:
            check.kill()
            check.wait()
    if signum == signal.SIGKILL:
        assert check.returncode == -signal.SIGKILL
        return
    assert "Traceback" not in err, err
    assert err.splitlines()[-1] == (
        f"llmd-fleet: interrupted ({signal.Signals(signum).name}): stopped, child processes ended"
    )
    assert check.returncode == 1


PARENT = """
import sys, time
from llmd_fleet.cli.children import popen
child = popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's prctl")
def test_a_popen_child_dies_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _wait_gone(child), "the child outlived its parent"


# The twin's control plane outlives `twin up` by design (`twin down` stops it by its recorded
# pids and process groups, docs/twin.md); every other long-lived child is started by `popen`.
DETACHED = {"devtools/twin/cluster.py"}


def test_every_long_lived_child_is_started_by_children_popen():
    """`subprocess.run` children are killed when the interrupt reaches it (SIGTERM and SIGHUP raise
    it as SIGINT does); a `Popen` child must die with its parent, so only `popen` starts one."""
    offenders = []
    for tree in ("components", "devtools"):
        for path in sorted((REPO / tree).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            if rel in DETACHED or rel.endswith("cli/children.py"):
                continue
            if "subprocess.Popen(" in path.read_text() or "asyncio.create_subprocess" in path.read_text():
                offenders.append(rel)
    assert offenders == []
