"""The EKS target: the p5 launch template (32 EFA interfaces, IMDSv2), the managed node groups
(AMI, capacity type, taint), the EFA security group, Capacity Block and ODCR capacity, the EFA
transport in the serving pods, config errors, and that serving settings never reach a cloud
resource."""

import copy
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from llmd_fleet.cli.synth import OFFLINE_AWS_ACCOUNT, Recorded, RecordingMocks, Synthesis, clean, synthesize
from llmd_fleet.conventions import GPU_TAINT_KEY
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.images.spec import image_tag
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.targets.eks.cluster import (
    ADDONS,
    GPU_AMI_TYPE,
    EksCluster,
    kubeconfig_text,
    node_user_data,
    p5_network_interfaces,
)
from llmd_fleet.targets.eks.config import (
    CAPACITY_BLOCK_MAX_INSTANCES,
    EFA_DEVICE_CLASS,
    EksTarget,
    EksTargetConfig,
    subnet_cidrs,
)
from llmd_fleet.targets.specs import fabric_for
from llmd_fleet.versions import versions
from tests.support import STACKS_DIR, stack_raw_config, start_mock_engine

STACK = "eks-h100"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EFA_CARDS = 32


def _raw() -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(STACK))


def _of_type(resources: tuple[Recorded, ...] | list[Recorded], typ: str) -> list[Recorded]:
    return [r for r in resources if r.type == typ]


def _inputs(resource: Recorded) -> dict[str, Any]:
    return clean(resource.inputs)


@pytest.fixture(scope="module")
def synthesis() -> Synthesis:
    return synthesize(STACKS_DIR, STACK)


def _gpu_templates(synthesis: Synthesis) -> list[dict[str, Any]]:
    return [_inputs(r) for r in _of_type(synthesis.resources, LT) if "networkInterfaces" in r.inputs]


def _gpu_node_groups(synthesis: Synthesis) -> list[dict[str, Any]]:
    return [
        _inputs(r)
        for r in _of_type(synthesis.resources, NODE_GROUP)
        if r.inputs.get("amiType") == GPU_AMI_TYPE
    ]


# ----------------------------------------------------------------------------------------------
# Launch templates and node groups of the eks-h100 stack.
# ----------------------------------------------------------------------------------------------


def _expected_layout() -> list[tuple[int, int, str]]:
    return [(0, 0, "interface"), (0, 1, "efa-only")] + [(card, 0, "efa-only") for card in range(1, EFA_CARDS)]


def test_the_p5_layout_has_one_ena_primary_and_32_efa_only_interfaces():
    interfaces = p5_network_interfaces(["sg-1"])
    layout = [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces]
    assert layout == _expected_layout()
    assert sum(1 for *_, kind in layout if kind == "efa-only") == EFA_CARDS
    assert {card for card, _, _ in layout} == set(range(EFA_CARDS))


