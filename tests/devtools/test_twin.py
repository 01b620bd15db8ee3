"""The control-plane twin's pure parts (infra/twin): wrapper Go modules, the binary cache, fake
nodes and their ResourceSlices, GPU/NIC pairing, and the loopback-only command lines. None of
these tests needs the Go toolchain or the built binaries; `make e2e` runs the twin itself."""

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from devtools.twin import build, cluster, manifests, modules, nodes, pods
from devtools.twin.pki import Pki, kubeconfig_text
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.config.fleet import NodeGroupConfig
from llmd_fleet.platform.dra import PCIE_ROOT
from llmd_fleet.versions import versions
from tests.support import REFERENCE_STACK, STACKS_DIR


@pytest.fixture(scope="module")
def node_groups() -> dict[str, NodeGroupConfig]:
    return stack_config(read_stack_file(STACKS_DIR, REFERENCE_STACK)).fleet.node_groups


# --- wrapper Go modules --------------------------------------------------------------------------


def test_staging_modules_follow_the_kubernetes_version():
    assert modules.staging_version("v1.40.2") == "v0.40.2"
    assert modules.staging_version("1.35.0") == "v0.35.0"
    with pytest.raises(ValueError):
        modules.staging_version("v2.0.0")


def test_only_local_replaces_are_pinned():
    upstream = (
        "module example.com/up\n\nreplace (\n"
        "\texample.com/up/api => ./staging/api\n"
        "\texample.com/up/client v0.0.0 => ../client // sibling\n"
        "\texample.com/fork => example.com/other v1.2.3\n"
        ")\n"
        "replace example.com/bad => ./FORBIDDEN_DEPENDENCY\n"
        "replace example.com/up/pkg => ../pkg\n"
    )
    assert modules.local_replaces(upstream, "v9.9.9") == {
        "example.com/up/api": "v9.9.9",
        "example.com/up/client": "v9.9.9",
        "example.com/up/pkg": "v9.9.9",
    }


def test_generated_gomod_requires_the_pinned_version_and_pins_every_replaced_module():
    wrapper = modules.wrappers(
        {"kubernetes": "v1.40.2", "etcd": "v3.9.1", "kwok": "v0.99.0"},
        kubernetes_replaces=["k8s.io/api", "k8s.io/client-go"],
        etcd_replaces=["go.etcd.io/etcd/api/v3"],
    )
    text = modules.wrapper_gomod(wrapper["kubernetes"])
    assert "module llmd-fleet.invalid/twin/kubernetes" in text.splitlines()
    assert modules.parse_requires(text) == {"k8s.io/kubernetes": "v1.40.2"}
    assert modules.parse_replaces(text) == {
        "k8s.io/api": ("k8s.io/api", "v0.40.2"),
        "k8s.io/client-go": ("k8s.io/client-go", "v0.40.2"),
    }
    etcd = modules.wrapper_gomod(wrapper["etcd"])
    assert modules.parse_replaces(etcd) == {"go.etcd.io/etcd/api/v3": ("go.etcd.io/etcd/api/v3", "v3.9.1")}
    assert modules.wrapper_ok(wrapper["kubernetes"], text) == []


def test_wrapper_check_catches_a_version_bump_without_regeneration():
    pinned = modules.wrappers({"kubernetes": "v1.40.2", "etcd": "v3.9.1", "kwok": "v0.99.0"}, [], [])
    bumped = modules.wrappers({"kubernetes": "v1.40.3", "etcd": "v3.9.1", "kwok": "v0.99.0"}, [], [])
    old_text = modules.wrapper_gomod(pinned["kubernetes"])
    assert modules.wrapper_ok(bumped["kubernetes"], old_text) != []


@pytest.mark.parametrize("name", ["kubernetes", "etcd", "kwok"])
def test_committed_wrapper_modules_match_the_version_matrix(name):
    """tools/twin/gomod/<name> was regenerated after the last bump of [twin] in the matrix."""
    wrapper = modules.wrappers()[name]
    assert wrapper.version == getattr(versions().twin, name)
    assert modules.wrapper_ok(wrapper, (wrapper.directory / "go.mod").read_text()) == []
    assert (wrapper.directory / "go.sum").read_text().strip(), "go.sum pins the checksums"
    for file, text in modules.wrapper_sources(wrapper).items():
        assert (wrapper.directory / file).read_text() == text


