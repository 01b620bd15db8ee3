"""Serving pod templates and the DisaggregatedSet spec (pure builders, Kubernetes camelCase)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from llmd_fleet.config.fleet import NodeGroupConfig
from llmd_fleet.conventions import GPU_RESOURCE as GPU_RESOURCE
from llmd_fleet.core.fabric import Fabric
from llmd_fleet.core.pod_context import (
    ENGINE_SKIPS,
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    RUNTIME_DEFAULT_SECCOMP,
    Skip,
    capability_skips,
    engine_security_context,
    skip_annotations,
)
from llmd_fleet.layers.modelexpress.specs import server_address
from llmd_fleet.layers.serving.config import TEARDOWN_SECONDS, RoleConfig
from llmd_fleet.layers.serving.simulator import TMP_SIZE_MIB, simulator_container
from llmd_fleet.layers.serving.vllm import (
    CACHE_PATH,
    KV_TIER_PATH,
    SHM_PATH,
    TMP_PATH,
    engine_env,
    launch_script,
    startup_budget_seconds,
)
from llmd_fleet.plan.fleet import FleetPlan, RolePlan
from llmd_fleet.platform.dra import claim_template_name, container_claims, pod_claims
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

SIDECAR_NAME = "routing-proxy"
ENGINE_NAME = "vllm"
PROBE_PERIOD_SECONDS = 10


@dataclass(frozen=True)
class PodInputs:
    """What a serving pod template needs besides the plan."""

    instance: str
    labels: dict[str, str]
    hf_token_secret: str | None
    engine_image: pulumi.Input[str]
    """The one image every engine container runs (llmd_fleet/images/build.py serving_image)."""


def _quantity_gi(gib: int) -> str:
    return f"{gib}Gi"


def startup_failure_threshold(budget_seconds: int) -> int:
    """Startup-probe failures allowed so that the probe waits at least the load budget."""
    return math.ceil(budget_seconds / PROBE_PERIOD_SECONDS)


def _engine_container(
    config: StackConfig, role: RoleConfig, plan: RolePlan, group: NodeGroupConfig, inputs: PodInputs
) -> dict[str, Any]:
    serving = config.serving
    tier = serving.kv_tier
    launch = launch_script(config.model, role, plan, tier)
    prefix = "rank" if plan.name == "prefill" else "vllm-rank"
    ports = [
        {"name": f"{prefix}{i}", "containerPort": port, "protocol": "TCP"}
        for i, port in enumerate(plan.engine_ports)
    ]
    ports += [
        {"name": "supervisor", "containerPort": plan.supervisor_port, "protocol": "TCP"},
        {"name": "dp-rpc", "containerPort": plan.dp_rpc_port, "protocol": "TCP"},
    ]
    ports += [
        {"name": f"nixl-{i}", "containerPort": port, "protocol": "TCP"}
        for i, port in enumerate(plan.nixl_side_channel_ports)
    ]
    ports += [
        {"name": f"kv-events-{i}", "containerPort": port, "protocol": "TCP"}
        for i, port in enumerate(plan.kv_events_ports)
    ]
    ports += [
        {"name": f"p2p-{i}", "containerPort": port, "protocol": "TCP"}
        for i, port in enumerate(plan.p2p_ports)
    ]
    if plan.weights is not None and plan.weights.mode == "modelexpress":
        # The ModelExpress client's NIXL listeners and metadata servers, one per GPU.
        ports += [
            {"name": f"mx-nixl-{i}", "containerPort": port, "protocol": "TCP"}
            for i, port in enumerate(plan.weights.metadata_ports)
        ]
        ports += [
            {"name": f"mx-grpc-{i}", "containerPort": port, "protocol": "TCP"}
            for i, port in enumerate(plan.weights.worker_grpc_ports)
        ]
    limits: dict[str, str] = {
        "cpu": str(plan.pod_cpus),
        "memory": _quantity_gi(plan.pod_memory_gib),
        "ephemeral-storage": _quantity_gi(serving.model_cache_gib),
    }
    resources: dict[str, Any] = {}
    if plan.claim is not None:
        # DRA: GPUs and NICs come from the pod's ResourceClaim, never from device plugins too.
        resources["claims"] = container_claims()
    else:
        limits[GPU_RESOURCE] = str(plan.gpus_per_node)
        if group.rdma_resource:
            limits[group.rdma_resource] = str(group.rdma_resource_per_pod)
    # Requests equal limits: Guaranteed QoS, so the kubelet evicts these pods last.
    resources.update({"requests": dict(limits), "limits": limits})
    return {
        "name": ENGINE_NAME,
        "image": inputs.engine_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", launch.script],
        "env": engine_env(
            role,
            plan,
            serving.model_load_seconds,
            inputs.hf_token_secret,
            tier,
            modelexpress_address=server_address(serving.name, serving.namespace)
            if serving.weight_loading == "modelexpress"
            else None,
        ),
        "ports": ports,
        "resources": resources,
        # Root with IPC_LOCK (pins RDMA/NIXL buffers) and SYS_RAWIO (NVSHMEM/GDRCopy map the
        # NIC BARs) only.
        "securityContext": engine_security_context(),
        "volumeMounts": [
            {"name": "dshm", "mountPath": SHM_PATH},
            {"name": "cache", "mountPath": CACHE_PATH},
            # What vLLM, torch and the fabric libraries write outside their caches (ZMQ IPC
            # sockets, torch inductor's scratch) goes to /tmp: the same emptyDir, one budget.
            {"name": "cache", "mountPath": TMP_PATH, "subPath": "tmp"},
            *([{"name": "kv-tier", "mountPath": KV_TIER_PATH}] if tier.secondary is not None else []),
        ],
        # The DP supervisor answers /health with 200 only when every local rank's API server does
        # (vllm entrypoints/launchers/dp_supervisor.py), so all probes go to it.
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "supervisor"},
            "periodSeconds": PROBE_PERIOD_SECONDS,
            "timeoutSeconds": 5,
            "failureThreshold": startup_failure_threshold(
                startup_budget_seconds(plan, serving.model_load_seconds)
            ),
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": "supervisor"},
            "periodSeconds": 30,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "supervisor"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
    }


def _sidecar_container(plan: RolePlan) -> dict[str, Any]:
    """llm-d's P/D routing sidecar as a native sidecar: it proxies each local DP rank's port
    (8000+i -> 8200+i) and runs the remote prefill before handing the request to decode."""
    resources = {"cpu": "1", "memory": "1Gi"}
    return {
        "name": SIDECAR_NAME,
        "image": versions().image("routing-sidecar").ref,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "args": [
            f"--port={plan.sidecar_ports[0]}",
            f"--model-server-port={plan.engine_ports[0]}",
            f"--data-parallel-size={plan.dp_size_local}",
            "--kv-connector=nixlv2",
            # In-cluster hop between the gateway and the pod; TLS terminates at the gateway.
            "--secure-proxy=false",
            "--enable-prefiller-sampling",
            "--zap-log-level=1",
            # Pull a prefix from the peer that holds it (the EPP names it) instead of recomputing.
            *(["--enable-p2p-pull", f"--p2p-connector-port={plan.p2p_ports[0]}"] if plan.p2p_ports else []),
        ],
        "ports": [
            {"name": f"rank{i}", "containerPort": port, "protocol": "TCP"}
            for i, port in enumerate(plan.sidecar_ports)
        ],
        "resources": {"requests": dict(resources), "limits": resources},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def _simulator_pod_template(config: StackConfig, plan: RolePlan, inputs: PodInputs) -> dict[str, Any]:
    """A simulator pod (kind local): the simulator and, on decode, the same routing sidecar;
    restricted security, no GPU toleration, claim or fabric addition
    (llmd_fleet/layers/serving/simulator.py)."""
    role: RoleConfig = getattr(config.serving.roles, plan.name)
    group = config.fleet.node_groups[plan.node_group]
    image = inputs.engine_image
    assert isinstance(image, str), "the simulator image is the pinned matrix ref, never a build output"
    spec: dict[str, Any] = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
        "terminationGracePeriodSeconds": plan.drain_seconds + TEARDOWN_SECONDS,
        "nodeSelector": dict(sorted(group.node_labels.items())),
        "containers": [
            simulator_container(config.model, role, plan, config.serving.simulator, image),
        ],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_SIZE_MIB}Mi"}}],
    }
    if plan.sidecar_ports:
        spec["initContainers"] = [_sidecar_container(plan)]
    annotations = skip_annotations((IMAGE_BY_TAG, PULL_IF_NOT_PRESENT))
    return {"metadata": {"labels": dict(inputs.labels), "annotations": annotations}, "spec": spec}


def serving_pod_template(config: StackConfig, plan: RolePlan, inputs: PodInputs) -> dict[str, Any]:
    """The pod template of every pod (leader and workers) of one role's LWS groups."""
    if plan.engine == "simulator":
        return _simulator_pod_template(config, plan, inputs)
    role: RoleConfig = getattr(config.serving.roles, plan.name)
    group = config.fleet.node_groups[plan.node_group]
    spec: dict[str, Any] = {
        # Hundreds of Services in the namespace would otherwise become env vars of vLLM.
        "enableServiceLinks": False,
        # Nothing in a serving pod talks to the API server.
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
        # The drain, then teardown: the DP supervisor waits for its ranks to exit, the engines
        # free GPU memory and NIXL registrations (SIGKILL before that can leave a GPU busy).
        "terminationGracePeriodSeconds": plan.drain_seconds + TEARDOWN_SECONDS,
        "nodeSelector": dict(sorted(group.node_labels.items())),
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [_engine_container(config, role, plan, group, inputs)],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{plan.shm_gib}Gi"}},
            {"name": "cache", "emptyDir": {"sizeLimit": f"{config.serving.model_cache_gib}Gi"}},
        ],
    }
    secondary = config.serving.kv_tier.secondary
    if secondary is not None and secondary.type == "local-nvme":
        spec["volumes"].append(
            {"name": "kv-tier", "hostPath": {"path": secondary.path, "type": "DirectoryOrCreate"}}
        )
    # The fabric's own pod additions (e.g. GKE TCPXO: the RxDM sidecar, host libraries, devices).
    fabric = plan.fabric
    spec["volumes"] += [dict(v) for v in fabric.volumes]
    spec["containers"][0]["volumeMounts"] += [dict(m) for m in fabric.engine_volume_mounts]
    sidecars = [dict(c) for c in fabric.sidecars]
    if plan.sidecar_ports:
        sidecars.append(_sidecar_container(plan))
    if sidecars:
        spec["initContainers"] = sidecars
    if plan.claim is not None:
        spec["resourceClaims"] = pod_claims(claim_template_name(plan.node_group, plan.claim))
    metadata: dict[str, Any] = {"labels": dict(inputs.labels)}
    annotations = {**dict(fabric.pod_annotations), **skip_annotations(serving_pod_skips(fabric))}
    metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def serving_pod_skips(fabric: Fabric) -> tuple[Skip, ...]:
    """The checkov checks a serving pod fails on purpose (llmd_fleet/core/pod_context.py): the
    engine's root and capabilities everywhere, and those of the fabric's sidecars (GKE's RxDM:
    llmd_fleet/targets/gke/tcpxo_plan.py), which the target states on its `Fabric`."""
    capability = capability_skips(fabric.sidecar_capability_reason if fabric.sidecars else "")
    return (*ENGINE_SKIPS, *capability, *(fabric.sidecar_skips if fabric.sidecars else ()))


