"""Child processes die with their parent, and a signal ends a command like Ctrl-C.

Two mechanisms, used together by every command that starts a process (the policy pack of
`check`, the devtools' servers, simulators and relays):

- `popen` starts a child that the kernel kills (SIGKILL) when its parent dies, however it dies,
  SIGKILL included (Linux `prctl(PR_SET_PDEATHSIG)`, set between fork and exec); a child whose
  parent is already gone when it starts exits at once;
- `handle_signals` turns SIGTERM and SIGHUP (what `timeout`, CI cancellation and a closed terminal
  send) into `Interrupted`, a KeyboardInterrupt like Ctrl-C's SIGINT, so every `finally` runs and
  stops the children it owns (their process groups too) before the command exits; `main` prints
  one line for it, never a traceback.
"""

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop (SIGINT, SIGTERM or SIGHUP)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def handle_signals() -> None:
    """SIGTERM and SIGHUP raise Interrupted in the main thread, as SIGINT raises KeyboardInterrupt."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise)


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line a command prints when it was stopped by a signal."""
    name = exc.args[0] if isinstance(exc, Interrupted) else "SIGINT"
    return f"interrupted ({name}): stopped, child processes ended"


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child die with this process (None off Linux). `prctl` is
    looked up here, in the parent: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the death signal was set
            os._exit(1)

    return preexec


def popen(args: Any, **kwargs: Any) -> "subprocess.Popen[Any]":
    """`subprocess.Popen` for a child that must not outlive this process (the main thread starts
    it: the death signal follows the thread that forked)."""
    kwargs.setdefault("preexec_fn", die_with_parent())
    return subprocess.Popen(args, **kwargs)
