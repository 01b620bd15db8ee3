"""The fabric preflight as every stack renders it (llmd_fleet/layers/preflight/component.py), its config,
the ordering against serving, and the probe's verdict logic (the probe itself runs over real NIXL
in tests/devtools/test_preflight_probe.py, `make preflight-probe`)."""

import copy
import json
from typing import Any

import pytest
from pulumi.runtime import mocks

from llmd_fleet.cli.synth import RecordingMocks
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.layers.preflight import probe
from llmd_fleet.layers.preflight.component import PROBE_FILE
from llmd_fleet.layers.serving.component import ModelServing
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.stack.parse import parse_config
from tests.support import ENGINE_IMAGE, stack_raw_config, start_mock_engine, vllm_stacks

# The fabric of each stack's target and its NICs (stacks/*.yaml, targets/<kind>/fabric.py,
# SPECS[kind].nic_gbps).
BACKEND = {
    "onprem-h100": "UCX",
    "onprem-h100-autoscale": "UCX",
    "onprem-h100-multimodel": "UCX",
    "gke-h100": "UCX",
    "eks-h100": "LIBFABRIC",
}
NIC_GBPS = {
    "onprem-h100": "400",
    "onprem-h100-autoscale": "400",
    "onprem-h100-multimodel": "400",
    "gke-h100": "200",
    "eks-h100": "100",
}
# Fabrics whose preflight verifies bytes but gates no rate (Fabric.preflight_rate_gate): UCX TCP on
# TCPXO has no reachable rate known.
UNGATED = {"gke-h100"}


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _preflight_on(stack: str) -> bool:
    return parse_config(stack_raw_config(stack)).serving.preflight.enabled


PREFLIGHT_STACKS = [s for s in vllm_stacks() if _preflight_on(s)]


def test_stacks_without_the_preflight_render_no_job(rendered):
    for stack in set(vllm_stacks()) - set(PREFLIGHT_STACKS):
        assert not [o for o in rendered(stack) if o["kind"] == "Job"], stack


@pytest.mark.parametrize("stack", PREFLIGHT_STACKS)
def test_every_stack_renders_a_paired_job_on_the_serving_claim(stack, rendered):
    objects = rendered(stack)
    fleet = parse_config(stack_raw_config(stack)).serving.name
    job = _one(objects, "Job", f"{fleet}-preflight")
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["backoffLimit"] == 1 and spec["activeDeadlineSeconds"] == 3600
    pod = spec["template"]["spec"]
    # Two different nodes: the bytes cross the fabric.
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    # The serving pods' claim template, node selector and toleration.
    dset = _one(objects, "DisaggregatedSet", fleet)
    for role in dset["spec"]["roles"]:
        worker = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        assert pod.get("resourceClaims") == worker.get("resourceClaims")
        assert pod["nodeSelector"] == worker["nodeSelector"]
        assert pod["tolerations"] == worker["tolerations"]
    (container,) = pod["containers"]
    env = _env(container)
    assert env["PREFLIGHT_BACKEND"] == BACKEND[stack]
    if stack in UNGATED:
        assert "PREFLIGHT_NIC_GBPS" not in env and env["PREFLIGHT_RATE_GATE"] == "off"
    else:
        assert (env["PREFLIGHT_NIC_GBPS"], env["PREFLIGHT_EFFICIENCY"]) == (NIC_GBPS[stack], "0.4")
        assert "PREFLIGHT_RATE_GATE" not in env
    # The engines' fabric environment comes along (e.g. FI_PROVIDER=efa on EKS, the UCX interfaces
    # on GKE).
    engine = worker["containers"][0]
    assert {
        e["name"]: e.get("value") for e in engine["env"] if e["name"].startswith(("FI_", "NCCL_", "UCX_"))
    }.items() <= (env.items())
    # The initiator finds index 0 through the headless Service that is the pods' subdomain.
    service = _one(objects, "Service", "glm52-preflight")
    assert pod["subdomain"] == "glm52-preflight" and service["spec"]["clusterIP"] == "None"
    assert env["PREFLIGHT_PEER"] == "glm52-preflight-0.glm52-preflight.llm-d.svc"
    assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    # The preflight pods are not serving pods: the pool, the router and its policies skip them.
    assert "llm-d.ai/inference-serving" not in spec["template"]["metadata"]["labels"]
    # The pod runs the ConfigMap's copy of the package's probe file, unchanged.
    config_map = _one(objects, "ConfigMap", "glm52-preflight-probe")
    assert config_map["data"]["probe.py"] == PROBE_FILE.read_text()
    assert container["command"] == ["python3", "/preflight/probe.py"]
    assert container["image"] == engine["image"]
    # Serving waits for it; Pulumi waits as long as the Job may run and reruns a failed one.
    annotations = {k: v for k, v in job["metadata"]["annotations"].items() if not k.startswith("checkov.io/")}
    assert annotations == {
        "llmd-fleet.io/runs-before": "DisaggregatedSet/glm52",
        "pulumi.com/replaceUnready": "true",
        "pulumi.com/timeoutSeconds": "3600",
    }


