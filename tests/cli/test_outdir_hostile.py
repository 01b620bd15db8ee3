"""`--out` under hostile conditions: a bind mount (same device as its parent) is refused before
rendering; renders racing on one output directory both finish, one whole output in place."""

import os
import threading
from pathlib import Path

import pytest

from llmd_fleet.cli import outdir
from llmd_fleet.cli.outdir import OutputDirError, ensure_replaceable, read_output, write_atomically


def test_a_bind_mount_is_refused_as_a_mount_point(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    assert not os.path.ismount(out)  # what os.path.ismount sees of a same-device bind mount
    monkeypatch.setattr(outdir, "_mount_points", lambda: {os.path.realpath(out)})
    try:
        ensure_replaceable(out)
    except OutputDirError as exc:
        assert "is a mount point, which cannot be replaced" in str(exc)
    else:
        raise AssertionError("a bind mount was accepted")


def test_the_mount_table_is_read():
    points = outdir._mount_points()
    assert "/" in points and "/proc" in points


def test_renders_racing_on_one_out_both_finish_whole(tmp_path):
    out = tmp_path / "out"
    errors: list[BaseException] = []

    def render(n: int) -> None:
        try:
            for i in range(15):
                files = {f"manifests/{k}.yaml": f"writer {n} round {i}\n" for k in range(20)}
                write_atomically(files, out)
        except BaseException as exc:  # reported below
            errors.append(exc)

    writers = [threading.Thread(target=render, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    texts = set(read_output(out).values())
    assert len(texts) == 1  # one render's whole output, never a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no sibling left behind


def test_a_failed_write_leaves_no_sibling(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_atomically({"a.yaml": "1\n"}, out)
    real = Path.write_text

    def full(self: Path, *args, **kwargs):
        if self.name == "b.yaml":
            raise OSError(28, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically({"a.yaml": "2\n", "b.yaml": "2\n"}, out)
    assert read_output(out) == {"a.yaml": "1\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
