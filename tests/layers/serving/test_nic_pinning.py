"""NIC pinning per rank: the launch script pairs each GPU with the RDMA NIC on its PCIe root
(VLLM_GPU_NIC_PCIE_MAPPING), read from sysfs; run here on a fake /sys."""

import dataclasses
import os
import stat
import subprocess
from pathlib import Path

import pytest

from devtools.vllm_check.sysfs import expected_mapping, fake_sysfs
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.layers.serving.vllm import (
    NIC_MAPPING_VAR,
    NIC_SELECTION_VAR,
    SYSFS_VAR,
    launch_script,
    nic_pinning_reason,
)
from llmd_fleet.plan.fleet import plan_fleet
from tests.support import STACKS_DIR


def _quickstart():
    config = stack_config(read_stack_file(STACKS_DIR, "quickstart-h100"))
    return config, plan_fleet(config)


def _run(script: str, tmp_path: Path, sysfs: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (
        ("vllm", f'printf "%s" "${{{NIC_MAPPING_VAR}}}|${{{NIC_SELECTION_VAR}}}"\n'),
        ("find", "exit 0\n"),
    ):
        stub = bin_dir / name
        stub.write_text("#!/bin/bash\n" + body)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LWS_WORKER_INDEX": "0",
        "LWS_LEADER_ADDRESS": "q-0.q",
        "POD_IP": "10.0.0.7",
        SYSFS_VAR: str(sysfs),
    }
    return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def test_rank_i_gets_the_nic_on_its_own_pcie_root(tmp_path):
    config, plan = _quickstart()
    role = plan.role("decode")
    assert nic_pinning_reason(role) is None
    laid_out = fake_sysfs(tmp_path / "sys")
    script = launch_script(config.model, config.serving.roles.decode, role, config.serving.kv_tier).script
    result = _run(script, tmp_path, tmp_path / "sys")
    assert result.returncode == 0, result.stderr
    mapping, selection = result.stdout.split("|")
    assert mapping == expected_mapping(laid_out)
    assert [pair.split("=") for pair in mapping.split(",")] == [[p.gpu, p.nic] for p in laid_out]
    assert selection == "UCX_NET_DEVICES:1"


def test_a_missing_nic_stops_the_pod_with_one_line(tmp_path):
    config, plan = _quickstart()
    laid_out = fake_sysfs(tmp_path / "sys", missing_nic=3)
    script = launch_script(config.model, config.serving.roles.decode, plan.role("decode")).script
    result = _run(script, tmp_path, tmp_path / "sys")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: GPU {laid_out[3].gpu} has no RDMA NIC on its PCIe root {laid_out[3].root}; the claim "
        "must hold one NIC per GPU"
    ]


@pytest.mark.parametrize(
    ("stack", "why"),
    [
        ("eks-h100", "LIBFABRIC"),
        ("gke-h100", "kernel's TCP"),
        # EFA devices are claimed per PCIe root, but KV runs over TCP: pinning UCX to an RDMA
        # device there would leave it no transport.
        ("eks-h100-2node", "kernel's TCP"),
        ("gke-h100-2node", "kernel's TCP"),
    ],
)
def test_efa_and_tcp_fabrics_pin_no_ucx_nic(stack, why):
    config = stack_config(read_stack_file(STACKS_DIR, stack))
    plan = plan_fleet(config)
    for name in ("prefill", "decode"):
        reason = nic_pinning_reason(plan.role(name))
        assert reason is not None and why in reason
        script = launch_script(config.model, getattr(config.serving.roles, name), plan.role(name)).script
        assert NIC_MAPPING_VAR not in script


def test_no_claim_per_pcie_root_no_pinning():
    _, plan = _quickstart()
    role = dataclasses.replace(plan.role("decode"), claim=None)
    assert nic_pinning_reason(role) is not None
