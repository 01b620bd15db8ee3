"""GKE target (gke-h100): config rules, the cloud resources and their decisive settings, the
TCPXO in-cluster objects and pod wiring, and that serving changes leave the fleet's cloud inputs alone."""

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from llmd_fleet.cli.check import CrdSchemas, check_object, crd_directories, project_crd_dir, schema_version
from llmd_fleet.cli.render import kubernetes_object, render_files
from llmd_fleet.cli.synth import Recorded, RecordingMocks, Synthesis, clean, synthesize
from llmd_fleet.layers.gateway.component import GatewayLayer, gke_backend_policy_spec
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.targets.gke.config import GkeNodePoolConfig, GkeTarget, compact_placement
from llmd_fleet.versions import versions
from tests.support import STACKS_DIR, problems_by_key, stack_raw_config, start_mock_engine

STACK = "gke-h100"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"


def _raw() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(STACK))


def _pool(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["target"]["gke"]["nodePools"]["h100"]


@pytest.fixture(scope="module")
def synthesis() -> Synthesis:
    return synthesize(STACKS_DIR, STACK)


def _inputs(synthesis: Synthesis, type_token: str) -> list[tuple[str, dict[str, Any]]]:
    return [(r.name, clean(r.inputs)) for r in synthesis.resources if r.type == type_token]


def _one(synthesis: Synthesis, type_token: str, name: str) -> dict[str, Any]:
    (found,) = [inputs for n, inputs in _inputs(synthesis, type_token) if n == name]
    return found


# -- config -------------------------------------------------------------------------------------


def test_the_stack_parses_and_defaults_to_the_gke_gateway():
    config = parse_config(_raw())
    assert isinstance(config.target, GkeTarget) and config.target.kind == "gke"
    assert config.gateway.implementation == "gke-l7-rilb"


def test_an_explicit_gateway_choice_is_kept_on_gke():
    raw = _raw()
    raw["gateway"] = {"implementation": "istio"}
    assert parse_config(raw).gateway.implementation == "istio"


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda p: p.update(flexStart=True), "nodePools.h100.flexStart", "excludes reservation"),
        (
            lambda p: p.update(queuedProvisioning=True),
            "nodePools.h100.queuedProvisioning",
            "excludes reservation",
        ),
        (
            lambda p: (p.pop("reservation"), p.update(flexStart=True, queuedProvisioning=True)),
            "nodePools.h100.queuedProvisioning",
            "excludes flexStart",
        ),
        (
            lambda p: (p.pop("reservation"), p.update(queuedProvisioning=True, placement="compact")),
            "nodePools.h100.placement",
            "queuedProvisioning",
        ),
        (lambda p: p.update(maxRunDurationSeconds=3600), "nodePools.h100.maxRunDurationSeconds", "flexStart"),
    ],
)
def test_mutually_exclusive_capacity_options_name_the_key(edit, key, words):
    raw = _raw()
    edit(_pool(raw))
    problems = problems_by_key(raw)
    assert words in problems[f"llmd-fleet:target.gke.{key}"]


def test_gke_specific_rules():
    raw = _raw()
    raw["fleet"]["nodeGroups"]["h100"]["nicDeviceClass"] = "rdma-nic.llmd-fleet.io"
    raw["target"]["gke"]["network"] = {"podCidr": "10.0.0.0/14"}
    raw["target"]["gke"]["nodePools"]["extra"] = {}
    problems = problems_by_key(raw)
    assert "must be null on gke" in problems["llmd-fleet:fleet.nodeGroups.h100.nicDeviceClass"]
    assert "overlaps nodeCidr" in problems["llmd-fleet:target.gke.network.podCidr"]
    assert "not a fleet node group" in problems["llmd-fleet:target.gke.nodePools.extra"]
    raw = _raw()
    del raw["target"]["gke"]
    assert problems_by_key(raw) == {"llmd-fleet:target.gke": "required for kind gke"}
    onprem = stack_raw_config("onprem-h100")
    onprem["gateway"] = {"implementation": "gke-l7-rilb"}
    assert "only on kind gke" in problems_by_key(onprem)["llmd-fleet:gateway.implementation"]


