"""One endpoint-picker replica fits a node of the CPU pool the stack creates (plan/system_nodes.py)."""

import copy

import pytest

from llmd_fleet.plan.fleet import PlanError, plan_fleet
from llmd_fleet.plan.system_nodes import NodeShape, allocatable, node_shape
from llmd_fleet.stack.parse import parse_config
from tests.support import stack_raw_config


@pytest.mark.parametrize(
    ("machine", "vcpus", "memory_gib"),
    [
        ("n2-standard-32", 32, 32 * 4e9 / 1024**3),
        ("n2-highmem-16", 16, 16 * 8e9 / 1024**3),
        ("c3-highcpu-88", 88, 88 * 1e9 / 1024**3),
        ("m7i.xlarge", 4, 16),
        ("m7i.12xlarge", 48, 192),
        ("r7i.24xlarge", 96, 768),
        ("c6i.2xlarge", 8, 16),
    ],
)
def test_known_machine_shapes(machine, vcpus, memory_gib):
    shape = node_shape(machine)
    assert shape is not None and shape.vcpus == vcpus
    assert shape.memory_gib == pytest.approx(memory_gib)


@pytest.mark.parametrize("machine", ["a3-megagpu-8g", "e2-standard-8", "m7g.4xlarge", "n2-standard-32x"])
def test_unknown_machine_types_are_not_guessed(machine):
    assert node_shape(machine) is None


def test_allocatable_follows_the_kubelet_reservation():
    # 32 vCPUs: 0.06 + 0.01 + 2 x 0.005 + 28 x 0.0025 = 0.15 cores kept for the system.
    cpus, memory = allocatable(NodeShape(32, 128.0))
    assert cpus == pytest.approx(31.85)
    # 128 GiB: 1 + 0.8 + 0.8 + 6.72 GiB kept, plus 100 MiB eviction threshold.
    assert memory == pytest.approx(128 - 9.32 - 100 / 1024)


@pytest.mark.parametrize(
    ("stack", "path", "small", "key"),
    [
        (
            "gke-h100",
            ("gke", "systemPool"),
            {"machineType": "n2-standard-32"},
            "target.gke.systemPool.machineType",
        ),
        (
            "eks-h100",
            ("eks", "systemNodes"),
            {"instanceType": "m7i.12xlarge"},
            "target.eks.systemNodes.instanceType",
        ),
    ],
)
def test_a_cpu_pool_too_small_for_one_router_replica_is_refused(stack, path, small, key):
    raw = copy.deepcopy(stack_raw_config(stack))
    section = raw["target"]
    for name in path:
        section = section.setdefault(name, {})
    section.update(small)
    with pytest.raises(PlanError) as caught:
        plan_fleet(parse_config(raw))
    ((where, message),) = caught.value.problems
    assert where == f"llmd-fleet:{key}"
    assert "one endpoint-picker replica requests" in message and "CPUs" in message
    # A router sized for a lower rate fits the same pool.
    raw["router"] = {**raw.get("router", {}), "expectedRequestsPerSecond": 40}
    raw["workload"] = {**raw.get("workload", {}), "requestsPerAgentMinute": 0.5}
    assert plan_fleet(parse_config(raw)).router.memory_gib > 0


def test_onprem_cpu_nodes_are_not_checked():
    plan = plan_fleet(parse_config(stack_raw_config("onprem-h100")))
    assert plan.router.memory_gib > 0