def _kv_tier_claims(config: StackConfig) -> dict[str, Any]:
    """A PVC per pod for a `pvc` secondary KV tier (LWS volumeClaimTemplates)."""
    secondary = config.serving.kv_tier.secondary
    if secondary is None or secondary.type != "pvc":
        return {}
    return {
        "volumeClaimTemplates": [
            {
                "metadata": {"name": "kv-tier"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": secondary.storage_class,
                    "resources": {"requests": {"storage": f"{secondary.size_gib}Gi"}},
                },
            }
        ]
    }


def disaggregated_set_spec(
    config: StackConfig, fleet: FleetPlan, inputs_by_role: Mapping[str, PodInputs]
) -> dict[str, Any]:
    """spec of the DisaggregatedSet: one multi-node LWS template per role."""
    roles = []
    for plan in fleet.roles:
        # An autoscaled role takes its replicas from its DisaggregatedSetRoleScaler, which KEDA
        # drives (llmd_fleet/layers/autoscaling/component.py); LWS ignores spec.replicas then, and its
        # webhook warns when one is set above 1, so none is rendered.
        scaling = {"scaling": {"mode": "External"}} if plan.autoscaled else {}
        replicas = {} if plan.autoscaled else {"replicas": plan.instances}
        roles.append(
            {
                "name": plan.name,
                **scaling,
                "spec": {
                    **replicas,
                    # Workers start only once the leader exists: they need LWS_LEADER_ADDRESS.
                    "startupPolicy": "LeaderCreated",
                    "leaderWorkerTemplate": {
                        **_kv_tier_claims(config),
                        "size": plan.lws_size,
                        # One crashed rank breaks the DP/EP world of the whole group.
                        "restartPolicy": "RecreateGroupOnPodRestart",
                        "workerTemplate": serving_pod_template(config, plan, inputs_by_role[plan.name]),
                    },
                    "rolloutStrategy": {
                        "type": "RollingUpdate",
                        # From the plan: roles surge only into spare nodes (plan.rollouts_for).
                        "rollingUpdateConfiguration": {
                            "maxSurge": plan.max_surge,
                            "maxUnavailable": plan.max_unavailable,
                        },
                    },
                },
            }
        )
    return {"roles": roles}