def test_compact_placement_is_automatic_except_with_queued_provisioning_or_a_block():
    assert compact_placement(GkeNodePoolConfig())
    assert not compact_placement(GkeNodePoolConfig(queued_provisioning=True))
    block = "projects/p-123/reservations/r/reservationBlocks/b1"
    assert not compact_placement(GkeNodePoolConfig(reservation=block))


# -- cloud resources ------------------------------------------------------------------------------


def test_gpu_pool_decisive_settings(synthesis):
    pool = _one(synthesis, NODE_POOL, "cluster-h100-pool")
    node = pool["nodeConfig"]
    assert node["machineType"] == "a3-megagpu-8g" and node["imageType"] == "COS_CONTAINERD"
    (accelerator,) = node["guestAccelerators"]
    assert accelerator["type"] == "nvidia-h100-mega-80gb" and accelerator["count"] == 8
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}
    assert node["gvnic"] == {"enabled": True}
    assert node["localNvmeSsdBlockConfig"] == {"localSsdCount": 16}
    assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert node["labels"] == {
        "gke-no-default-nvidia-gpu-device-plugin": "true",
        "nvidia.com/gpu.present": "true",
        "cloud.google.com/gke-nvidia-gpu-dra-driver": "true",
        "nvidia.com/dra-kubelet-plugin": "true",
    }
    assert node["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["a3mega-reservation"],
    }
    networks = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["network"] for n in networks] == [f"llmd-h100-gpu-{i}" for i in range(8)]
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert pool["nodeCount"] == 68 and pool["nodeLocations"] == ["us-central1-a"]
    assert "autoscaling" not in pool and "queuedProvisioning" not in pool


def test_cluster_is_private_protected_and_multi_network(synthesis):
    cluster = _one(synthesis, CLUSTER, "cluster-cluster")
    assert cluster["deletionProtection"] is True
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH" and cluster["enableMultiNetworking"] is True
    assert cluster["networkingMode"] == "VPC_NATIVE" and cluster["removeDefaultNodePool"] is True
    assert cluster["minMasterVersion"] == versions().kubernetes.gke
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "my-gcp-project.svc.id.goog"}
    assert cluster["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    gpu_vpcs = [i for n, i in _inputs(synthesis, "gcp:compute/network:Network") if "-gpu-" in n]
    assert len(gpu_vpcs) == 8 and all(v["mtu"] == 8244 for v in gpu_vpcs)
    proxy = _one(synthesis, "gcp:compute/subnetwork:Subnetwork", "cluster-network-proxy-only-subnet")
    assert proxy["purpose"] == "REGIONAL_MANAGED_PROXY"


def test_the_cluster_resource_is_protected():
    import pulumi

    from llmd_fleet.cli.synth import RecordingMocks
    from llmd_fleet.targets.gke.cluster import GkeCluster

    config = parse_config(_raw())
    start_mock_engine(RecordingMocks())
    seen: list[bool] = []

    @pulumi.runtime.test
    def run():
        assert isinstance(config.target, GkeTarget)
        cluster = GkeCluster("cluster", {"gke": config.target.gke, "node_groups": config.fleet.node_groups})
        seen.append(bool(cluster.cluster._protect))  # pulumi keeps the option on the resource
        return cluster.cluster.urn

    run()
    assert seen == [True]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda p: (p.pop("reservation"), p.update(flexStart=True, maxRunDurationSeconds=86400)),
            {"flexStart": True, "maxRunDuration": "86400s", "consume": "NO_RESERVATION", "autoRepair": False},
        ),
        (
            lambda p: (p.pop("reservation"), p.update(queuedProvisioning=True)),
            {"queued": True, "consume": "NO_RESERVATION", "autoRepair": True},
        ),
    ],
)
def test_dws_pools_autoscale_from_zero(tmp_path, edit, expected):
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    edit(document["config"]["llmd-fleet:target"]["gke"]["nodePools"]["h100"])
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(document))
    pool = _one(synthesize(tmp_path, STACK), NODE_POOL, "cluster-h100-pool")
    assert "nodeCount" not in pool
    assert pool["autoscaling"]["totalMinNodeCount"] == 0 and pool["autoscaling"]["totalMaxNodeCount"] == 68
    assert pool["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == expected["consume"]
    assert pool["management"]["autoRepair"] is expected["autoRepair"]
    if expected.get("queued"):
        assert pool["queuedProvisioning"] == {"enabled": True} and "placementPolicy" not in pool
    else:
        assert pool["nodeConfig"]["flexStart"] is True
        assert pool["nodeConfig"]["maxRunDuration"] == expected["maxRunDuration"]


def _cloud_files(synthesis: Synthesis) -> dict[str, str]:
    return {k: v for k, v in render_files(synthesis).items() if k.startswith("cloud/")}


def test_serving_changes_leave_every_cloud_input_alone(tmp_path, synthesis):
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    roles = document["config"]["llmd-fleet:serving"]["roles"]
    roles["prefill"].update(instances=6, maxNumBatchedTokens=8192)
    roles["decode"].update(maxNumSeqs=32, gpuMemoryUtilization=0.9)
    document["config"]["llmd-fleet:serving"]["name"] = "glm52b"
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(document))
    changed = synthesize(tmp_path, STACK)
    before, after = _cloud_files(synthesis), _cloud_files(changed)
    assert any(k.startswith("cloud/gcp-container-nodePool") for k in before)
    assert any(k.startswith("cloud/gcp-container-cluster") for k in before)
    assert before == after
    # ... while the serving objects did change.
    assert render_files(synthesis).keys() != render_files(changed).keys()