def test_kubernetes_wrapper_pins_every_staging_module_and_stamps_the_version():
    wrapper = modules.wrappers()["kubernetes"]
    staging = modules.staging_version(versions().twin.kubernetes)
    assert {"k8s.io/api", "k8s.io/apiserver", "k8s.io/client-go", "k8s.io/kube-scheduler"} <= set(
        wrapper.replaces
    )
    assert set(wrapper.replaces.values()) == {staging}
    assert f"-X k8s.io/component-base/version.gitVersion={versions().twin.kubernetes}" in wrapper.ldflags
    assert [b.name for b in wrapper.binaries] == [
        "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl",
    ]  # fmt: skip


def test_pulumi_versions_come_from_uv_lock():
    lock = (
        '[[package]]\nname = "pulumi"\nversion = "3.1.2"\n\n'
        '[[package]]\nname = "pulumi-kubernetes"\nversion = "4.5.6"\n'
    )
    assert modules.uv_lock_version("pulumi", lock) == "3.1.2"
    assert modules.uv_lock_version("pulumi-kubernetes", lock) == "4.5.6"
    with pytest.raises(KeyError):
        modules.uv_lock_version("pulumi-aws", lock)


# --- the binary cache ----------------------------------------------------------------------------


def _files() -> dict[str, bytes]:
    return {"go.mod": b"module x\n", "go.sum": b"a h1:x\n", "tools.go": b"package tools\n"}


def test_build_key_changes_with_what_decides_the_binaries():
    wrapper = modules.wrappers()["kwok"]
    key = build.build_key(wrapper, _files(), "go1.26.8")
    assert key == build.build_key(wrapper, _files(), "go1.26.8")
    assert len(key) == 16
    assert key != build.build_key(wrapper, _files(), "go1.27.0")
    assert key != build.build_key(wrapper, {**_files(), "go.sum": b"a h1:y\n"}, "go1.26.8")
    other = modules.wrappers()["etcd"]
    assert key != build.build_key(other, _files(), "go1.26.8")


