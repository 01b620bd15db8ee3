"""Render, check and refuse quickly: each target imports only its own cloud SDK, and bad input is
refused before any SDK is imported (docs/performance.md)."""

import ast
import resource
import subprocess
import sys

import pytest

from tests.support import REPO

# A fresh interpreter per case: what a render imports is only visible in a new process. The
# generated SDK types of a service module live in its `_inputs` module, loaded on first use.
_LOADED_SDK_MODULES = """
import sys
from llmd_fleet.cli.main import run
code = run(sys.argv[1:])
sdks = ("pulumi_gcp", "pulumi_aws", "pulumi_docker_build")
print(code)
print(sorted({m.split(".")[0] for m in sys.modules if m.startswith(sdks)}))
print(sorted(m[: -len("._inputs")] for m in sys.modules if m.startswith(sdks) and m.endswith("._inputs")))
print("pulumi" in sys.modules)
"""


def _loaded(*argv: str) -> tuple[int, list[str], list[str], bool]:
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_SDK_MODULES, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    code, packages, services, pulumi = result.stdout.strip().splitlines()[-4:]
    return int(code), ast.literal_eval(packages), ast.literal_eval(services), pulumi == "True"


EXPECTED = {
    # On-prem: no cloud SDK at all, and no image build SDK (the stack runs the upstream image).
    "onprem-h100": ([], []),
    # GKE: the network, cluster and node-service-account modules of the GCP SDK, and Cloud SQL
    # (the response store; its Private Service Access connection, `servicenetworking`, has no
    # nested input types, so that module loads no `_inputs`).
    "gke-h100": (
        ["pulumi_gcp"],
        [
            "pulumi_gcp",
            "pulumi_gcp.compute",
            "pulumi_gcp.container",
            "pulumi_gcp.projects",
            "pulumi_gcp.serviceaccount",
            "pulumi_gcp.sql",
        ],
    ),
    # EKS: VPC, IAM, EKS, ECR and RDS (the response store) of the AWS SDK, and the image build
    # (the stack builds the EFA image).
    "eks-h100": (
        ["pulumi_aws", "pulumi_docker_build"],
        [
            "pulumi_aws",
            "pulumi_aws.ec2",
            "pulumi_aws.ecr",
            "pulumi_aws.eks",
            "pulumi_aws.iam",
            "pulumi_aws.rds",
            "pulumi_aws.vpc",
            "pulumi_docker_build",
        ],
    ),
}


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_a_render_imports_only_the_sdk_of_its_target(stack, tmp_path):
    code, packages, services, _ = _loaded("render", stack, "--out", str(tmp_path / "out"))
    assert code == 0
    assert (packages, services) == EXPECTED[stack]


def test_a_config_error_is_refused_in_under_two_seconds_before_any_sdk_import(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.empty.yaml").write_text("config: {}\n")
    # CPU time of the child (user + system), not wall time: what the refusal costs, unchanged by
    # other work sharing the machine's cores.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-m", "llmd_fleet.cli.main", "--stacks-dir", str(stacks), "check", "empty"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert result.returncode == 2 and "llmd-fleet:target: required" in result.stderr
    assert 0 < cpu < 2.0, f"a config error took {cpu:.2f} s of CPU"
    code, packages, _, pulumi = _loaded("--stacks-dir", str(stacks), "check", "empty")
    assert code == 2 and packages == [] and not pulumi
