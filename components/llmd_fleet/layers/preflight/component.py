"""The fabric preflight Job: two pods on two GPU nodes of the serving node group, each with the
serving pods' DRA claim (or device-plugin resources) and the fabric's pod additions, run the NIXL
probe (llmd_fleet/layers/preflight/probe.py) in the serving image before the first serving rollout.

Pure builders first (Kubernetes camelCase), the `FabricPreflight` component last. What it renders
when `serving.preflight.enabled` (docs/preflight.md):

- ConfigMap `<serving>-preflight-probe`: the probe's source, read from the package file, mounted
  at /preflight;
- headless Service `<serving>-preflight`: the pods' subdomain, so the initiator (completion index
  1) finds the target (index 0) at `<job>-0.<service>.<namespace>.svc`. The Job controller sets
  an Indexed Job pod's hostname to `<job name>-<index>` (k8s.io/kubernetes
  pkg/controller/job/job_controller.go) and JOB_COMPLETION_INDEX in its environment
  (pkg/controller/job/indexed_job_utils.go);
- Job `<serving>-preflight`: Indexed, 2 completions in parallel, pods on two different nodes
  (required anti-affinity on the hostname), no retries beyond `BACKOFF_LIMIT`, bounded by
  activeDeadlineSeconds.

Pulumi's Kubernetes provider waits for a Job to complete on create and update and fails the
update when the Job fails (provider/pkg/await/job.go), unless `pulumi.com/skipAwait` is "true"
(provider/pkg/metadata/overrides.go ReadyCondition, SkipAwaitLogic). `pulumi.com/replaceUnready`
makes the next update replace a Job that is not complete (provider/pkg/provider/provider.go Diff),
so a failed preflight runs again on the next `pulumi up`; `pulumi.com/timeoutSeconds` sets how
long the provider waits. All read in pulumi/pulumi-kubernetes v4.32.0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.conventions import GPU_RESOURCE, PREFLIGHT_COMPONENT, RUNS_BEFORE_ANNOTATION
from llmd_fleet.core.pod_context import (
    ENGINE_SKIPS,
    RUNTIME_DEFAULT_SECCOMP,
    capability_skips,
    engine_security_context,
    skip_annotations,
)
from llmd_fleet.labels import common_labels
from llmd_fleet.layers.preflight import probe
from llmd_fleet.layers.preflight.specs import PORT, job_name, probe_selector
from llmd_fleet.plan.fleet import FleetPlan, RolePlan
from llmd_fleet.platform.dra import claim_template_name, container_claims, pod_claims

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

PROBE_FILE = Path(probe.__file__)
PROBE_KEY = "probe.py"
PROBE_MOUNT = "/preflight"
PORT_NAME = "nixl-metadata"
CONTAINER_NAME = "probe"
PODS = 2
BACKOFF_LIMIT = 1
"""Pod failures the Job tolerates before it fails: one retry for a pod lost to its node."""
PROBE_CPUS = 4
MEMORY_MARGIN_GIB = 4
"""Container memory above the probe's two buffers (target: its buffer and the expected pattern)."""
SKIP_AWAIT = "pulumi.com/skipAwait"
REPLACE_UNREADY = "pulumi.com/replaceUnready"
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"


def probe_labels(config: StackConfig) -> dict[str, str]:
    """Labels of the preflight pods: never the serving pool's (`llm-d.ai/inference-serving`), so
    the router, the InferencePool and the serving NetworkPolicy leave them alone."""
    return {
        **common_labels(PREFLIGHT_COMPONENT, config.serving.name),
        "app.kubernetes.io/name": "nixl-preflight",
    }


def paired_role(plan: FleetPlan) -> RolePlan:
    """The role whose node group, claim and fabric the probe pods copy: prefill and decode share
    them (parse_config refuses a preflight across two node groups)."""
    return plan.role("prefill")


def threshold(config: StackConfig, plan: FleetPlan) -> probe.Threshold:
    """One fabric NIC's line rate of the serving node group times `minEfficiency`, or no rate
    gate where the fabric has none it can be held to (`Fabric.preflight_rate_gate`)."""
    role = paired_role(plan)
    group = config.fleet.node_groups[role.node_group]
    assert group.nic_gbps is not None  # parse_config fills in the target's NIC
    return probe.Threshold(
        nic_gbps=group.nic_gbps,
        efficiency=config.serving.preflight.min_efficiency,
        gated=role.fabric.preflight_rate_gate,
    )


