"""The output directory of `llmd-fleet render`: written atomically, and only when it is ours.

The directory is replaced only after everything rendered, so a failure leaves the previous output
as it was. It is replaced only when this command wrote it (it holds the marker file
`.llmd-fleet-render`) or it is empty or new: any other directory is refused, never deleted.
Standard library only, so the command line can import it before anything heavy.
"""

import shutil
import tempfile
from pathlib import Path

# Written into every output directory: only a directory holding it is ever replaced.
OUTPUT_MARKER = ".llmd-fleet-render"
_MARKER_TEXT = "Written by `llmd-fleet render`; the whole directory is replaced on the next render.\n"
# What a render wrote before the marker existed: such a directory is still recognised as ours.
_RENDER_ENTRIES = frozenset({"summary.md", "manifests", "helm", "cloud", "remote"})


class OutputDirError(Exception):
    """The output directory is not one this command may replace."""


def _owned_output(out_dir: Path) -> bool:
    """Whether out_dir may be replaced: new, empty, or written by a render."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        return False
    if not out_dir.exists() or (out_dir / OUTPUT_MARKER).is_file():
        return True
    entries = {entry.name for entry in out_dir.iterdir()}
    return not entries or ("summary.md" in entries and entries <= _RENDER_ENTRIES)


def ensure_replaceable(out_dir: Path) -> None:
    """Raise OutputDirError, touching nothing, when out_dir holds anything a render did not
    write (a typo such as `--out .` must never delete a working tree)."""
    if not _owned_output(out_dir):
        raise OutputDirError(
            f"--out {out_dir}: exists and is not a directory this command wrote (no {OUTPUT_MARKER} "
            "file); nothing was changed. Choose a new or empty directory"
        )


def write_atomically(files: dict[str, str], out_dir: Path) -> None:
    """Write all files to a sibling temp dir, then swap it in place of out_dir (which must pass
    ensure_replaceable)."""
    ensure_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    holder = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.previous.", dir=out_dir.parent))
    previous = holder / "previous"
    try:
        for rel, text in sorted(files.items()):
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        (staging / OUTPUT_MARKER).write_text(_MARKER_TEXT)
        if out_dir.exists():
            out_dir.rename(previous)
        try:
            staging.rename(out_dir)
        except OSError:
            if previous.exists() and not out_dir.exists():
                previous.rename(out_dir)  # put the earlier output back before reporting
            raise
    finally:
        # Only our own temporary directories are removed: the staging copy (after a failure) and
        # the previous output that was just replaced.
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(holder, ignore_errors=True)