def test_gpu_launch_templates_carry_32_efa_interfaces_imdsv2_and_block_devices(synthesis):
    templates = _gpu_templates(synthesis)
    assert len(templates) == 2, "68 nodes = two Capacity Blocks = two launch templates"
    for lt in templates:
        layout = [
            (n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in lt["networkInterfaces"]
        ]
        assert layout == _expected_layout()
        efa = [n for n in lt["networkInterfaces"] if n["interfaceType"] == "efa-only"]
        assert len(efa) == EFA_CARDS
        # Every interface is in the EFA security group (the self-referencing one).
        assert all(n["securityGroups"] == ["cluster-efa-id"] for n in lt["networkInterfaces"])
        assert lt["instanceType"] == "p5.48xlarge"
        assert lt["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 1,
        }
        (root,) = lt["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["ebs"]["volumeType"] == "gp3" and root["ebs"]["encrypted"] == "true"
        assert lt["userData"] == node_user_data(True)
    # Every launch template, the system one too, requires IMDSv2.
    for template in _of_type(synthesis.resources, LT):
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"


def test_the_instance_store_nodeconfig_is_mime_user_data():
    import base64

    text = base64.b64decode(node_user_data(True) or "").decode()
    assert "Content-Type: application/node.eks.aws" in text and "strategy: RAID0" in text
    assert node_user_data(False) is None


def test_capacity_block_templates_target_their_blocks(synthesis):
    blocks = _raw()["target"]["eks"]["gpuNodes"]["h100"]["capacityBlocks"]
    templates = _gpu_templates(synthesis)
    targets = sorted(
        lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"]
        for lt in templates
    )
    assert targets == sorted(b["reservationId"] for b in blocks)
    for lt in templates:
        assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
        assert "placement" not in lt, "Capacity Blocks need no placement group"


def test_gpu_node_groups_use_the_nvidia_ami_capacity_blocks_and_the_gpu_taint(synthesis):
    groups = _gpu_node_groups(synthesis)
    assert sorted(g["scalingConfig"]["desiredSize"] for g in groups) == [4, CAPACITY_BLOCK_MAX_INSTANCES]
    assert (
        sum(g["scalingConfig"]["desiredSize"] for g in groups)
        == synthesis.config.fleet.node_groups["h100"].count
    )
    for group in groups:
        assert group["amiType"] == "AL2023_x86_64_NVIDIA"
        assert group["capacityType"] == "CAPACITY_BLOCK"
        assert group["taints"] == [{"key": GPU_TAINT_KEY, "effect": "NO_SCHEDULE"}]
        assert group["labels"]["nvidia.com/dra-kubelet-plugin"] == "true"
        assert group["labels"]["nvidia.com/gpu.present"] == "true"
        assert group["subnetIds"] == ["cluster-private-capacity-id"], "GPU nodes only in the capacity zone"
        sc = group["scalingConfig"]
        assert sc["minSize"] == sc["maxSize"] == sc["desiredSize"]
        assert "instanceTypes" not in group, "the instance type comes from the launch template"
        # One node at a time, the old instance gone before its replacement is launched: reserved
        # capacity has no spare instance for EKS's default surge (docs/disruptions.md).
        assert group["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}
    (system,) = [
        _inputs(r)
        for r in _of_type(synthesis.resources, NODE_GROUP)
        if r.inputs.get("amiType") != GPU_AMI_TYPE
    ]
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and "taints" not in system
    assert len(system["subnetIds"]) == 2


def test_the_efa_security_group_allows_all_traffic_to_and_from_itself(synthesis):
    (group,) = [
        r
        for r in _of_type(synthesis.resources, "aws:ec2/securityGroup:SecurityGroup")
        if r.name == "cluster-efa"
    ]
    group_id = f"{group.name}-id"
    rules = [
        (r.type.rsplit(":", 1)[1], _inputs(r))
        for r in synthesis.resources
        if r.type
        in (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        )
    ]
    self_rules = {
        kind
        for kind, rule in rules
        if rule["securityGroupId"] == group_id
        and rule.get("referencedSecurityGroupId") == group_id
        and rule["ipProtocol"] == "-1"
    }
    assert self_rules == {"SecurityGroupIngressRule", "SecurityGroupEgressRule"}


def test_the_cluster_is_private_api_mode_logged_and_pinned(synthesis):
    (cluster,) = [_inputs(r) for r in _of_type(synthesis.resources, "aws:eks/cluster:Cluster")]
    assert cluster["version"] == versions().kubernetes.eks
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    vpc = cluster["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert set(cluster["enabledClusterLogTypes"]) == {
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    }
    addons = {
        a["addonName"]: a["addonVersion"]
        for a in map(_inputs, _of_type(synthesis.resources, "aws:eks/addon:Addon"))
    }
    assert addons == {name: versions().software[f"eks-addon-{name}"] for name in ADDONS}
    cni = tuple(int(p) for p in addons["vpc-cni"].lstrip("v").split("-")[0].split("."))
    assert cni >= (1, 18, 5), "efa-only interfaces need VPC CNI 1.18.5 or newer"


def test_the_platform_uses_aws_dranet_and_the_gateway_an_nlb(synthesis):
    releases = {
        r.inputs.get("name"): _inputs(r)
        for r in synthesis.resources
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    assert releases["aws-dranet"]["chart"] == "aws-dranet"
    assert releases["aws-dranet"]["version"] == versions().chart("aws-dranet").version
    assert "gpu-operator" not in releases and "dranet" not in releases
    assert releases["dra-driver-nvidia-gpu"]["values"]["nvidiaDriverRoot"] == "/"
    (gateway,) = [
        _inputs(r) for r in synthesis.resources if r.type == "kubernetes:gateway.networking.k8s.io/v1:Gateway"
    ]
    annotations = gateway["spec"]["infrastructure"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-type"] == "nlb"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"


# ----------------------------------------------------------------------------------------------
# The EFA transport, derived from the target.
# ----------------------------------------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _kv_transfer_configs(value: Any) -> list[dict[str, Any]]:
    """Every --kv-transfer-config JSON in the launch scripts of a recorded object."""
    marker = "--kv-transfer-config '"
    return [
        json.loads(chunk.split("'", 1)[0]) for text in _strings(value) for chunk in text.split(marker)[1:]
    ]


def _env_pairs(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        own = [(value["name"], value["value"])] if set(value) == {"name", "value"} else []
        return own + [p for v in value.values() for p in _env_pairs(v)]
    if isinstance(value, list):
        return [p for v in value for p in _env_pairs(v)]
    return []


def _nixl_backends(config: dict[str, Any]) -> list[list[str]]:
    if config["kv_connector"] == "NixlConnector":
        return [config["kv_connector_extra_config"]["backends"]]
    nested = config.get("kv_connector_extra_config", {}).get("connectors", [])
    return [b for c in nested for b in _nixl_backends(c)]


def test_the_kv_transfer_uses_nixl_libfabric_and_the_pods_efa_settings(synthesis):
    (dset,) = [r for r in synthesis.resources if r.type.endswith("DisaggregatedSet")]
    spec = _inputs(dset)
    configs = _kv_transfer_configs(spec)
    assert len(configs) == 2, "one per role"
    assert all(_nixl_backends(c) == [["LIBFABRIC"]] for c in configs)
    env = set(_env_pairs(spec))
    for name, value in fabric_for("eks").engine_env:
        assert (name, value) in env, name
    assert synthesis.plan.role("prefill").fabric.name == "efa"


def test_the_engines_run_the_efa_build_pushed_to_the_stacks_ecr_repository(synthesis):
    (repo,) = _of_type(synthesis.resources, "aws:ecr/repository:Repository")
    (image,) = _of_type(synthesis.resources, "docker-build:index:Image")
    build = _inputs(image)
    assert build["buildArgs"]["FABRIC"] == "efa" and build["target"] == "serving"
    (tag,) = build["tags"]
    assert (
        tag
        == f"{OFFLINE_AWS_ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/{_inputs(repo)['name']}:{image_tag('efa')}"
    )
    # Content-hashed tags never move; only the build cache tags are rewritten.
    assert _inputs(repo)["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
    assert _inputs(repo)["imageTagMutabilityExclusionFilters"] == [
        {"filter": "buildcache-*", "filterType": "WILDCARD"}
    ]
    (dset,) = [r for r in synthesis.resources if r.type.endswith("DisaggregatedSet")]
    engines = [
        c
        for role in _inputs(dset)["spec"]["roles"]
        for c in role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
        if c["name"] == "vllm"
    ]
    assert len(engines) == 2 and {c["image"] for c in engines} == {tag}
    assert versions().image("vllm").ref not in json.dumps(_inputs(dset))
    # The built image's default user is not root; added capabilities need UID 0 to take effect.
    assert all(c["securityContext"]["runAsUser"] == 0 for c in engines)


def test_eks_without_the_image_build_is_a_config_error():
    raw = _raw()
    del raw["images"]
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.problems == [
        (
            "llmd-fleet:images.build",
            "must be true on eks when an instance spans nodes (serving.roles.*.nodesPerInstance > 1): "
            "EFA needs the built image, the upstream vLLM image has no EFA user space (libfabric); "
            "with one node per instance the upstream image serves, its KV moving over TCP",
        )
    ]


# ----------------------------------------------------------------------------------------------
# Serving settings never reach a cloud resource.
# ----------------------------------------------------------------------------------------------


def _cloud_inputs(synthesis: Synthesis) -> dict[tuple[str, str], Any]:
    return {
        (r.type, r.name): clean(r.inputs)
        for r in synthesis.resources
        if r.custom and r.type.startswith("aws:")
    }


def test_changing_serving_settings_changes_no_cluster_or_node_group_input(synthesis, tmp_path):
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    serving = document["config"]["llmd-fleet:serving"]
    serving["roles"]["prefill"].update(
        {"instances": 6, "gpuMemoryUtilization": 0.9, "maxNumBatchedTokens": 8192}
    )
    serving["roles"]["decode"].update({"instances": 4, "maxNumSeqs": 32, "mtpTokens": 2})
    serving["roles"]["prefill"]["mtpTokens"] = 2
    serving["modelLoadMinutes"] = 60
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(document))
    changed = synthesize(tmp_path, STACK)
    assert changed.plan.role("prefill").instances == 6, "the serving change took effect"
    before, after = _cloud_inputs(synthesis), _cloud_inputs(changed)
    assert any(t == NODE_GROUP for t, _ in before) and any(t == "aws:eks/cluster:Cluster" for t, _ in before)
    assert before == after


# ----------------------------------------------------------------------------------------------
# ODCR capacity, through the component under mocks.
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def engine() -> RecordingMocks:
    mocks = start_mock_engine(RecordingMocks())
    return mocks


def _eks_with(capacity: dict[str, Any]) -> tuple[EksTargetConfig, Any]:
    raw = _raw()
    raw["target"]["eks"]["gpuNodes"]["h100"] = capacity
    config = parse_config(raw)
    assert isinstance(config.target, EksTarget)
    return config.target.eks, config.fleet.node_groups


def _cluster(eks: EksTargetConfig, node_groups: Any) -> EksCluster:
    return EksCluster(
        "cluster",
        {
            "eks": eks,
            "node_groups": node_groups,
            "cluster_name": "llmd-test",
            "kubernetes_version": versions().kubernetes.eks,
            "addon_versions": {name: versions().software[f"eks-addon-{name}"] for name in ADDONS},
        },
    )


@pulumi.runtime.test
def test_an_odcr_comes_with_a_cluster_placement_group_and_one_node_group(engine):
    eks, groups = _eks_with({"capacity": "odcr"})
    cluster = _cluster(eks, groups)

    def check(_: Any) -> None:
        created = engine.created
        (pg,) = _of_type(created, "aws:ec2/placementGroup:PlacementGroup")
        assert pg.inputs["strategy"] == "cluster"
        (odcr,) = _of_type(created, "aws:ec2/capacityReservation:CapacityReservation")
        assert odcr.inputs["instanceCount"] == 68 and odcr.inputs["instanceType"] == "p5.48xlarge"
        assert odcr.inputs["instanceMatchCriteria"] == "targeted"
        assert odcr.inputs["availabilityZone"] == eks.availability_zone
        (lt,) = [r for r in _of_type(created, LT) if "networkInterfaces" in r.inputs]
        assert lt.inputs["placement"] == {"groupName": pg.inputs["name"]} == {"groupName": "llmd-test-h100"}
        assert "instanceMarketOptions" not in lt.inputs
        (group,) = [r for r in _of_type(created, NODE_GROUP) if r.inputs.get("amiType") == GPU_AMI_TYPE]
        assert group.inputs["capacityType"] == "ON_DEMAND"
        assert group.inputs["scalingConfig"]["desiredSize"] == 68

    return pulumi.Output.all(*(g.urn for g in cluster.gpu_node_groups.values())).apply(check)


@pulumi.runtime.test
def test_an_existing_odcr_uses_its_placement_group(engine):
    eks, groups = _eks_with(
        {"capacity": "odcr", "reservationId": "cr-0aaaabbbbccccdddd", "placementGroup": "p5-pg"}
    )
    cluster = _cluster(eks, groups)

    def check(_: Any) -> None:
        assert not _of_type(engine.created, "aws:ec2/capacityReservation:CapacityReservation")
        (lt,) = [r for r in _of_type(engine.created, LT) if "networkInterfaces" in r.inputs]
        assert lt.inputs["placement"] == {"groupName": "p5-pg"}
        target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == "cr-0aaaabbbbccccdddd"

    return pulumi.Output.all(*(g.urn for g in cluster.gpu_node_groups.values())).apply(check)


@pulumi.runtime.test
def test_the_kubeconfig_is_a_secret(engine):
    eks, groups = _eks_with(_raw()["target"]["eks"]["gpuNodes"]["h100"])
    cluster = _cluster(eks, groups)
    return pulumi.Output.all(cluster.provider.urn, pulumi.Output.is_secret(cluster.kubeconfig)).apply(
        lambda a: _assert(a[1] is True)
    )


def _assert(condition: bool) -> None:
    assert condition


def test_kubeconfig_text_authenticates_with_aws_eks_get_token():
    doc = json.loads(kubeconfig_text("c", "https://x", "Q0E=", "us-east-2"))
    assert doc["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "c"]
    assert doc["clusters"][0]["cluster"]["server"] == "https://x"


def test_subnets_are_carved_from_the_vpc():
    assert subnet_cidrs("10.64.0.0/16") == {
        "private-capacity": "10.64.0.0/18",
        "private-secondary": "10.64.64.0/18",
        "public-capacity": "10.64.128.0/24",
        "public-secondary": "10.64.129.0/24",
    }


# ----------------------------------------------------------------------------------------------
# Config errors name the key.
# ----------------------------------------------------------------------------------------------


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


class _Delete:
    """Marks a key to delete; its repr keeps test ids the same in every process (pytest-xdist)."""

    def __repr__(self) -> str:
        return "<delete>"


_DELETE = _Delete()
_GPU = "target.eks.gpuNodes.h100"


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        (
            {f"{_GPU}.capacityBlocks": [{"reservationId": "cr-0123456789abcdef0", "instances": 68}]},
            "llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks[0].instances",
            "at most 64",
        ),
        (
            {f"{_GPU}.capacityBlocks": [{"reservationId": "cr-0123456789abcdef0", "instances": 64}]},
            "llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks",
            "add up to 64, but node group 'h100' has count 68",
        ),
        (
            {f"{_GPU}.placementGroup": "pg"},
            "llmd-fleet:target.eks.gpuNodes.h100.placementGroup",
            "only with capacity odcr",
        ),
        (
            {f"{_GPU}.capacity": "odcr"},
            "llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks",
            "only with capacity capacity-block",
        ),
        (
            {f"{_GPU}.capacityBlocks": []},
            "llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks",
            "required when capacity is",
        ),
        (
            {"target.eks.publicAccessCidrs": ["0.0.0.0/0"]},
            "llmd-fleet:target.eks.publicAccessCidrs[0]",
            "whole internet",
        ),
        (
            {"target.eks.secondaryAvailabilityZone": "us-east-2a"},
            "llmd-fleet:target.eks.secondaryAvailabilityZone",
            "two zones",
        ),
        (
            {"target.eks.availabilityZone": "us-west-2a"},
            "llmd-fleet:target.eks.availabilityZone",
            "zone of region us-east-2",
        ),
        ({"target.eks": _DELETE}, "llmd-fleet:target.eks", "required for kind eks"),
        (
            {"target.kubernetesVersion": "1.99.0"},
            "llmd-fleet:target.kubernetesVersion",
            "EKS cluster is created at",
        ),
        ({"fleet.nodeGroups.h100.nicsPerNode": 8}, "llmd-fleet:fleet.nodeGroups.h100.nicsPerNode", "32 EFA"),
        (
            {"fleet.nodeGroups.h100.nicDeviceClass": "rdma-nic.llmd-fleet.io"},
            "llmd-fleet:fleet.nodeGroups.h100.nicDeviceClass",
            EFA_DEVICE_CLASS,
        ),
        (
            {"fleet.nodeGroups.h100.nodeLabels": {"nvidia.com/gpu.present": "true"}},
            "llmd-fleet:fleet.nodeGroups.h100.nodeLabels",
            "dra-kubelet-plugin",
        ),
        (
            {"target.eks.gpuNodes.a100": {"capacity": "odcr"}},
            "llmd-fleet:target.eks.gpuNodes.a100",
            "no fleet node group",
        ),
        ({"target.eks.gpuNodes": {}}, "llmd-fleet:target.eks.gpuNodes", "at least 1"),
    ],
)
def test_bad_eks_config_names_the_key(changes, path, words):
    raw = _raw()
    for key, value in changes.items():
        _set(raw, key, value)
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    matching = [message for p, message in info.value.problems if p == path]
    assert matching and any(words in m for m in matching), info.value.problems


def test_an_existing_odcr_needs_its_placement_group():
    raw = _raw()
    raw["target"]["eks"]["gpuNodes"]["h100"] = {"capacity": "odcr", "reservationId": "cr-0aaaabbbbccccdddd"}
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert [p for p, _ in info.value.problems] == ["llmd-fleet:target.eks.gpuNodes.h100.placementGroup"]


def test_the_eks_section_is_refused_on_other_targets():
    raw = stack_raw_config("onprem-h100")
    raw["target"]["eks"] = _raw()["target"]["eks"]
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert ("llmd-fleet:target.eks", "only for kind eks") in info.value.problems


def test_the_stack_file_documents_its_placeholders():
    text = Path(STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text()
    assert text.count("Placeholder") >= 3


# ----------------------------------------------------------------------------------------------
# EksCluster's parts: child components by concern, resources keeping their state by alias.
# ----------------------------------------------------------------------------------------------

_PART_OF_TYPE = {
    "aws:ec2/vpc:Vpc": "EksNetwork",
    "aws:ec2/subnet:Subnet": "EksNetwork",
    "aws:ec2/natGateway:NatGateway": "EksNetwork",
    "aws:ec2/securityGroup:SecurityGroup": "EksNetwork",
    "aws:iam/role:Role": "EksIam",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "EksIam",
    "aws:eks/cluster:Cluster": "EksCluster",
    "aws:eks/addon:Addon": "EksCluster",
}


def test_the_cluster_parts_group_resources_by_concern_and_alias_their_old_parent(synthesis):
    cluster = "urn:pulumi:eks-h100::llmd-fleet::llmd-fleet:cluster:EksCluster"
    by_urn = {r.urn: r.aliases for r in synthesis.registrations if r.urn.startswith(cluster + "$")}
    for typ, part in _PART_OF_TYPE.items():
        urns = [u for u in by_urn if u.split("::")[2].endswith("$" + typ)]
        assert urns, typ
        for urn in urns:
            chain = urn.split("::")[2].split("$")
            assert chain[-2] == f"llmd-fleet:cluster:{part}", urn
            if part != "EksCluster":
                # Before the split every part's resource was a direct child of the cluster.
                assert by_urn[urn] == (f"{cluster}${typ}::{urn.split('::')[-1]}",), urn
    gpu = [u for u in by_urn if "$aws:eks/nodeGroup:NodeGroup::" in u and "-block" in u]
    assert [u.split("::")[2].split("$")[-2] for u in gpu] == ["llmd-fleet:cluster:EksGpuCapacity"] * 2
    system = [u for u in by_urn if u.endswith("NodeGroup::cluster-system")]
    assert [u.split("::")[2].split("$")[-2] for u in system] == ["llmd-fleet:cluster:EksSystemNodes"]


def test_eks_with_one_node_per_instance_serves_the_upstream_image_over_tcp() -> None:
    """eks-h100-2node: `images.build: false` is accepted when no instance spans nodes; the plan's
    fabric is VPC_TCP (NIXL over UCX, no EFA environment) and the engines run the upstream image."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config
    from llmd_fleet.images.build import serving_image
    from llmd_fleet.plan.fleet import plan_fleet
    from llmd_fleet.targets.eks.fabric import EFA, VPC_TCP

    config = stack_config(read_stack_file(STACKS_DIR, "eks-h100-2node"))
    assert not config.images.build
    plan = plan_fleet(config)
    assert plan.role("prefill").fabric is VPC_TCP and plan.role("decode").fabric is VPC_TCP
    assert VPC_TCP.nixl_backends == ("UCX",) and "FI_PROVIDER" not in dict(VPC_TCP.engine_env)
    assert serving_image(fabric_for("eks", False), None) == versions().image("vllm").ref
    assert fabric_for("eks") is EFA and fabric_for("eks", True) is EFA
    # The same stack with an instance of two nodes needs the build again.
    raw = stack_raw_config("eks-h100-2node")
    raw["fleet"]["nodeGroups"]["h100"]["count"] = 4
    raw["target"]["eks"]["gpuNodes"]["h100"]["capacityBlocks"][0]["instances"] = 4
    raw["serving"]["roles"]["decode"]["nodesPerInstance"] = 2
    raw["serving"]["roles"]["decode"]["dataParallel"] = 16
    raw["serving"]["roles"]["decode"]["expertParallel"] = 16
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert [p.key for p in err.value.problems] == ["llmd-fleet:images.build"]
