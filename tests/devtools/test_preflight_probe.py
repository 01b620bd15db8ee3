"""The fabric preflight probe (llmd_fleet/layers/preflight/probe.py) on this machine's real NIXL.

Two processes, a target and an initiator, run the probe file exactly as the preflight Job does,
with the pinned NIXL over its UCX backend on host memory (loopback): the same code path as on the
fabric, minus the NICs. LIBFABRIC (EFA) cannot load without the CUDA libraries, so only UCX runs
here.

These tests need the cached NIXL environment, so they carry the `nixl` marker and run in
`make preflight-probe` (which builds the environment first; CI runs it), not in `make unit`. Run
without the environment they fail, naming the command that builds it; they never skip.
"""

import re
import socket
import subprocess
from pathlib import Path

import pytest

from devtools.preflight_probe import env
from devtools.tool_cache import is_complete
from llmd_fleet.layers.preflight import probe

pytestmark = pytest.mark.nixl

PROBE = Path(probe.__file__).resolve()
SUMMARY = re.compile(
    r"^preflight: (?P<verdict>PASS|FAIL) backend=UCX peer=\S+ size=(?P<mib>\d+)MiB iterations=(?P<n>\d+) "
    r"read=(?P<read>[0-9.]+)Gb/s write=(?P<write>[0-9.]+)Gb/s threshold=(?P<threshold>[0-9.]+)Gb/s "
    r"verified=(?P<verified>\d+)B$"
)


@pytest.fixture(scope="module")
def python() -> Path:
    target = env.env_dir()
    if not is_complete(target):
        pytest.fail(
            f"the NIXL probe environment {target} is not built: run `make preflight-probe` "
            "(python -m devtools.preflight_probe.env builds it)"
        )
    return env.interpreter(target)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_pair(python: Path, *, size_mib: int, nic_gbps: float, efficiency: float) -> tuple[int, str, int, str]:
    """(target exit, target output, initiator exit, initiator output) of one probe pair."""
    port = str(free_port())
    common = ["--port", port, "--size-mib", str(size_mib), "--iterations", "3", "--timeout", "120"]
    target = subprocess.Popen(
        [str(python), "-I", str(PROBE), "--role", "target", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    initiator = subprocess.run(
        [
            str(python),
            "-I",
            str(PROBE),
            "--role",
            "initiator",
            "--peer",
            "127.0.0.1",
            *common,
            "--nic-gbps",
            str(nic_gbps),
            "--efficiency",
            str(efficiency),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    target_out, _ = target.communicate(timeout=60)
    return target.returncode, target_out, initiator.returncode, initiator.stdout + initiator.stderr


def last_summary(output: str) -> re.Match[str]:
    lines = [line for line in output.splitlines() if line.startswith(probe.SUMMARY_PREFIX)]
    assert lines, output
    match = SUMMARY.match(lines[-1])
    assert match, lines[-1]
    return match


def test_two_agents_move_verified_bytes_and_report_a_throughput(python):
    target_rc, target_out, rc, out = run_pair(python, size_mib=32, nic_gbps=1, efficiency=0.01)
    assert (rc, target_rc) == (probe.EXIT_PASS, probe.EXIT_PASS), out + target_out
    summary = last_summary(out)
    assert summary["verdict"] == "PASS"
    # Both directions checked byte for byte: the READ on the initiator, the WRITE on the target.
    assert int(summary["verified"]) == 2 * 32 * probe.MIB
    assert float(summary["read"]) > 0 and float(summary["write"]) > 0
    assert float(summary["threshold"]) == pytest.approx(0.0, abs=0.05)
    assert "READ 100663296 bytes" in out and "bytes match" in out
    assert "verified the written buffer: match" in target_out
    # The target ends with the same verdict line.
    assert last_summary(target_out).group(0) == summary.group(0)


def test_a_result_below_the_threshold_fails_both_pods(python):
    # 100 Tb/s x 1.0: no loopback reaches it.
    target_rc, target_out, rc, out = run_pair(python, size_mib=8, nic_gbps=100_000, efficiency=1.0)
    assert (rc, target_rc) == (probe.EXIT_FAIL, probe.EXIT_FAIL), out + target_out
    summary = last_summary(out)
    assert summary["verdict"] == "FAIL"
    assert float(summary["threshold"]) == 100_000
    assert "is below 100000.0 Gb/s (100000 Gb/s x 1)" in out
    # The bytes still matched: the failure is the rate alone.
    assert int(summary["verified"]) == 2 * 8 * probe.MIB


def test_no_target_is_an_error_not_a_pass(python):
    result = subprocess.run(
        [
            str(python),
            "-I",
            str(PROBE),
            "--role",
            "initiator",
            "--peer",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--nic-gbps",
            "1",
            "--efficiency",
            "0.5",
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == probe.EXIT_ERROR
    assert "preflight: ERROR initiator: ProbeError: no target at 127.0.0.1" in result.stdout


def test_an_unknown_backend_is_an_error(python):
    result = subprocess.run(
        [
            str(python),
            "-I",
            str(PROBE),
            "--role",
            "target",
            "--backend",
            "NO_SUCH_BACKEND",
            "--port",
            str(free_port()),
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == probe.EXIT_ERROR
    assert "NIXL backend NO_SUCH_BACKEND did not load" in result.stdout