def test_cache_lives_outside_the_repository_keyed_by_version(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMD_FLEET_CACHE_DIR", str(tmp_path))
    wrapper = modules.wrappers()["kubernetes"]
    directory = build.bin_dir(wrapper, go="go1.26.8")
    assert directory.parent == tmp_path
    assert directory.name.startswith("twin-bin-kubernetes-")
    monkeypatch.delenv("LLMD_FLEET_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_root() == tmp_path / "xdg" / "llmd-fleet"


def test_version_output_must_name_the_exact_version():
    assert build.reports_version("Kubernetes v1.40.2\n", "v1.40.2")
    assert not build.reports_version("Kubernetes v1.40.20\n", "v1.40.2")
    assert not build.reports_version("Kubernetes v1.40.2-rc.1\n", "v1.40.2")
    assert build.reports_version("etcd Version: 3.9.1\nGit SHA: x\n", "3.9.1")


def _fake_binary(directory: Path, name: str, output: str) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_binary_on_path_is_taken_only_at_the_right_version(monkeypatch, tmp_path):
    binary = modules.Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", ("--version",))
    right = tmp_path / "right"
    wrong = tmp_path / "wrong"
    right.mkdir()
    wrong.mkdir()
    _fake_binary(right, "kube-apiserver", "Kubernetes v1.40.2")
    _fake_binary(wrong, "kube-apiserver", "Kubernetes v1.39.9")
    monkeypatch.setenv("PATH", f"{right}{os.pathsep}/usr/bin")
    assert build.on_path(binary, "v1.40.2") == right / "kube-apiserver"
    monkeypatch.setenv("PATH", f"{wrong}{os.pathsep}/usr/bin")
    assert build.on_path(binary, "v1.40.2") is None


def test_ensure_reuses_a_complete_cache_without_building(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMD_FLEET_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(build, "go_version", lambda: "go1.26.8")
    wrapper = modules.wrappers()["kwok"]
    target = build.bin_dir(wrapper)
    target.mkdir(parents=True)
    (target / build.COMPLETE).write_text("done\n")

    def no_build(*_args: object) -> None:
        raise AssertionError("a complete cache must not be rebuilt")

    monkeypatch.setattr(build, "_build", no_build)
    assert build.ensure(wrapper) == {"kwok": target / "kwok"}


# --- fake nodes and ResourceSlices ---------------------------------------------------------------


def test_one_fake_node_per_node_of_each_group(node_groups):
    fake = nodes.fake_nodes(node_groups)
    assert len(fake) == sum(g.count for g in node_groups.values()) == 68
    assert len({n.name for n in fake}) == len(fake)
    assert fake[0].name == "h100-000" and fake[-1].name == "h100-067"


def test_node_carries_the_group_labels_taint_and_capacity(node_groups):
    group = node_groups["h100"]
    node = nodes.node_object(nodes.fake_nodes(node_groups)[5])
    labels = node["metadata"]["labels"]
    for key, value in group.node_labels.items():
        assert labels[key] == value
    assert labels["kubernetes.io/hostname"] == "h100-005"
    assert node["metadata"]["annotations"] == nodes.KWOK_ANNOTATION
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    allocatable = node["status"]["allocatable"]
    assert allocatable["cpu"] == str(group.cpus_per_node - group.system_reserved_cpus)
    assert allocatable["memory"] == f"{group.host_memory_gib - group.system_reserved_memory_gib}Gi"


def _root(device: dict) -> str:
    return device["attributes"][PCIE_ROOT]["string"]


def test_gpu_i_and_nic_i_share_a_pcie_root_and_roots_differ(node_groups):
    node = nodes.fake_nodes(node_groups)[0]
    gpus = nodes.gpu_slice(node)
    nics = nodes.nic_slice(node)
    assert gpus["spec"]["driver"] == "gpu.nvidia.com" and nics["spec"]["driver"] == "dra.net"
    assert gpus["spec"]["nodeName"] == nics["spec"]["nodeName"] == node.name
    gpu_devices, nic_devices = gpus["spec"]["devices"], nics["spec"]["devices"]
    assert len(gpu_devices) == 8 and len(nic_devices) == 8
    for gpu, nic in zip(gpu_devices, nic_devices, strict=True):
        assert _root(gpu) == _root(nic)
    assert len({_root(g) for g in gpu_devices}) == 8
    assert all(n["attributes"]["rdma"] == {"bool": True} for n in nic_devices)


def test_device_attributes_have_exactly_one_typed_value(node_groups):
    node = nodes.fake_nodes(node_groups)[0]
    for item in (nodes.gpu_slice(node), nodes.nic_slice(node)):
        for device in item["spec"]["devices"]:
            for name, value in device["attributes"].items():
                assert len(value) == 1 and next(iter(value)) in {"bool", "int", "string", "version"}, name


def test_gpu_uuids_are_unique_across_the_fleet(node_groups):
    uuids = [
        d["attributes"]["uuid"]["string"]
        for n in nodes.fake_nodes(node_groups)
        for d in nodes.gpu_slice(n)["spec"]["devices"]
    ]
    assert len(set(uuids)) == len(uuids) == 544


def test_twin_objects_for_the_reference_stack(node_groups):
    objects = list(nodes.twin_objects(node_groups))
    kinds = [o["kind"] for o in objects]
    gpu_nodes = [o for o in objects if o["kind"] == "Node" and o.get("spec", {}).get("taints")]
    assert len(gpu_nodes) == 68
    assert kinds.count("Node") == 68 + nodes.SYSTEM_NODES
    assert kinds.count("ResourceSlice") == 136
    assert kinds.count("DeviceClass") == 1


def _claim(results: list[tuple[str, str, str]]) -> dict:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": request, "driver": driver, "pool": "h100-000", "device": device}
                        for request, driver, device in results
                    ]
                }
            }
        },
    }


def test_pairing_violations_detects_a_nic_on_another_root(node_groups):
    node = nodes.fake_nodes(node_groups)[0]
    slices = [nodes.gpu_slice(node), nodes.nic_slice(node)]
    paired = _claim([("gpu-0", "gpu.nvidia.com", "gpu-3"), ("nic-0", "dra.net", "nic-3")])
    assert nodes.pairing_violations([paired], slices) == []
    crossed = _claim([("gpu-0", "gpu.nvidia.com", "gpu-3"), ("nic-0", "dra.net", "nic-4")])
    assert len(nodes.pairing_violations([crossed], slices)) == 1
    lonely = _claim([("gpu-0", "gpu.nvidia.com", "gpu-3")])
    assert len(nodes.pairing_violations([lonely], slices)) == 1
    doubled = _claim(
        [
            ("gpu-0", "gpu.nvidia.com", "gpu-3"), ("nic-0", "dra.net", "nic-3"),
            ("gpu-1", "gpu.nvidia.com", "gpu-3"), ("nic-1", "dra.net", "nic-3"),
        ]
    )  # fmt: skip
    assert nodes.pairing_violations([doubled], slices) == [
        "ns/c: two GPU/NIC pairs on PCIe root " + nodes.pcie_root(3)
    ]
    assert nodes.pairing_violations([_claim([])], slices) == ["ns/c: no per-GPU request allocated"]


