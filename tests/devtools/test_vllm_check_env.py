"""The vLLM argument check's parser environment (devtools/vllm_check/env.py, deps.py): its cache
key, where torch comes from, where it lives, its isolation, and the dependency and parser-name
checks. Nothing here installs vLLM.
"""

from pathlib import Path

from devtools.vllm_check import env
from devtools.vllm_check.deps import mismatches
from llmd_fleet.versions import versions
from tests.support import REPO

# --- The parser environment --------------------------------------------------------------------------


def test_env_key_covers_version_requirements_torch_and_python():
    key = env.env_key("1.0", b"a", b"b", "torch==2.0")
    assert len(key) == 16
    assert key == env.env_key("1.0", b"a", b"b", "torch==2.0")
    others = {
        env.env_key("1.1", b"a", b"b", "torch==2.0"),
        env.env_key("1.0", b"a2", b"b", "torch==2.0"),
        env.env_key("1.0", b"a", b"b2", "torch==2.0"),
        env.env_key("1.0", b"a", b"b", "torch-2.0+cpu-cp311-cp311-linux_x86_64.whl"),
        env.env_key("1.0", b"a", b"b", "torch==2.0", python=(3, 12)),
    }
    assert key not in others and len(others) == 5


def _wheel(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"")
    return directory / name


def test_a_local_cpu_torch_wheel_is_used_when_there(tmp_path):
    wheels = tmp_path / "wheels"
    older = _wheel(wheels, "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    pinned = versions().build.torch
    _wheel(wheels, "torch-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl")  # a CUDA build: never taken
    _wheel(wheels, "torch-9.0.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl")  # another Python
    source = env.torch_source([str(tmp_path / "missing"), "https://example.invalid/simple", str(wheels)])
    assert source == env.TorchSource(requirement=str(older), identity=older.name)
    exact = _wheel(wheels, f"torch-{pinned}+cpu-cp311-cp311-linux_x86_64.whl")
    assert env.torch_source([f"file://{wheels}"]).requirement == str(exact)


def test_without_a_local_wheel_torch_comes_from_the_index_at_vllms_pin(tmp_path):
    pinned = versions().build.torch
    source = env.torch_source([str(tmp_path)])
    assert source == env.TorchSource(requirement=f"torch=={pinned}", identity=f"torch=={pinned}")
    # Which torch was taken decides the environment: a machine with the wheel builds another one.
    with_wheel = env.torch_source(
        [str(_wheel(tmp_path / "w", f"torch-{pinned}+cpu-cp311-cp311-linux_x86_64.whl").parent)]
    )
    assert env.env_dir(torch=source) != env.env_dir(torch=with_wheel)


def test_env_lives_in_the_cache_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMD_FLEET_CACHE_DIR", str(tmp_path))
    assert env.env_dir().parent == tmp_path and env.env_dir().name.startswith("vllm-parser-")
    monkeypatch.delenv("LLMD_FLEET_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert env.cache_root() == tmp_path / "xdg" / "llmd-fleet"
    assert REPO not in env.env_dir().parents


def test_vllm_version_comes_only_from_the_matrix():
    version = versions().vllm.version
    assert env.vllm_version() == version
    for path in sorted((REPO / "devtools" / "vllm_check").iterdir()):
        if path.is_file() and path.suffix in (".py", ".txt", ".md"):
            assert version not in path.read_text(), f"{path} hard-codes the vLLM version"
    requirements = env.REQUIREMENTS.read_text() + env.NO_DEPS_REQUIREMENTS.read_text()
    assert "vllm" not in [line.split("=")[0].strip().lower() for line in requirements.splitlines()]
    # torch is chosen by env.py (a local CPU wheel, else vLLM's own pin from the matrix).
    assert "torch" not in [line.split("=")[0].strip().lower() for line in requirements.splitlines()]


def test_child_processes_run_isolated_with_the_project_root_only(monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    environ = env.child_environ(VLLM_TARGET_DEVICE="cpu")
    assert "VIRTUAL_ENV" not in environ and "HF_HUB_OFFLINE" not in environ
    assert environ["VLLM_TARGET_DEVICE"] == "cpu"
    command = env.module_command(Path("/env/bin/python"), "devtools.vllm_check.checker", "--smoke")
    assert command[:3] == ["/env/bin/python", "-I", "-c"] and command[-1] == "--smoke"
    # The child imports llmd_fleet from its source root (components/ in a checkout), nothing else.
    assert repr(str(REPO / "components")) in command[3]


def test_deps_check_reports_versions_outside_the_declared_range(monkeypatch):
    import importlib.metadata

    declared = ["fastapi<0.137.0,>=0.133.0", "torch==9.9.9", "absent>=1", 'extra-only>=2; extra == "bench"']
    installed = {"fastapi": "0.140.0", "torch": "2.13.0+cpu", "extra-only": "1.0"}

    def version(name: str) -> str:
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "requires", lambda name: declared)
    monkeypatch.setattr(importlib.metadata, "version", version)
    assert mismatches() == ["fastapi 0.140.0 is outside vllm's range fastapi<0.137.0,>=0.133.0"]
