"""Downloads that retry from scratch (devtools/download_retry.py): a real corrupted artifact in
Go's module cache, and each tool's own failure messages."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devtools import download_retry, tool_cache
from devtools.download_retry import diagnose

MODULE = "example.invalid/Dep"  # an upper-case letter: the module cache escapes it ("!dep")
VERSION = "v1.0.0"


def _proxy(root: Path, source: str) -> None:
    """A file-system module proxy serving MODULE@VERSION with `source` as its one Go file."""
    folder = root / "example.invalid" / "!dep" / "@v"
    folder.mkdir(parents=True)
    (folder / "list").write_text(f"{VERSION}\n")
    (folder / f"{VERSION}.info").write_text(f'{{"Version":"{VERSION}","Time":"2026-01-01T00:00:00Z"}}\n')
    (folder / f"{VERSION}.mod").write_text(f"module {MODULE}\n\ngo 1.21\n")
    with zipfile.ZipFile(folder / f"{VERSION}.zip", "w") as archive:
        archive.writestr(f"{MODULE}@{VERSION}/go.mod", f"module {MODULE}\n\ngo 1.21\n")
        archive.writestr(f"{MODULE}@{VERSION}/dep.go", source)


@pytest.fixture
def go_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A main module needing MODULE from a loopback-free file proxy, its own module cache, go.sum
    written by `go mod tidy`."""
    if shutil.which("go") is None:
        pytest.fail("Go is needed to build the project's tools and is not on PATH")
    proxy, main = tmp_path / "proxy", tmp_path / "main"
    _proxy(proxy, 'package dep\n\nconst Word = "whole"\n')
    main.mkdir()
    (main / "go.mod").write_text(f"module example.invalid/main\n\ngo 1.21\n\nrequire {MODULE} {VERSION}\n")
    (main / "main.go").write_text(
        f'package main\n\nimport dep "{MODULE}"\n\nfunc main() {{ println(dep.Word) }}\n'
    )
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    monkeypatch.setenv("GOPROXY", f"file://{proxy}")
    monkeypatch.setenv("GOSUMDB", "off")
    monkeypatch.setenv("GOFLAGS", "-modcacherw")
    monkeypatch.setenv("GOTOOLCHAIN", "local")
    subprocess.run(["go", "mod", "tidy"], cwd=main, check=True, capture_output=True)
    return main