def test_the_gke_probe_pods_join_the_gpu_networks(rendered):
    objects = rendered("gke-h100")
    pod = _one(objects, "Job", "glm52-preflight")["spec"]["template"]
    worker = _one(objects, "DisaggregatedSet", "glm52")["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]
    serving_annotations = worker["workerTemplate"]["metadata"]["annotations"]
    networks = {k: v for k, v in serving_annotations.items() if k.startswith("networking.gke.io")}
    assert networks and networks.items() <= pod["metadata"]["annotations"].items()


def test_on_gke_ucx_rides_the_gpu_nics_the_annotations_name(rendered):
    """UCX_NET_DEVICES defaults to every device and UCX's TCP transport prefers the default-route
    interface (openucx ucp_context.c, tcp_iface.c PREFER_DEFAULT): unpinned, NIXL's KV and the
    probe could ride eth0. Engines and probe name exactly the GPU interfaces of the
    `networking.gke.io/interfaces` annotation of their own pod, never eth0."""
    objects = rendered("gke-h100")
    job_pod = _one(objects, "Job", "glm52-preflight")["spec"]["template"]
    pods = [job_pod]
    for role in _one(objects, "DisaggregatedSet", "glm52")["spec"]["roles"]:
        lws = role["spec"]["leaderWorkerTemplate"]
        pods += [t for t in (lws.get("leaderTemplate"), lws["workerTemplate"]) if t]
    for pod in pods:
        interfaces = json.loads(pod["metadata"]["annotations"]["networking.gke.io/interfaces"])
        gpu_nics = [i["interfaceName"] for i in interfaces if i["network"] != "default"]
        assert len(gpu_nics) == 8 and "eth0" not in gpu_nics
        container = next(c for c in pod["spec"]["containers"] if c["name"] in ("vllm", "probe"))
        env = _env(container)
        assert env["UCX_NET_DEVICES"].split(",") == gpu_nics, container["name"]
        assert "tcp" in env["UCX_TLS"].split(",")


@pytest.mark.parametrize("stack", vllm_stacks())
def test_the_plan_states_each_fabrics_rate_gate_and_its_basis(stack):
    """200 Gb/s x 0.4 over UCX's kernel TCP transport is not a rate anything known reaches: on
    TCPXO the gate is off and the plan says so; elsewhere it prints the figure and its basis."""
    from llmd_fleet.cli.plan_sections import preflight_section
    from llmd_fleet.layers.preflight.component import threshold

    config = parse_config(stack_raw_config(stack))
    plan = plan_fleet(config)
    limit, section = threshold(config, plan), preflight_section(config, plan)
    fabric = plan.role("prefill").fabric
    if not config.serving.preflight.enabled:  # quickstart-h100: no preflight, no section
        assert section == ""
        return
    assert fabric.preflight_basis and fabric.preflight_basis in section
    if stack in UNGATED:
        assert not limit.gated and limit.min_gbps == 0
        assert "no rate gate" in section and "TCPXO accelerates NCCL only" in section
    else:
        assert limit.gated and f"{limit.min_gbps:g} Gb/s each direction" in section


def test_without_a_rate_gate_only_the_bytes_decide():
    ungated = probe.Threshold(nic_gbps=200, efficiency=0.4, gated=False)
    slow = M("UCX", 1 << 30, 8, read_gbps=9.5, write_gbps=8.0, read_verified=True, write_verified=True)
    assert probe.verdict(slow, ungated) == (True, [])
    assert probe.verdict(slow, probe.Threshold(200, 0.4))[0] is False
    corrupt = M("UCX", 1 << 30, 8, read_gbps=9.5, write_gbps=8.0, read_verified=True, write_verified=False)
    assert probe.verdict(corrupt, ungated) == (
        False,
        ["the bytes WRITTEN to the target differ from what was sent"],
    )
    assert "threshold=ungated " in probe.summary_line(slow, ungated, True, "peer")
    # The initiator takes the gate from the Job's environment; without it it needs a rate.
    args = probe.parse_args(["--role", "initiator", "--rate-gate", "off"])
    assert args.rate_gate == "off"
    with pytest.raises(SystemExit):
        probe.parse_args(["--role", "initiator", "--nic-gbps", "0"])


class DependencyMonitor(mocks.MockMonitor):
    """The mock monitor, also recording each resource's explicit dependencies (URNs)."""

    def __init__(self, m: mocks.Mocks) -> None:
        super().__init__(m)
        self.dependencies: dict[str, list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        self.dependencies[response.urn] = list(request.dependencies)
        return response


def _serve(settings: dict[str, Any]) -> dict[str, list[str]]:
    """Declare ModelServing for the reference stack with `serving.preflight` settings; the
    dependencies of every resource by URN."""
    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["preflight"] = settings
    config = parse_config(raw)
    plan = plan_fleet(config)
    recorder = RecordingMocks()
    monitor = DependencyMonitor(recorder)
    start_mock_engine(recorder, monitor=monitor)

    def build() -> None:
        ModelServing(
            "glm52", {"config": config, "plan": plan, "hf_token": None, "engine_image": ENGINE_IMAGE}
        )

    mocks.test(build)()
    return monitor.dependencies


def _urn(dependencies: dict[str, list[str]], suffix: str) -> str:
    (urn,) = [u for u in dependencies if u.endswith(suffix)]
    return urn


def test_serving_waits_for_the_preflight_job_by_default():
    dependencies = _serve({})
    job = _urn(dependencies, "kubernetes:batch/v1:Job::glm52-preflight-job")
    dset = _urn(dependencies, "DisaggregatedSet::glm52-disaggregated-set")
    assert job in dependencies[dset]
    # The Job runs on the claim templates serving uses, once they exist.
    template = _urn(dependencies, "ResourceClaimTemplate::glm52-h100-8gpu-8nic-pcie")
    assert template in dependencies[_urn(dependencies, "FabricPreflight::glm52-preflight")]


def test_without_the_gate_nothing_waits_for_the_job():
    dependencies = _serve({"gateServing": False})
    job = _urn(dependencies, "kubernetes:batch/v1:Job::glm52-preflight-job")
    assert job not in dependencies[_urn(dependencies, "DisaggregatedSet::glm52-disaggregated-set")]


def test_gate_off_skips_the_await_and_drops_the_runs_before_claim():
    from llmd_fleet.layers.preflight.component import job_annotations

    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["preflight"] = {"gateServing": False, "deadlineMinutes": 20}
    annotations = {
        k: v for k, v in job_annotations(parse_config(raw)).items() if not k.startswith("checkov.io/")
    }
    assert annotations == {
        "pulumi.com/skipAwait": "true",
        "pulumi.com/replaceUnready": "true",
        "pulumi.com/timeoutSeconds": "1200",
    }


def test_disabled_renders_no_preflight_object():
    dependencies = _serve({"enabled": False})
    assert not [u for u in dependencies if "preflight" in u]
    from llmd_fleet.security.isolation import network_policy_specs

    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["preflight"] = {"enabled": False}
    config = parse_config(raw)
    assert "preflight" not in network_policy_specs(config, plan_fleet(config))


def test_settings_reach_the_probe_and_size_its_memory():
    from llmd_fleet.layers.preflight.component import job_spec

    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["preflight"] = {"minEfficiency": 0.25, "transferMiB": 3000, "iterations": 3}
    config = parse_config(raw)
    (container,) = job_spec(config, plan_fleet(config), ENGINE_IMAGE)["template"]["spec"]["containers"]
    env = _env(container)
    assert (env["PREFLIGHT_EFFICIENCY"], env["PREFLIGHT_SIZE_MIB"], env["PREFLIGHT_ITERATIONS"]) == (
        "0.25",
        "3000",
        "3",
    )
    # Two buffers of 3000 MiB, each rounded up to 3 GiB, plus 4 GiB.
    assert container["resources"]["limits"]["memory"] == "10Gi"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"minEfficiency": 0}, "serving.preflight.minEfficiency: must be >= 0.05"),
        ({"minEfficiency": 1.5}, "serving.preflight.minEfficiency: must be <= 1"),
        ({"transferMiB": 10**12}, "serving.preflight.transferMiB: must be <= 8192 MiB"),
        ({"transferMiB": 1}, "serving.preflight.transferMiB: must be >= 16 MiB"),
        ({"iterations": 0}, "serving.preflight.iterations: must be >= 1"),
        ({"deadlineMinutes": 100000}, "serving.preflight.deadlineMinutes: must be <= 240 minutes"),
        ({"enabled": "yes; rm -rf /"}, "serving.preflight.enabled:"),
        ({"transferMib": 64}, "serving.preflight.transferMib: unknown key"),
    ],
)
def test_bad_settings_name_the_key(settings, message):
    raw = copy.deepcopy(stack_raw_config())
    raw["serving"]["preflight"] = settings
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert f"llmd-fleet:{message}" in str(error.value)