def test_system_nodes_are_untainted_cpu_nodes():
    system = nodes.system_node_objects()
    assert len(system) == nodes.SYSTEM_NODES >= 2, "the endpoint pickers need one node each"
    assert all("taints" not in n.get("spec", {}) for n in system)
    assert all(n["metadata"]["annotations"] == nodes.KWOK_ANNOTATION for n in system)


# --- the control plane and the e2e's pure helpers ------------------------------------------------


def test_every_component_listens_on_loopback_only(tmp_path):
    state = cluster.State(
        stack=REFERENCE_STACK,
        ports={"etcd": 1, "etcd_peer": 2, "etcd_metrics": 3, "apiserver": 4, "kwok": 5},
        binaries={
            n: f"/bin/{n}"
            for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
        },
    )
    lines = cluster.command_lines(state, tmp_path, Pki(tmp_path / "pki"), tmp_path / "kwok.yaml")
    assert set(lines) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    flat = " ".join(" ".join(argv) for argv in lines.values())
    assert "0.0.0.0" not in flat
    assert "--bind-address=127.0.0.1" in lines["kube-apiserver"]
    assert "--listen-client-urls=http://127.0.0.1:1" in lines["etcd"]
    assert (
        "--secure-port=0" in lines["kube-scheduler"] and "--secure-port=0" in lines["kube-controller-manager"]
    )
    assert "--server-address=127.0.0.1:5" in lines["kwok"]
    assert "--runtime-config=resource.k8s.io/v1=true" in lines["kube-apiserver"]
    assert state.server == "https://127.0.0.1:4"


def test_kubeconfig_points_at_the_twin_with_the_admin_certificate(tmp_path):
    pki = Pki(tmp_path)
    config = json.loads(kubeconfig_text("https://127.0.0.1:4", pki))
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:4",
        "certificate-authority": str(pki.ca_cert),
    }
    assert config["users"][0]["user"]["client-key"] == str(pki.admin_key)


def test_lws_pods_one_per_worker_of_every_group():
    template: dict[str, Any] = {
        "metadata": {"labels": {"role": "x"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    ds = {
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {
            "roles": [
                {
                    "name": "prefill",
                    "spec": {"replicas": 7, "leaderWorkerTemplate": {"size": 4, "workerTemplate": template}},
                },
                {
                    "name": "decode",
                    "spec": {"replicas": 5, "leaderWorkerTemplate": {"size": 8, "workerTemplate": template}},
                },
            ]
        },
    }
    made = pods.lws_pods(ds)
    assert len(made) == 7 * 4 + 5 * 8
    assert len({p["metadata"]["name"] for p in made}) == len(made)
    assert made[0]["metadata"]["name"] == "s-prefill-0-0"
    assert made[0]["metadata"]["labels"]["role"] == "x"
    made[0]["spec"]["containers"][0]["name"] = "changed"
    assert template["spec"]["containers"][0]["name"] == "c", "pods get copies of the template"


def test_apply_order_puts_namespaces_then_cluster_objects_first():
    objects = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}},
    ]
    namespaced = {"apps/v1/Deployment": True, "resource.k8s.io/v1/DeviceClass": False, "v1/Namespace": False}
    assert [o["kind"] for o in manifests.apply_order(objects, namespaced)] == [
        "Namespace",
        "DeviceClass",
        "Deployment",
    ]


def test_service_accounts_go_before_the_token_secrets_that_name_them():
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "t", "annotations": {"kubernetes.io/service-account.name": "a"}},
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}}
    namespaced = {"v1/Secret": True, "v1/ServiceAccount": True}
    ordered = manifests.apply_order([secret, account], namespaced)
    assert [o["kind"] for o in ordered] == ["ServiceAccount", "Secret"]


def test_server_added_counts_defaults_not_bookkeeping():
    rendered = {"metadata": {"name": "x"}, "spec": {"replicas": 2}}
    stored = {
        "metadata": {"name": "x", "uid": "u", "resourceVersion": "1", "labels": {"a": "b"}},
        "spec": {"replicas": 2, "revisionHistoryLimit": 10},
        "status": {"replicas": 0},
    }
    assert manifests.server_added(rendered, stored) == {"spec.revisionHistoryLimit"}