def test_a_corrupted_cached_module_zip_is_removed_and_fetched_again(
    go_module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "modcache"
    cached_zip = cache / "cache" / "download" / "example.invalid" / "!dep" / "@v" / f"{VERSION}.zip"
    assert cached_zip.is_file()
    # What a truncated download leaves: a zip in the cache that is not the one go.sum names, and
    # no extracted tree yet.
    shutil.rmtree(cache / f"example.invalid/!dep@{VERSION}", ignore_errors=True)
    with zipfile.ZipFile(cached_zip, "w") as archive:
        archive.writestr(f"{MODULE}@{VERSION}/go.mod", f"module {MODULE}\n\ngo 1.21\n")
        archive.writestr(f"{MODULE}@{VERSION}/dep.go", 'package dep\n\nconst Word = "cut"\n')
    (cached_zip.parent / f"{VERSION}.ziphash").unlink()
    log = tmp_path / "build.log"
    log.write_text("")

    status = tool_cache.go_build(".", tmp_path / "bin" / "main", go_module, "-s -w", log)

    assert status == 0, log.read_text()
    err = capsys.readouterr().err
    assert f"retry: go {MODULE}@{VERSION}: checksum mismatch; once more from scratch\n" in err
    assert "checksum mismatch" in log.read_text()  # the first attempt's failure stays in the log
    built = subprocess.run([str(tmp_path / "bin" / "main")], capture_output=True, text=True, check=True)
    assert built.stderr == "whole\n"  # the proxy's module, not the corrupted one


def test_a_compile_error_is_not_retried(
    go_module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (go_module / "main.go").write_text("package main\n\nfunc main() { undefined() }\n")
    log = tmp_path / "build.log"
    log.write_text("")
    assert tool_cache.go_build(".", tmp_path / "main", go_module, "-s -w", log) != 0
    assert "retry:" not in capsys.readouterr().err
    assert log.read_text().count("undefined: undefined") == 1  # one attempt


def test_a_failing_command_without_a_download_failure_runs_once(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = (
        f"import pathlib,sys; p=pathlib.Path({str(counter)!r}); "
        "p.write_text(p.read_text()+'x' if p.exists() else 'x'); sys.exit(3)"
    )
    result = download_retry.run("pip", [sys.executable, "-c", script], output=lambda _: None)
    assert result.returncode == 3
    assert counter.read_text() == "x"


def test_a_download_failure_runs_once_more_and_says_so(tmp_path: Path) -> None:
    """The second run's result is returned; the retry line names the tool, artifact and reason."""
    counter = tmp_path / "runs"
    script = (
        f"import pathlib,sys; p=pathlib.Path({str(counter)!r}); n=len(p.read_text()) if p.exists() else 0; "
        "p.write_text('x'*(n+1)); "
        "sys.exit(0) if n else (print('Collecting torch==2.9.1+cpu'), print('ERROR: THESE PACKAGES DO NOT "
        "MATCH THE HASHES FROM THE REQUIREMENTS FILE.'), sys.exit(1))"
    )
    said: list[str] = []
    result = download_retry.run(
        "pip", [sys.executable, "-c", script], output=lambda _: None, announce=said.append
    )
    assert result.returncode == 0
    assert counter.read_text() == "xx"
    assert said == ["retry: pip torch: hash mismatch; once more from scratch"]
    assert result.args[-1] == "--no-cache-dir"


# Each tool's own wording of a failed download, as printed (trimmed to the lines that matter).
PIP_HASHES = """\
Collecting torch==2.9.1+cpu
  Downloading torch-2.9.1%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl (184.4 MB)
ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the
    torch==2.9.1+cpu from https://files.invalid/torch-2.9.1.whl:
        Expected sha256 aaaa
             Got        bbbb
"""
PIP_TIMEOUT = """\
Collecting checkov==9.9.9
  Downloading checkov-9.9.9-py3-none-any.whl (2.1 MB)
ReadTimeoutError: HTTPSConnectionPool(host='files.invalid', port=443): Read timed out.
"""
UV_HASH = """\
error: Failed to prepare distributions
  Caused by: Failed to download `torch==2.9.1`
  Caused by: Hash mismatch for `torch==2.9.1`
"""
GO_CHECKSUM = """\
go: downloading github.com/aws/aws-sdk-go-v2 v1.43.0
verifying github.com/aws/aws-sdk-go-v2@v1.43.0: checksum mismatch
	downloaded: h1:aaa
	go.sum:     h1:bbb
"""
GO_EOF = """\
go: downloading k8s.io/kubernetes v9.9.9
k8s.io/kubernetes@v9.9.9: unexpected EOF
"""
NPM_INTEGRITY = """\
npm ERR! code EINTEGRITY
npm ERR! sha512-abc integrity checksum failed when using sha512: wanted sha512-abc but got sha512-d
npm ERR! tarball @pulumi/pulumi@3.260.0
"""


@pytest.mark.parametrize(
    ("tool", "output", "artifact", "reason"),
    [
        ("pip", PIP_HASHES, "torch", "hash mismatch"),
        ("pip", PIP_TIMEOUT, "checkov", "timeout"),
        ("uv", UV_HASH, "torch", "hash mismatch"),
        ("go", GO_CHECKSUM, "github.com/aws/aws-sdk-go-v2@v1.43.0", "checksum mismatch"),
        ("go", GO_EOF, "k8s.io/kubernetes@v9.9.9", "truncated download"),
        ("npm", NPM_INTEGRITY, "@pulumi/pulumi@3.260.0", "hash mismatch"),
    ],
)
def test_each_tools_download_failure_is_named(tool: str, output: str, artifact: str, reason: str) -> None:
    diagnosis = diagnose(tool, output)
    assert diagnosis is not None
    assert (diagnosis.artifact, diagnosis.reason) == (artifact, reason)


@pytest.mark.parametrize(
    ("tool", "output"),
    [
        ("go", "./main.go:3:15: undefined: undefined\n"),
        ("pip", "ERROR: Could not find a version that satisfies the requirement nothing==9\n"),
        ("uv", "error: No solution found when resolving dependencies\n"),
    ],
)
def test_other_failures_are_not_download_failures(tool: str, output: str) -> None:
    assert diagnose(tool, output) is None


def test_the_command_line_refuses_an_unknown_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert download_retry.main(["cargo", "--", "true"]) == 2
    assert "usage:" in capsys.readouterr().err