def test_roles_on_two_node_groups_cannot_be_paired():
    raw = copy.deepcopy(stack_raw_config())
    groups = raw["fleet"]["nodeGroups"]
    groups["h100-decode"] = copy.deepcopy(groups["h100"])
    raw["serving"]["roles"]["decode"]["nodeGroup"] = "h100-decode"
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert (
        "llmd-fleet:serving.preflight.enabled: prefill and decode run on different node groups "
        "(h100, h100-decode)" in str(error.value)
    )
    raw["serving"]["preflight"] = {"enabled": False}
    parse_config(raw)  # accepted without the preflight


M = probe.Measurement


def test_the_verdict_needs_every_byte_and_both_directions_above_the_threshold():
    threshold = probe.Threshold(nic_gbps=400, efficiency=0.4)
    assert threshold.min_gbps == pytest.approx(160)
    good = M("UCX", 1 << 30, 8, read_gbps=300.0, write_gbps=170.0, read_verified=True, write_verified=True)
    assert probe.verdict(good, threshold) == (True, [])
    slow = M("UCX", 1 << 30, 8, read_gbps=300.0, write_gbps=150.0, read_verified=True, write_verified=True)
    assert probe.verdict(slow, threshold) == (
        False,
        ["WRITE 150.0 Gb/s is below 160.0 Gb/s (400 Gb/s x 0.4)"],
    )
    corrupt = M(
        "UCX", 1 << 30, 8, read_gbps=300.0, write_gbps=300.0, read_verified=False, write_verified=True
    )
    passed, reasons = probe.verdict(corrupt, threshold)
    assert not passed and reasons == ["the bytes READ from the target differ from its buffer"]
    assert corrupt.verified_bytes == 1 << 30


def test_the_summary_is_one_line_with_the_figures():
    m = M(
        "LIBFABRIC",
        256 * probe.MIB,
        4,
        read_gbps=91.25,
        write_gbps=88.0,
        read_verified=True,
        write_verified=True,
    )
    line = probe.summary_line(m, probe.Threshold(100, 0.4), True, "glm52-preflight-target")
    assert line == (
        "preflight: PASS backend=LIBFABRIC peer=glm52-preflight-target size=256MiB iterations=4 "
        "read=91.2Gb/s write=88.0Gb/s threshold=40.0Gb/s verified=536870912B"
    )
    assert probe.gbps(10**9, 8.0) == pytest.approx(1.0)


def test_the_probe_module_needs_nothing_but_the_standard_library_to_import():
    """It runs alone in the serving image, mounted from a ConfigMap: no package imports."""
    import ast

    tree = ast.parse(PROBE_FILE.read_text())
    top_level = {
        alias.name.split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert top_level <= {"argparse", "json", "os", "socket", "struct", "sys", "time", "dataclasses", "typing"}