# -- in-cluster ----------------------------------------------------------------------------------


def _k8s(synthesis: Synthesis, kind: str) -> list[dict[str, Any]]:
    return [clean(r.inputs) for r in synthesis.resources if r.type.endswith(f":{kind}") and r.custom]


def test_gpu_networks_and_node_daemonsets(synthesis):
    params = sorted(_k8s(synthesis, "GKENetworkParamSet"), key=lambda p: p["metadata"]["name"])
    networks = [n for n in _k8s(synthesis, "Network") if n.get("apiVersion") == "networking.gke.io/v1"]
    networks.sort(key=lambda n: n["metadata"]["name"])
    assert [p["metadata"]["name"] for p in params] == [f"vpc{i}" for i in range(1, 9)]
    assert params[0]["spec"] == {
        "vpc": "llmd-h100-gpu-0",
        "vpcSubnet": "llmd-h100-gpu-0-subnet",
        "deviceMode": "NetDevice",
    }
    assert [n["spec"]["parametersRef"]["name"] for n in networks] == [f"vpc{i}" for i in range(1, 9)]
    daemonsets = {d["metadata"]["name"]: d for d in _k8s(synthesis, "DaemonSet")}
    assert {"nccl-tcpxo-installer", "nri-device-injector", "nvidia-driver-installer"} <= set(daemonsets)
    images = json.dumps(daemonsets)
    for name in ("nccl-tcpxo-installer", "nri-device-injector", "cos-nvidia-installer", "gke-pause"):
        assert versions().image(name).ref in images


def _decode_pod(synthesis: Synthesis) -> dict[str, Any]:
    (dset,) = _k8s(synthesis, "DisaggregatedSet")
    roles = {r["name"]: r["spec"] for r in dset["spec"]["roles"]}
    return roles["decode"]["leaderWorkerTemplate"]["workerTemplate"]