def test_vendored_crds_carry_cel_rules_the_e2e_counts():
    crds = manifests.vendored_crds()
    assert {c["spec"]["names"]["kind"] for c in crds} >= {"DisaggregatedSet", "InferencePool", "HTTPRoute"}
    ds = next(c for c in crds if c["spec"]["names"]["kind"] == "DisaggregatedSet")
    assert manifests.cel_rules(ds["spec"]["versions"][0]["schema"]) >= 1
    assert (
        manifests.cel_rules(
            {"x-kubernetes-validations": [{"rule": "a"}], "p": {"x-kubernetes-validations": [{}]}}
        )
        == 2
    )


def test_a_job_is_finished_only_on_a_true_complete_or_failed_condition():
    assert pods.job_complete({}) is None
    running = {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}
    assert pods.job_complete(running) is None
    assert pods.job_complete({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}) is None
    assert (
        pods.job_complete({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == "Complete"
    )
    assert pods.job_complete({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "Failed"


def test_the_twin_loads_kwoks_stage_that_completes_job_pods():
    """The preflight Job completes in the twin only through kwok's pod-complete stage."""
    assert "kustomize/stage/pod/fast/pod-complete.yaml" in cluster.KWOK_STAGE_FILES


def test_free_ports_are_all_different_and_bindable():
    names = [f"component-{i}" for i in range(64)]
    ports = cluster.free_ports(names)
    assert list(ports) == names
    assert len(set(ports.values())) == len(names)
    import socket

    with socket.socket() as sock:
        sock.bind((cluster.LOOPBACK, ports["component-0"]))


def _shell_script(path: Path, script: str) -> str:
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_control_plane_component_that_exits_is_reported_with_its_log(tmp_path):
    # A component that dies at start (a port taken, a bad flag) is a TwinError at once, carrying the
    # end of its log, not a silent two-minute wait on /readyz.
    etcd = _shell_script(
        tmp_path / "etcd", 'echo "listen tcp 127.0.0.1:2379: bind: address already in use"; exit 1'
    )
    state = cluster.State(stack="s", ports=cluster.free_ports(cluster.PORT_NAMES), binaries={"etcd": etcd})
    lines = {"etcd": [etcd]}
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "build" / "twin").mkdir(parents=True)
    with pytest.raises(cluster.TwinError) as caught:
        cluster._start_control_plane(state, lines, logs, tmp_path)
    assert "etcd exited at start" in str(caught.value)
    assert "bind: address already in use" in str(caught.value)


def _fake_binaries(apiserver_only: bool) -> tuple[dict[str, Path], list[str]]:
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
    return {name: Path("/nonexistent") / name for name in names}, []


@pytest.fixture
def twin_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root holding the reference stack file, with binaries and certificates faked (the
    control plane's start is replaced in each test)."""
    monkeypatch.setattr(cluster, "binaries", _fake_binaries)
    monkeypatch.setattr(cluster, "ensure_pki", lambda directory: Pki(directory))
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(
        (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text()
    )
    return tmp_path


def test_a_control_plane_that_does_not_come_up_is_started_again_on_new_ports(twin_root, monkeypatch):
    monkeypatch.setattr(cluster, "_serves", lambda kube, gv: True)
    attempts: list[dict[str, int]] = []

    def start(state, lines, logs, root):
        attempts.append(dict(state.ports))
        if len(attempts) == 1:
            raise cluster.TwinError("kube-apiserver not ready after 150 s")

    monkeypatch.setattr(cluster, "_start_control_plane", start)
    state = cluster.up(REFERENCE_STACK, apiserver_only=True, root=twin_root)
    assert len(attempts) == 2
    assert state.ports == attempts[1] and attempts[0] != attempts[1]
    assert str(state.ports["apiserver"]) in (twin_root / "build" / "twin" / "kubeconfig").read_text()


def test_a_control_plane_that_fails_twice_is_an_error_and_leaves_no_state(twin_root, monkeypatch):
    def start(state, lines, logs, root):
        raise cluster.TwinError("etcd exited at start")

    monkeypatch.setattr(cluster, "_start_control_plane", start)
    with pytest.raises(cluster.TwinError, match="etcd exited at start"):
        cluster.up(REFERENCE_STACK, apiserver_only=True, root=twin_root)
    assert not cluster.state_path(twin_root).exists()
