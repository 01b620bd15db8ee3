"""`llmd-fleet doctor`: its checks over a recorded cluster shaped like the quickstart's twin
(the twin's own nodes and ResourceSlices, the vendored CRDs, the stand-ins a real install leaves),
then the same cluster broken one thing at a time; the command end to end over a loopback API
server (lines, --json, exit codes)."""

import copy
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.twin.install import prepared_objects
from llmd_fleet.cli.doctor import Expectations, Result, expectations, run_checks, summary
from llmd_fleet.cli.main import run
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.cluster.client import Forbidden
from llmd_fleet.platform.dra import PCIE_ROOT
from llmd_fleet.versions import versions
from tests.support import REPO, STACKS_DIR, serve_in_background

STACK = "quickstart-h100"
CHECK_ORDER = [
    "kubernetes-version",
    "dra-api",
    "gpu-deviceclass",
    "gpu-resourceslices",
    "nic-resourceslices",
    "pcie-root-attribute",
    "gpu-device-plugin",
    "lws-crds",
    "lws-controller",
    "gateway-crds",
    "gatewayclass",
    "gateway-version",
    "node-capacity",
    "shm",
    "secrets",
    "crd-owners",
]


class FakeCluster:
    """Objects served by path as the API server would: a named object, a list of a kind."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.forbidden: set[str] = set()
        # The twin's API server: the pinned Kubernetes release.
        self.version = versions().twin.kubernetes

    @staticmethod
    def path_of(obj: dict[str, Any]) -> tuple[str, str]:
        """(collection path, object path) of an object."""
        group_version = obj["apiVersion"]
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        plural = {
            "CustomResourceDefinition": "customresourcedefinitions",
            "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
            "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
            "GatewayClass": "gatewayclasses",
            "DeviceClass": "deviceclasses",
            "ResourceSlice": "resourceslices",
            "Node": "nodes",
            "Deployment": "deployments",
            "Secret": "secrets",
            "Gateway": "gateways",
        }[obj["kind"]]
        namespace = obj["metadata"].get("namespace")
        collection = f"{base}/{plural}"
        if namespace:
            return collection, f"{base}/namespaces/{namespace}/{plural}/{obj['metadata']['name']}"
        return collection, f"{collection}/{obj['metadata']['name']}"

    def __call__(self, path: str, params: dict[str, str] | None) -> Any:
        if path in self.forbidden:
            from llmd_fleet.cluster.client import _forbidden

            raise _forbidden(path)
        if path == "/version":
            return {"gitVersion": self.version}
        if path == "/apis/resource.k8s.io/v1":
            return {"resources": [{"name": "deviceclasses"}, {"name": "resourceslices"}]}
        items = []
        for obj in self.objects:
            collection, own = self.path_of(obj)
            if own == path:
                return obj
            if collection == path:
                items.append(obj)
        if items or (path.endswith(("s", "es")) and params is not None):
            return {"items": items, "metadata": {}}
        return None


@pytest.fixture(scope="module")
def wanted(rendered: Any) -> Expectations:
    config = stack_config(read_stack_file(STACKS_DIR, STACK))
    return expectations(STACK, config, rendered(STACK), [])


@pytest.fixture
def cluster() -> FakeCluster:
    config = stack_config(read_stack_file(STACKS_DIR, STACK))
    return FakeCluster(prepared_objects(config, REPO))


def _by_id(results: list[Result]) -> dict[str, Result]:
    return {r.id: r for r in results}


def test_prepared_cluster_passes_every_check(wanted: Expectations, cluster: FakeCluster) -> None:
    results = run_checks(wanted, cluster, deployed=False)
    assert [r.id for r in results] == CHECK_ORDER
    assert [r.id for r in results if r.status == "FAIL"] == []
    lines = [r.line() for r in results]
    target = stack_config(read_stack_file(STACKS_DIR, STACK)).target.kubernetes_version
    assert lines[0] == (
        f"doctor: kubernetes-version: ok: found {cluster.version}; needs >= {versions().kubernetes.minimum} "
        f"(target.kubernetesVersion {target}, resource.k8s.io/v1); fix: upgrade the cluster, or set "
        "target.kubernetesVersion to what it runs"
    )
    by_id = _by_id(results)
    assert by_id["gpu-resourceslices"].found == "16 GPUs on 2 nodes, driver version not published"
    assert by_id["pcie-root-attribute"].found == "pcieRoot on 16 of 16 GPUs, pcieRoot on 16 of 16 NICs"
    assert by_id["crd-owners"].line() == (
        "doctor: crd-owners: skip: the stack installs no chart (target.platform preinstalled)"
    )
    assert by_id["node-capacity"].needs == (
        "2 nodes, one pod each: prefill 1 x (8 GPUs, 64 CPU, 1824Gi); decode 1 x (8 GPUs, 64 CPU, 1824Gi)"
    )
    assert summary(STACK, results) == "doctor: quickstart-h100: 16 checks, 0 failed"
    assert all(line.startswith("doctor: ") and line.isprintable() for line in lines)


def test_broken_cluster_fails_exactly_what_was_removed(wanted: Expectations, cluster: FakeCluster) -> None:
    """What `make doctor-twin` removes: the GPU DeviceClass, the DisaggregatedSet CRD and the
    PCIe-root attribute; exactly those three checks fail."""
    cluster.objects = [
        o
        for o in cluster.objects
        if not (o["kind"] == "DeviceClass" and o["metadata"]["name"] == "gpu.nvidia.com")
        and not (
            o["kind"] == "CustomResourceDefinition"
            and o["metadata"]["name"] == "disaggregatedsets.disaggregatedset.x-k8s.io"
        )
    ]
    for obj in cluster.objects:
        if obj["kind"] == "ResourceSlice" and obj["spec"]["driver"] == "gpu.nvidia.com":
            for device in obj["spec"]["devices"]:
                device["attributes"].pop(PCIE_ROOT)
    results = run_checks(wanted, cluster, deployed=False)
    failed = [r.id for r in results if r.status == "FAIL"]
    assert failed == ["gpu-deviceclass", "pcie-root-attribute", "lws-crds"]
    by_id = _by_id(results)
    assert by_id["gpu-deviceclass"].line() == (
        "doctor: gpu-deviceclass: FAIL: found missing gpu.nvidia.com; needs DeviceClass gpu.nvidia.com "
        "(the claims name it); fix: docs/troubleshooting.md#gpu-deviceclass"
    )
    assert by_id["pcie-root-attribute"].found == "pcieRoot on 0 of 16 GPUs, pcieRoot on 16 of 16 NICs"
    assert by_id["lws-crds"].found == "missing disaggregatedsets"
    assert summary(STACK, results) == "doctor: quickstart-h100: 16 checks, 3 failed"


def test_forbidden_is_a_fail_naming_the_permission(wanted: Expectations, cluster: FakeCluster) -> None:
    cluster.forbidden.add("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")
    cluster.forbidden.add("/apis/resource.k8s.io/v1/resourceslices")
    by_id = _by_id(run_checks(wanted, cluster, deployed=False))
    assert by_id["gpu-deviceclass"].line() == (
        "doctor: gpu-deviceclass: FAIL: found HTTP 403 on get deviceclasses.resource.k8s.io; needs "
        "permission to get deviceclasses.resource.k8s.io; fix: docs/troubleshooting.md#permissions"
    )
    assert by_id["gpu-resourceslices"].found == "HTTP 403 on list resourceslices.resource.k8s.io"


def test_device_plugin_left_on_and_old_gateway_and_old_cluster(
    wanted: Expectations, cluster: FakeCluster
) -> None:
    for obj in cluster.objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"].startswith("h100-"):
            obj["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["image"] = container["image"].rsplit(":", 1)[0] + ":v1.1.0"
    cluster.version = "v1.33.5"
    by_id = _by_id(run_checks(wanted, cluster, deployed=False))
    assert by_id["gpu-device-plugin"].status == "FAIL"
    assert by_id["gpu-device-plugin"].found == "nvidia.com/gpu allocatable on 2 of 2 GPU nodes"
    assert by_id["gateway-version"].status == "FAIL" and "v1.1.0" in by_id["gateway-version"].found
    assert by_id["kubernetes-version"].status == "FAIL"


def test_too_small_nodes_and_missing_gatewayclass(wanted: Expectations, cluster: FakeCluster) -> None:
    for obj in cluster.objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "h100-001":
            obj["status"]["allocatable"]["memory"] = "1000Gi"
    cluster.objects = [o for o in cluster.objects if o["kind"] != "GatewayClass"]
    by_id = _by_id(run_checks(wanted, cluster, deployed=False))
    assert by_id["node-capacity"].status == "FAIL"
    assert by_id["node-capacity"].found == "1 nodes fit a prefill pod, 1 nodes fit a decode pod (1 distinct)"
    assert by_id["gatewayclass"].found == "no GatewayClass agentgateway"


def test_cluster_strings_are_escaped(wanted: Expectations, cluster: FakeCluster) -> None:
    cluster.version += "\ndoctor: quickstart-h100: 16 checks, 0 failed"
    for obj in cluster.objects:
        if obj["kind"] == "Deployment":
            obj["metadata"]["name"] = "gw\x1b[2K\rdoctor: x: ok"
    lines = [r.line() for r in run_checks(wanted, cluster, deployed=False)]
    assert all(line.isprintable() for line in lines)


def test_deployed_mode_checks_the_gateway_address_and_the_stack_objects(
    wanted: Expectations, cluster: FakeCluster
) -> None:
    results = run_checks(wanted, cluster, deployed=True)
    assert [r.id for r in results][-3:] == ["serving-objects", "pods-scheduled", "gateway-address"]
    by_id = _by_id(results)
    assert by_id["gateway-address"].found == "no Gateway"
    assert by_id["serving-objects"].status == "FAIL"


# --- The command.


@pytest.fixture
def served(cluster: FakeCluster, tmp_path: Path) -> Iterator[tuple[FakeCluster, Path]]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            try:
                body = cluster(path, {"q": query} if query else None)
                status = 200 if body is not None else 404
            except Forbidden:
                body, status = {}, 403
            data = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_background(server)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "current-context": "twin",
                "contexts": [{"name": "twin", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    yield cluster, kubeconfig
    server.shutdown()


def test_command_lines_json_and_exit_codes(
    served: tuple[FakeCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, kubeconfig = served
    assert run(["doctor", STACK, "--kubeconfig", str(kubeconfig)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[1].strip() for line in out[:-1]] == CHECK_ORDER
    assert out[-1] == "doctor: quickstart-h100: 16 checks, 0 failed"
    cluster.objects = [o for o in cluster.objects if o["kind"] != "DeviceClass"]
    assert run(["doctor", STACK, "--json", "--kubeconfig", str(kubeconfig)]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "llmd-fleet.doctor/v1" and document["mode"] == "before-deploy"
    assert (document["total"], document["failed"]) == (16, 1)
    failed = [c for c in document["checks"] if c["status"] == "FAIL"]
    assert failed == [
        {
            "id": "gpu-deviceclass",
            "status": "FAIL",
            "found": "missing gpu.nvidia.com",
            "needs": "DeviceClass gpu.nvidia.com (the claims name it)",
            "fix": "docs/troubleshooting.md#gpu-deviceclass",
        }
    ]
    skipped = next(c for c in document["checks"] if c["status"] == "skip")
    assert set(skipped) == {"id", "status", "why"}


def test_command_refuses_a_cloud_stack_before_deploy(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["doctor", "gke-h100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "target.kind gke creates its cluster" in err and "--deployed" in err


def test_command_unreachable_cluster_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    assert run(["doctor", STACK, "--kubeconfig", str(kubeconfig)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: cannot reach the cluster")


def test_prepared_objects_are_copies(cluster: FakeCluster) -> None:
    """Each test breaks its own copy."""
    before = copy.deepcopy(cluster.objects)
    cluster.objects[0]["metadata"]["name"] = "changed"
    config = stack_config(read_stack_file(STACKS_DIR, STACK))
    assert prepared_objects(config, REPO)[0] == before[0]


def test_objects_of_a_shape_no_api_server_serves_fail_their_check(
    wanted: Expectations, cluster: FakeCluster
) -> None:
    for obj in cluster.objects:
        if obj["kind"] == "Node":
            obj["status"] = ["not", "a", "mapping"]
        if obj["kind"] == "ResourceSlice":
            obj["spec"]["devices"] = "x"
    results = run_checks(wanted, cluster, deployed=False)
    assert [r.id for r in results] == CHECK_ORDER
    by_id = _by_id(results)
    assert by_id["node-capacity"].found == "an answer of an unexpected shape from the API server"
    assert by_id["gpu-resourceslices"].status == "FAIL"