def test_serving_pods_get_tcpxo_networks_sidecar_and_env(synthesis):
    pod = _decode_pod(synthesis)
    annotations = pod["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["network"] for i in interfaces[1:]] == [f"vpc{i}" for i in range(1, 9)]
    assert "/dev/dmabuf_import_helper" in annotations["devices.gke.io/container.tcpxo-daemon"]
    rxdm, sidecar = pod["spec"]["initContainers"]
    assert rxdm["name"] == "tcpxo-daemon" and rxdm["restartPolicy"] == "Always"
    assert rxdm["image"] == versions().image("tcpxo-rxdm").ref and sidecar["name"] == "routing-proxy"
    (engine,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in engine["env"]}
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{i}" for i in range(1, 9))
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert {m["mountPath"] for m in engine["volumeMounts"]} >= {
        "/usr/local/tcpxo/lib64",
        "/dev/aperture_devices",
    }
    # GPUs through the DRA claim only: TCPXO NICs are not DRA devices on A3 Mega.
    assert engine["resources"]["claims"] == [{"name": "accelerators"}]
    (template,) = _k8s(synthesis, "ResourceClaimTemplate")
    requests = template["spec"]["spec"]["devices"]["requests"]
    assert [r["exactly"]["deviceClassName"] for r in requests] == ["gpu.nvidia.com"]


def test_gateway_is_gke_managed_with_only_the_objective_crd(synthesis):
    (gateway,) = [clean(r.inputs) for r in synthesis.resources if r.type.endswith(":Gateway")]
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    remote = [r for r in synthesis.resources if r.type == "kubernetes:yaml/v2:ConfigFile"]
    assert [r.name for r in remote] == ["gateway-llm-d-router-crds"]
    releases = {
        clean(r.inputs)["name"] for r in synthesis.resources if r.type == "kubernetes:helm.sh/v3:Release"
    }
    assert not releases & {"agentgateway", "agentgateway-crds", "istiod", "istio-base"}
    # GKE COS: DRA driver with the GKE driver root, no GPU Operator.
    (dra,) = [clean(r.inputs) for r in synthesis.resources if r.name == "accelerators-dra-driver"]
    assert dra["values"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    assert "gpu-operator" not in releases


def test_every_in_cluster_resource_uses_the_gke_provider(synthesis):
    k8s_resources: list[Recorded] = [
        r for r in synthesis.resources if r.type.startswith("kubernetes:") and r.custom
    ]
    assert k8s_resources
    providers = [r for r in synthesis.resources if r.type == "pulumi:providers:kubernetes"]
    assert [p.name for p in providers] == ["cluster-k8s"]


def test_kubeconfig_is_a_secret(tmp_path):
    from llmd_fleet.cli.main import run

    out = tmp_path / "out"
    assert run(["render", STACK, "--out", str(out)]) == 0
    text = "\n".join(p.read_text() for p in Path(out).rglob("*.yaml"))
    assert "gke-gcloud-auth-plugin" not in text


# -- GKE gateway policies on the InferencePool --------------------------------------------------

HEALTH_CHECK_POLICY = "kubernetes:networking.gke.io/v1:HealthCheckPolicy"
BACKEND_POLICY = "kubernetes:networking.gke.io/v1:GCPBackendPolicy"


def _policies(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    # The InferencePool's policies (the agentic API's Service has its own pair).
    found = {
        r.type: kubernetes_object(r)
        for r in synthesis.resources
        if r.type in {HEALTH_CHECK_POLICY, BACKEND_POLICY}
        and r.inputs["spec"]["targetRef"]["kind"] == "InferencePool"
    }
    assert found.keys() == {HEALTH_CHECK_POLICY, BACKEND_POLICY}
    return found


def test_gke_gateway_health_checks_every_pool_endpoint_on_its_own_port(synthesis):
    (pool,) = _k8s(synthesis, "InferencePool")
    policy = _policies(synthesis)[HEALTH_CHECK_POLICY]
    assert policy["metadata"]["namespace"] == pool["metadata"]["namespace"]
    assert policy["metadata"]["name"] == pool["metadata"]["name"]
    assert policy["spec"]["targetRef"] == {
        "group": "inference.networking.k8s.io",
        "kind": "InferencePool",
        "name": pool["metadata"]["name"],
    }
    default = policy["spec"]["default"]
    assert default["config"] == {
        "type": "HTTP",
        "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/health"},
    }
    # The CRD's CEL rule (not run offline): the timeout may not exceed the interval.
    assert default["timeoutSec"] <= default["checkIntervalSec"]
    # Why no fixed port: the pool's targets are every rank's client port on both roles, while the
    # DP supervisor (whose /health covers all local ranks) sits on a different port per role and
    # is no target at all.
    targets = {p["number"] for p in pool["spec"]["targetPorts"]}
    assert all(set(role.client_ports) == targets for role in synthesis.plan.roles)
    supervisors = {role.supervisor_port for role in synthesis.plan.roles}
    assert len(supervisors) == len(synthesis.plan.roles) and not supervisors & targets


def test_gke_backend_timeout_is_the_route_timeout_and_requests_are_logged(synthesis):
    (pool,) = _k8s(synthesis, "InferencePool")
    (route,) = [r for r in _k8s(synthesis, "HTTPRoute") if r["metadata"]["name"] == pool["metadata"]["name"]]
    policy = _policies(synthesis)[BACKEND_POLICY]
    assert policy["metadata"]["namespace"] == pool["metadata"]["namespace"]
    assert policy["spec"]["targetRef"] == {
        "group": "inference.networking.k8s.io",
        "kind": "InferencePool",
        "name": pool["metadata"]["name"],
    }
    assert policy["spec"]["default"]["timeoutSec"] == synthesis.config.gateway.request_timeout_seconds == 1800
    assert policy["spec"]["default"]["logging"] == {"enabled": True, "sampleRate": 1_000_000}
    # The load balancer keeps a terminating pod's streams for as long as vLLM drains them.
    drain = synthesis.config.serving.drain_seconds
    assert policy["spec"]["default"]["connectionDraining"] == {"drainingTimeoutSec": drain} and drain > 0
    # GKE does not implement HTTPRoute timeouts: the backend policy carries the timeout instead.
    (rule,) = route["spec"]["rules"]
    assert "timeouts" not in rule and rule["backendRefs"] == [policy["spec"]["targetRef"]]


@pytest.mark.parametrize("implementation", ["agentgateway", "istio"])
@pulumi.runtime.test
def test_other_gateways_render_no_gke_policies(implementation):
    mocks = start_mock_engine(RecordingMocks())
    raw = _raw()
    raw["gateway"] = {"implementation": implementation}
    config = parse_config(raw)
    layer = GatewayLayer("gateway", {"config": config, "pool_name": "glm52", "install_crds": True})

    def check(_):
        assert layer.backend_policies == []
        assert not [r for r in mocks.created if r.type.startswith("kubernetes:networking.gke.io/")]
        (route,) = [clean(r.inputs) for r in mocks.created if r.type.endswith(":HTTPRoute")]
        assert route["spec"]["rules"][0]["timeouts"] == {"request": "1800s"}

    # The route is the last child: once it is registered, every child is.
    assert layer.route is not None
    return pulumi.Output.all(layer.route.urn, layer.address).apply(check)


def test_check_validates_the_policies_against_the_vendored_crds(synthesis):
    crds = CrdSchemas(crd_directories([]))
    version = schema_version(synthesis.config.target.kubernetes_version)
    policies = _policies(synthesis)
    for policy in policies.values():
        assert check_object(policy, version, crds) == []
    health = copy.deepcopy(policies[HEALTH_CHECK_POLICY])
    health["spec"]["default"]["config"]["httpHealthCheck"]["path"] = "/health"
    (problem,) = check_object(health, version, crds)
    assert problem.startswith("spec.default.config.httpHealthCheck:") and "'path'" in problem
    backend = copy.deepcopy(policies[BACKEND_POLICY])
    backend["spec"]["default"]["requestTimeoutSec"] = 1800
    (problem,) = check_object(backend, version, crds)
    assert problem.startswith("spec.default:") and "'requestTimeoutSec'" in problem
    backend = copy.deepcopy(policies[BACKEND_POLICY])
    backend["spec"]["default"]["timeoutSec"] = 0
    (problem,) = check_object(backend, version, crds)
    assert problem.startswith("spec.default.timeoutSec:")


def test_the_project_crds_are_always_read_once(tmp_path):
    project = project_crd_dir()
    assert crd_directories([]) == [project]
    assert crd_directories([tmp_path, project, tmp_path]) == [tmp_path, project]
    # A CRD that two directories define differently is an error, not a silent override.
    crd = project / "networking.gke.io" / "networking.gke.io_gcpbackendpolicies.yaml"
    changed = crd.read_text().replace("maximum: 2147483647", "maximum: 3600")
    (tmp_path / crd.name).write_text(changed)
    with pytest.raises(ValueError, match=r"GCPBackendPolicy\.networking\.gke\.io differs"):
        CrdSchemas(crd_directories([tmp_path]))
    (tmp_path / crd.name).write_text(crd.read_text())
    assert CrdSchemas(crd_directories([tmp_path])).validator("networking.gke.io", "v1", "GCPBackendPolicy")


def test_vendored_crds_are_the_upstream_blobs_listed_in_sources():
    """Each vendored file's git blob hash appears in its SOURCES.md row (byte-identical copies);
    tests/devtools/test_vendored_crds.py checks that every file is listed and its sha256."""
    crd_dir = project_crd_dir()
    sources = (crd_dir / "SOURCES.md").read_text()
    files = sorted(crd_dir.rglob("*.y*ml"))
    assert {"networking.gke.io_gcpbackendpolicies.yaml", "networking.gke.io_healthcheckpolicies.yaml"} <= {
        f.name for f in files
    }
    for path in files:
        data = path.read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        file = path.relative_to(crd_dir).as_posix()
        (row,) = [line for line in sources.splitlines() if line.startswith(f"| `{file}` |")]
        assert f"| `{blob}` |" in row, (file, blob)


@pytest.mark.parametrize(("drain", "draining"), [(0, 0), (900, 900), (7200, 3600)])
def test_connection_draining_follows_the_drain_up_to_the_backend_service_limit(drain, draining):
    raw = _raw()
    raw["serving"]["drainSeconds"] = drain
    spec = gke_backend_policy_spec(parse_config(raw), "glm52")
    assert spec["default"]["connectionDraining"] == {"drainingTimeoutSec": draining}


# -- upgrades and maintenance (docs/disruptions.md) ----------------------------------------------


def test_gpu_pools_upgrade_one_node_at_a_time_inside_a_weekend_window(synthesis):
    pool = _one(synthesis, NODE_POOL, "cluster-h100-pool")
    assert pool["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    assert pool["management"]["autoUpgrade"] is True
    cluster = _one(synthesis, CLUSTER, "cluster-cluster")
    assert cluster["maintenancePolicy"] == {
        "recurringWindow": {
            "startTime": "2026-01-03T00:00:00Z",
            "endTime": "2026-01-04T00:00:00Z",
            "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU",
        }
    }


def test_a_maintenance_window_is_rendered_from_its_days_start_and_length():
    from llmd_fleet.targets.gke.cluster import maintenance_policy
    from llmd_fleet.targets.gke.config import GkeMaintenanceWindow

    policy = maintenance_policy(GkeMaintenanceWindow(days=["TU", "TH"], start="22:30", duration_hours=6))
    assert policy is not None and policy.recurring_window is not None
    assert policy.recurring_window.start_time == "2026-01-03T22:30:00Z"
    # The end is the start plus the length, across midnight.
    assert policy.recurring_window.end_time == "2026-01-04T04:30:00Z"
    assert policy.recurring_window.recurrence == "FREQ=WEEKLY;BYDAY=TU,TH"
    assert maintenance_policy(None) is None


@pytest.mark.parametrize(
    ("window", "key", "words"),
    [
        # One 8-hour window a week is 32 h in 32 days: under GKE's 48 h.
        ({"days": ["SA"], "durationHours": 8}, "maintenanceWindow", "opens 32 h in a 32-day period"),
        ({"days": ["SA", "SA"], "durationHours": 8}, "maintenanceWindow.days", "names a day twice"),
        ({"durationHours": 3}, "maintenanceWindow.durationHours", "must be >= 4 hours (got 3)"),
        ({"start": "24:00"}, "maintenanceWindow.start", "must match the pattern"),
    ],
)
def test_a_window_gke_would_refuse_names_its_key(window, key, words):
    raw = _raw()
    raw["target"]["gke"]["maintenanceWindow"] = window
    problems = problems_by_key(raw)
    assert words in problems[f"llmd-fleet:target.gke.{key}"], problems


def test_a_null_window_leaves_the_cluster_without_one():
    raw = _raw()
    raw["target"]["gke"]["maintenanceWindow"] = None
    target = parse_config(raw).target
    assert isinstance(target, GkeTarget) and target.gke.maintenance_window is None
