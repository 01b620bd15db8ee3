"""Run the agentic API as its rendered container would run: a root file system that is read-only
(the machine's /usr, /etc and the library folders bound read-only on an otherwise empty root, the
binary at /app), the rendered user and group with no capabilities and no new privileges, and
writable only where the container mounts an emptyDir (a tmpfs of the volume's size limit at each
rendered mountPath). Only the rendered environment is set (`environment`), and HOME names a folder
that does not exist (the image's user may have none).

It runs inside a mount namespace of its own (`unshare --mount`), so nothing is mounted on the
host, and inside the network namespace the caller names, so its port is the rendered one.
"""

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The machine's folders the container's root is built from (read-only); on a merged-/usr system
# /bin, /lib and /lib64 are symlinks into /usr and are copied as symlinks.
ROOT_FOLDERS = ("usr", "bin", "sbin", "lib", "lib64", "etc")
APP = "/app"
ABSENT_HOME = "/nonexistent-home"


@dataclass(frozen=True)
class Mount:
    path: str
    size: str
    """tmpfs `size=` (an emptyDir's sizeLimit in bytes or with a k/m/g suffix)."""


def tmpfs_size(size_limit: str | None) -> str:
    """An emptyDir sizeLimit (`1Gi`, `16Mi`) as a tmpfs size; 64m without one."""
    if not size_limit:
        return "64m"
    units = {"Ki": "k", "Mi": "m", "Gi": "g"}
    for suffix, unit in units.items():
        if size_limit.endswith(suffix):
            return size_limit.removesuffix(suffix) + unit
    return size_limit


def script(binary: Path, args: Sequence[str], mounts: Sequence[Mount], uid: int, gid: int) -> str:
    """The shell script that builds the root and starts the binary in it (pure)."""
    q = shlex.quote
    lines = [
        "set -e",
        "mount --make-rprivate /",
        # The new root is a tmpfs over /mnt, seen in this mount namespace only: nothing is left
        # behind on the host.
        "R=/mnt",
        'mount -t tmpfs -o size=4m,mode=755 rootfs "$R"',
    ]
    for name in ROOT_FOLDERS:
        lines.append(
            f'if [ -L /{name} ]; then cp -P /{name} "$R/{name}"; elif [ -d /{name} ]; then '
            f'mkdir "$R/{name}"; mount --rbind /{name} "$R/{name}"; mount -o remount,bind,ro "$R/{name}"; fi'
        )
    lines += [
        f'mkdir -p "$R/proc" "$R/dev" "$R{APP}"',
        'mount -t proc proc "$R/proc"',
        'mount --rbind /dev "$R/dev"',
        f'mount --bind {q(str(binary.parent))} "$R{APP}"',
        f'mount -o remount,bind,ro "$R{APP}"',
    ]
    for m in mounts:
        lines += [
            f'mkdir -p "$R"{q(m.path)}',
            f'mount -t tmpfs -o size={q(m.size)},mode=1777 emptydir "$R"{q(m.path)}',
        ]
    lines.append('mount -o remount,ro "$R"')
    command = " ".join(q(a) for a in [f"{APP}/{binary.name}", *args])
    lines.append(
        f'exec chroot "$R" setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs '
        f"--inh-caps=-all --bounding-set=-all {command}"
    )
    return "\n".join(lines) + "\n"


def environment(env: Mapping[str, str]) -> dict[str, str]:
    """The process environment: the rendered variables only (passed to the process, never on a
    command line: the connection string holds a password), HOME a folder that does not exist."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": ABSENT_HOME, **env}


def argv(netns: str, shell_script: str) -> list[str]:
    """The command that runs the script in network namespace `netns` and a mount namespace of
    its own."""
    return ["ip", "netns", "exec", netns, "unshare", "--mount", "sh", "-c", shell_script]
