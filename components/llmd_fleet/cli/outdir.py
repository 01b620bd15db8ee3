"""The output directory of `llmd-fleet render`: written atomically, and only when it is ours.

The directory is replaced only after everything rendered, so a failure leaves the previous output
as it was. It is replaced only when this command wrote it (it holds the marker file
`.llmd-fleet-render`, which every render writes) or it is empty or new: any other directory is
refused, never deleted. Whether it can be written is checked before any rendering.

The swap uses two fixed siblings of OUT: `.OUT.llmd-new` (the new output, written whole first)
and `.OUT.llmd-old` (the previous output, while the new one moves in). An interrupt at any point
leaves OUT whole (old or new) or, between the two renames, OUT absent and `.OUT.llmd-old` whole:
the next run puts it back first (`recover`), and so can `mv .OUT.llmd-old OUT` by hand.
Standard library only, so the command line can import it before anything heavy.
"""

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Written into every output directory: only a directory holding it is ever replaced.
OUTPUT_MARKER = ".llmd-fleet-render"
_MARKER_TEXT = "Written by `llmd-fleet render`; the whole directory is replaced on the next render.\n"


_KEY_PREFIX = "key: "


def recorded_key(out_dir: Path) -> str | None:
    """The render key a complete output directory records in its marker, or None (no output of
    ours there, or one written without a key)."""
    if not _ours(out_dir):
        return None
    for line in (out_dir / OUTPUT_MARKER).read_text(errors="replace").splitlines():
        if line.startswith(_KEY_PREFIX):
            return line[len(_KEY_PREFIX) :].strip() or None
    return None


def read_output(out_dir: Path) -> dict[str, str]:
    """Relative path -> text of every file a render wrote in out_dir (the marker aside)."""
    return {
        str(path.relative_to(out_dir)): path.read_text()
        for path in sorted(out_dir.rglob("*"))
        if path.is_file() and path.name != OUTPUT_MARKER
    }


class OutputDirError(Exception):
    """The output directory is not one this command may replace, or cannot be written."""


def _new(out_dir: Path) -> Path:
    return out_dir.with_name(f".{out_dir.name}.llmd-new")


def _old(out_dir: Path) -> Path:
    return out_dir.with_name(f".{out_dir.name}.llmd-old")


def _ours(directory: Path) -> bool:
    return directory.is_dir() and not directory.is_symlink() and (directory / OUTPUT_MARKER).is_file()


def recover(out_dir: Path) -> None:
    """Finish or undo a swap an interrupt cut short: the previous output back in place when OUT
    is missing; a half-written new output removed."""
    old, new = _old(out_dir), _new(out_dir)
    if not out_dir.exists() and not out_dir.is_symlink() and _ours(old):
        old.rename(out_dir)
    if _ours(old):
        shutil.rmtree(old)
    for leftover in (old, new):  # an empty one is nothing's output
        if leftover.is_dir() and not leftover.is_symlink() and not any(leftover.iterdir()):
            leftover.rmdir()
    if _ours(new):
        shutil.rmtree(new)


def _owned_output(out_dir: Path) -> bool:
    """Whether out_dir may be replaced: new, empty, or written by a render (its marker)."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        return False
    return not out_dir.exists() or _ours(out_dir) or not any(out_dir.iterdir())


def _mount_points() -> set[str]:
    """Every mount point of this process (Linux /proc/self/mountinfo, field 5, octal escapes
    decoded); empty where there is no such file."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return set()
    points = set()
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def _is_mount_point(path: Path) -> bool:
    """A mount point, bind mounts included: `os.path.ismount` compares devices and inodes with the
    parent, which a bind mount of a directory on the same filesystem shares; renaming either ends
    in `Device or resource busy`."""
    return os.path.ismount(path) or os.path.realpath(path) in _mount_points()


def _writability_problem(out_dir: Path) -> str | None:
    """Why out_dir cannot be written and swapped in, or None."""
    resolved = Path(os.path.abspath(out_dir))
    if resolved == Path(os.path.abspath(Path.cwd())) or out_dir.name in {"", ".", ".."}:
        return "is the current directory or its parent; name a directory below it"
    if resolved.exists() and _is_mount_point(resolved):
        return "is a mount point, which cannot be replaced; name a directory inside it"
    ancestor = resolved.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"is under {ancestor}, which is a file"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be written: {ancestor} is not writable"
    for sibling in (_new(resolved), _old(resolved)):
        empty_dir = sibling.is_dir() and not sibling.is_symlink() and not any(sibling.iterdir())
        if (sibling.exists() or sibling.is_symlink()) and not _ours(sibling) and not empty_dir:
            return f"{sibling} exists and was not written by this command; move it away"
    return None


def ensure_replaceable(out_dir: Path) -> None:
    """Raise OutputDirError, touching nothing, when out_dir holds anything a render did not
    write (a typo such as `--out .` must never delete a working tree) or cannot be written.
    Recovers an interrupted swap first, in its turn (see `write_atomically`)."""
    if not out_dir.parent.is_dir():
        _ensure_replaceable(out_dir)  # nothing there to recover, no one to take turns with
        return
    with _turn(out_dir.parent):
        _ensure_replaceable(out_dir)


def _ensure_replaceable(out_dir: Path) -> None:
    if problem := _writability_problem(out_dir):
        raise OutputDirError(f"--out {out_dir}: {problem}; nothing was changed")
    recover(out_dir)
    if not _owned_output(out_dir):
        raise OutputDirError(
            f"--out {out_dir}: exists and is not a directory this command wrote (no {OUTPUT_MARKER} "
            "file); nothing was changed. Choose a new or empty directory"
        )


def write_atomically(files: dict[str, str], out_dir: Path, key: str | None = None) -> None:
    """Write all files to the sibling `.OUT.llmd-new`, then swap it in place of out_dir (which
    must pass ensure_replaceable): out_dir -> `.OUT.llmd-old`, new -> out_dir, old removed. The
    marker records `key` (the render's key, llmd_fleet/cli/render_key.py) when given.

    Renders into one parent directory take turns (an exclusive lock on the parent, held from the
    check to the swap): two renders racing on one OUT both finish, the later one's output in
    place, instead of one removing the other's half-written `.OUT.llmd-new`."""
    ensure_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _turn(out_dir.parent):
        _ensure_replaceable(out_dir)  # again, now that no other render is between check and swap
        _write_and_swap(files, out_dir, key)


@contextmanager
def _turn(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory` (flock on the directory itself: no lock file)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_and_swap(files: dict[str, str], out_dir: Path, key: str | None) -> None:
    new, old = _new(out_dir), _old(out_dir)
    try:
        new.mkdir()
        # The marker first: a new output an interrupt cut short is recognised and removed.
        (new / OUTPUT_MARKER).write_text(_MARKER_TEXT + (f"{_KEY_PREFIX}{key}\n" if key else ""))
        for rel, text in sorted(files.items()):
            target = new / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if out_dir.exists():
        out_dir.rename(old)
    try:
        new.rename(out_dir)
    except OSError:
        if old.exists() and not out_dir.exists():
            old.rename(out_dir)  # put the earlier output back before reporting
        shutil.rmtree(new, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