def threshold_summary(config: StackConfig, plan: FleetPlan) -> str:
    """The gate the plan prints: the figure (or that there is none) and the fabric's basis."""
    limit, fabric = threshold(config, plan), paired_role(plan).fabric
    figure = (
        f"{limit.min_gbps:g} Gb/s each direction ({limit.nic_gbps:g} Gb/s x {limit.efficiency:g})"
        if limit.gated
        else "none: every byte verified, rates reported, no rate gate"
    )
    return f"{figure}; {fabric.name}: {fabric.preflight_basis}"


def probe_source() -> str:
    """The probe module's source, as the ConfigMap carries it."""
    return PROBE_FILE.read_text()


def memory_gib(config: StackConfig) -> int:
    """Two buffers of transferMiB (rounded up to GiB) plus the margin."""
    return 2 * -(-config.serving.preflight.transfer_mib // 1024) + MEMORY_MARGIN_GIB


def job_annotations(config: StackConfig) -> dict[str, str]:
    """The preflight Job's annotations: checkov's deliberate skips, Pulumi's replace-when-unready and
    timeout, and either the serving rollout it gates (`serving.preflight.gateServing`) or no await."""
    preflight = config.serving.preflight
    annotations = {
        # What checkov reports on purpose (it reads them from the workload's own metadata): the
        # probe runs as the engine does, as root with IPC_LOCK and SYS_RAWIO, from a tag.
        **skip_annotations((*ENGINE_SKIPS, *capability_skips())),
        REPLACE_UNREADY: "true",
        # The provider gives up waiting when the Job itself would.
        TIMEOUT_SECONDS: str(preflight.deadline_minutes * 60),
    }
    if preflight.gate_serving:
        # What the program makes wait for this Job (ModelServing's depends_on); the GPU budget
        # policy reads it.
        annotations[RUNS_BEFORE_ANNOTATION] = f"DisaggregatedSet/{config.serving.name}"
    else:
        annotations[SKIP_AWAIT] = "true"
    return annotations


def _env(config: StackConfig, plan: FleetPlan) -> list[dict[str, Any]]:
    preflight, role = config.serving.preflight, paired_role(plan)
    limit = threshold(config, plan)
    name, namespace = job_name(config), config.serving.namespace
    values = {
        "PREFLIGHT_NAME": name,
        "PREFLIGHT_PEER": f"{name}-0.{name}.{namespace}.svc",
        "PREFLIGHT_PORT": str(PORT),
        "PREFLIGHT_BACKEND": role.fabric.nixl_backends[0],
        "PREFLIGHT_SIZE_MIB": str(preflight.transfer_mib),
        "PREFLIGHT_ITERATIONS": str(preflight.iterations),
        **(
            {"PREFLIGHT_NIC_GBPS": str(limit.nic_gbps), "PREFLIGHT_EFFICIENCY": str(limit.efficiency)}
            if limit.gated
            # No reachable rate is known for this fabric (Fabric.preflight_basis): bytes only.
            else {"PREFLIGHT_RATE_GATE": "off"}
        ),
        "PREFLIGHT_TIMEOUT_SECONDS": str(preflight.deadline_minutes * 60),
    }
    # The engines' fabric settings (UCX/libfabric providers, interfaces), so the probe takes the
    # transport the KV transfers take.
    return [{"name": k, "value": v} for k, v in values.items()] + [
        {"name": k, "value": v} for k, v in role.fabric.engine_env
    ]


def probe_pod_template(config: StackConfig, plan: FleetPlan, image: pulumi.Input[str]) -> dict[str, Any]:
    """The pod template of both probe pods."""
    role = paired_role(plan)
    group = config.fleet.node_groups[role.node_group]
    limits: dict[str, str] = {"cpu": str(PROBE_CPUS), "memory": f"{memory_gib(config)}Gi"}
    resources: dict[str, Any] = {}
    if role.claim is not None:
        # The serving pods' claim shape: every GPU of the node and the NICs on their PCIe roots.
        resources["claims"] = container_claims()
    else:
        limits[GPU_RESOURCE] = str(role.gpus_per_node)
        if group.rdma_resource:
            limits[group.rdma_resource] = str(group.rdma_resource_per_pod)
    resources.update({"requests": dict(limits), "limits": limits})
    container = {
        "name": CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{PROBE_MOUNT}/{PROBE_KEY}"],
        "env": _env(config, plan),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "resources": resources,
        # As the engine: root with IPC_LOCK (registering pinned buffers) and SYS_RAWIO only.
        "securityContext": engine_security_context(),
        "volumeMounts": [
            {"name": "probe", "mountPath": PROBE_MOUNT, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *(dict(m) for m in role.fabric.engine_volume_mounts),
        ],
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": job_name(config),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
        "nodeSelector": dict(sorted(group.node_labels.items())),
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        # Two nodes, never one: the bytes must cross the fabric.
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": probe_selector(config)},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        "containers": [container],
        "volumes": [
            {"name": "probe", "configMap": {"name": f"{job_name(config)}-probe"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            *(dict(v) for v in role.fabric.volumes),
        ],
    }
    if role.claim is not None:
        spec["resourceClaims"] = pod_claims(claim_template_name(role.node_group, role.claim))
    metadata: dict[str, Any] = {"labels": probe_labels(config)}
    if role.fabric.pod_annotations:
        metadata["annotations"] = dict(role.fabric.pod_annotations)
    return {"metadata": metadata, "spec": spec}


def job_spec(config: StackConfig, plan: FleetPlan, image: pulumi.Input[str]) -> dict[str, Any]:
    """spec of the preflight Job."""
    return {
        "completionMode": "Indexed",
        "completions": PODS,
        "parallelism": PODS,
        "backoffLimit": BACKOFF_LIMIT,
        "activeDeadlineSeconds": config.serving.preflight.deadline_minutes * 60,
        "template": probe_pod_template(config, plan, image),
    }


def service_spec(config: StackConfig) -> dict[str, Any]:
    """The headless Service that gives the probe pods DNS names; addresses are published before
    the pods are ready (they have no readiness probe to pass)."""
    return {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": probe_selector(config),
        "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
    }


class FabricPreflightArgs(TypedDict):
    """Arguments of `FabricPreflight`. Every key is required."""

    config: StackConfig
    """The validated stack config; `serving.preflight` sizes the probe, `serving` names the
    namespace and the objects."""
    plan: FleetPlan
    """The fleet plan; the prefill role gives the node group, claim and fabric."""
    engine_image: pulumi.Input[str]
    """The image the probe runs in: the engines' own serving image, which carries NIXL
    (`serving_image`)."""


class FabricPreflight(pulumi.ComponentResource):
    """The probe's ConfigMap, the pods' headless Service and the Indexed Job."""

    job: k8s.batch.v1.Job

    def __init__(self, name: str, args: FabricPreflightArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:serving:FabricPreflight", name, {}, opts)
        config, plan = args["config"], args["plan"]
        namespace, job = config.serving.namespace, job_name(config)
        labels = common_labels(PREFLIGHT_COMPONENT, config.serving.name)
        child = pulumi.ResourceOptions(parent=self)
        source = k8s.core.v1.ConfigMap(
            f"{name}-probe",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{job}-probe", namespace=namespace, labels=labels),
            data={PROBE_KEY: probe_source()},
            opts=child,
        )
        peers = k8s.core.v1.Service(
            f"{name}-peers",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=job, namespace=namespace, labels=labels),
            spec=cast(k8s.core.v1.ServiceSpecArgsDict, service_spec(config)),
            opts=child,
        )
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=job, namespace=namespace, labels=labels, annotations=job_annotations(config)
            ),
            spec=cast(k8s.batch.v1.JobSpecArgsDict, job_spec(config, plan, args["engine_image"])),
            # After the first deploy the fleet holds every GPU node, so a changed Job (its pod
            # template is immutable: a change replaces it) could never schedule. Its spec is
            # therefore left as first created; a failed Job still reruns (replaceUnready).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[source, peers], ignore_changes=["spec"]),
        )
        self.register_outputs({"job": job})
