"""The HA router: llm-d endpoint picker (EPP) workload, InferencePool and InferenceObjectives.

Pure builders produce the Kubernetes bodies (camelCase); the Router component declares them.
EPP flags, ports, RBAC and probe service names follow llm-d-router's routerlib chart and EPP
options at the pinned tag; the chart itself is not used because it renders no PDB and no
anti-affinity, and the config file must come from the plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.model import served_model_names
from llmd_fleet.conventions import POOL_GROUP
from llmd_fleet.core.pod_context import (
    EPP_SKIPS,
    TOKENIZER_SKIPS,
    restricted_container_context,
    restricted_pod_context,
    skip_annotations,
)
from llmd_fleet.labels import common_labels, prefer_separate_nodes, shared_inference_labels
from llmd_fleet.layers.router.epp_config import build_epp_config, epp_cpus, needs_experimental_plugins
from llmd_fleet.layers.router.specs import (
    GRPC_PORT,
    HEALTH_PORT,
    METRICS_PORT,
    TOKENIZER_PORT,
    RouterNames,
    epp_selector,
    tokenizer_selector,
)
from llmd_fleet.layers.serving.specs import HF_TOKEN_SECRET, pool_selector
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.targets.specs import SPECS
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

TOKENIZER_REPLICAS = 2
# Failover (docs/day-two.md, "Failover"). On SIGTERM the EPP reports NotServing on readiness,
# releases its leader lease at once and keeps its ext_proc server for `--drain-timeout` (llm-d-router
# v0.10.0 cmd/epp/runner/runner.go runWithGracefulShutdown, llm-d-router#1885; default 30 s,
# pkg/epp/server/options.go). Until the kubelet marks it unready (period x failureThreshold) the
# draining leader can still be sent requests, and its flow controller has already stopped
# (rejected-shutting-down); the standby is Ready one period after it takes the lease. With HA
# replicas the readiness probe therefore runs every second and gives up after two failures: at
# most ~2 s on the draining leader instead of 6 s (2 s x 3), and one slow probe does not flip the
# leader. The drain window stays the upstream 30 s, rendered so a change of default cannot
# shorten it: far longer than that readiness window plus the gateway's endpoint update, and
# within the pod's grace period below.
HA_READINESS_PERIOD_S = 1
HA_READINESS_FAILURES = 2
DRAIN_TIMEOUT_S = 30
TERMINATION_GRACE_S = 130
CONFIG_DIR = "/config"
TOKENIZER_CACHE = "/var/cache"
CONFIG_FILE = "epp.yaml"


def epp_labels(config: StackConfig) -> dict[str, str]:
    """The endpoint picker's labels (its pods' selector, `epp_selector`, is a subset)."""
    return {
        **common_labels("endpoint-picker", config.serving.name),
        "app.kubernetes.io/name": "llm-d-router-endpoint-picker",
    }


def inference_pool_spec(config: StackConfig, plan: FleetPlan, names: RouterNames) -> dict[str, Any]:
    """Every local DP rank's client port is a target (at most 8 per pool): the EPP picks a rank,
    not just a pod. Decode pods serve these through the routing sidecar, prefill pods directly."""
    ports = sorted({p for role in plan.roles for p in role.client_ports})
    return {
        "targetPorts": [{"number": p} for p in ports],
        "selector": {"matchLabels": pool_selector(config)},
        "endpointPickerRef": {
            "name": names.epp,
            "port": {"number": GRPC_PORT},
            # If the EPP is down or handing over leadership, the gateway keeps routing.
            "failureMode": "FailOpen",
        },
    }


def epp_args(config: StackConfig, names: RouterNames, experimental: bool) -> list[str]:
    """The endpoint picker's command-line flags: its pool, config file and ports; `experimental`
    (`needs_experimental_plugins`) allows the Alpha plugins its config names."""
    args = [
        f"--pool-name={names.pool}",
        f"--pool-namespace={names.namespace}",
        f"--pool-group={POOL_GROUP}",
        f"--config-file={CONFIG_DIR}/{CONFIG_FILE}",
        f"--grpc-port={GRPC_PORT}",
        f"--grpc-health-port={HEALTH_PORT}",
        f"--metrics-port={METRICS_PORT}",
        "--zap-encoder=json",
        f"--drain-timeout={DRAIN_TIMEOUT_S}s",
    ]
    if config.router.mode == "active-passive" and config.router.replicas > 1:
        args.append("--ha-enable-leader-election")
    if experimental:
        args.append("--allow-experimental-plugins")
    # The EPP traces by default (llm-d-router v0.10.0 pkg/epp/server/options.go); without a
    # collector every span is wasted work, so it is on only with `router.tracing`.
    args.append(f"--tracing={'true' if config.router.tracing else 'false'}")
    return args


def epp_tracing_env(config: StackConfig) -> list[dict[str, Any]]:
    """The OpenTelemetry SDK's variables for the EPP's traces (the ones llm-d-router's chart
    sets when tracing is on); none when tracing is off."""
    tracing = config.router.tracing
    if tracing is None:
        return []
    return [
        {"name": "OTEL_SERVICE_NAME", "value": "llm-d-router/epp"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": tracing.otlp_endpoint},
        {"name": "OTEL_TRACES_EXPORTER", "value": "otlp"},
        {
            "name": "OTEL_RESOURCE_ATTRIBUTES_NODE_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        },
        {
            "name": "OTEL_RESOURCE_ATTRIBUTES_POD_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        },
        {
            "name": "OTEL_RESOURCE_ATTRIBUTES",
            "value": "k8s.namespace.name=$(NAMESPACE),k8s.node.name=$(OTEL_RESOURCE_ATTRIBUTES_NODE_NAME),"
            "k8s.pod.name=$(OTEL_RESOURCE_ATTRIBUTES_POD_NAME)",
        },
        {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"},
        {"name": "OTEL_TRACES_SAMPLER_ARG", "value": f"{tracing.sampling_ratio:g}"},
    ]


def _grpc_probe(service: str, period: int, initial_delay: int = 0, failures: int = 3) -> dict[str, Any]:
    return {
        "grpc": {"port": HEALTH_PORT, "service": service},
        "periodSeconds": period,
        "initialDelaySeconds": initial_delay,
        "timeoutSeconds": min(2, period),
        "failureThreshold": failures,
    }


def readiness_probe(ha: bool) -> dict[str, Any]:
    """The EPP's readiness probe: with HA replicas the failover one (HA_READINESS_PERIOD_S,
    HA_READINESS_FAILURES, see above); a single replica answers `inference-extension` every 2 s."""
    if ha:
        return _grpc_probe("readiness", HA_READINESS_PERIOD_S, failures=HA_READINESS_FAILURES)
    return _grpc_probe("inference-extension", 2)


def epp_deployment_spec(
    config: StackConfig, plan: FleetPlan, names: RouterNames, experimental: bool
) -> dict[str, Any]:
    """The endpoint picker's Deployment spec, its CPU sized for the most pods the roles can run at
    `router.expectedRequestsPerSecond` (`epp_cpus`)."""
    router = config.router
    cpus = str(epp_cpus(plan, router.expected_requests_per_second))
    # Memory from the plan (working set at the expected rate plus the flow-control byte bound).
    resources = {"cpu": cpus, "memory": f"{plan.router.memory_gib}Gi"}
    ha = router.replicas > 1
    active_passive = ha and router.mode == "active-passive"
    return {
        "replicas": router.replicas,
        # Active-passive keeps `Recreate`: with --ha-enable-leader-election only the leader passes
        # readiness (router v0.10.0 pkg/epp/server/options.go 165-166, cmd/epp/runner/health.go),
        # and the lease moves only when the leader gets SIGTERM (options.go 167-170). A new pod
        # is therefore never Ready while the old leader lives, so any RollingUpdate that keeps one
        # replica available (maxUnavailable < 100%) stalls before killing the leader; the router's
        # chart uses Recreate for this reason (config/charts/routerlib/templates/_deployment.yaml
        # 338-345). The pool fails open for the handover; agentgateway >= 1.2 spreads fail-open
        # traffic over every target port (layers/gateway/rules.py).
        "strategy": {"type": "Recreate"} if active_passive else {"type": "RollingUpdate"},
        "selector": {"matchLabels": epp_selector(config)},
        "template": {
            "metadata": {"labels": {**epp_labels(config), **shared_inference_labels()}},
            "spec": {
                "serviceAccountName": names.epp,
                # In-flight ext_proc streams drain before the pod goes (llm-d's chart uses 130 s).
                "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": epp_selector(config)},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
                "securityContext": restricted_pod_context(),
                "containers": [
                    {
                        "name": "epp",
                        "image": versions().image("endpoint-picker").ref,
                        "imagePullPolicy": "IfNotPresent",
                        "args": epp_args(config, names, experimental),
                        "env": [
                            {
                                "name": "NAMESPACE",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            },
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            *epp_tracing_env(config),
                        ],
                        "ports": [
                            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
                            {"name": "grpc-health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
                            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
                        ],
                        # With several replicas the EPP serves `liveness`/`readiness`; readiness
                        # passes on the leader only. A single replica answers `inference-extension`.
                        "livenessProbe": _grpc_probe("liveness" if ha else "inference-extension", 10, 5),
                        "readinessProbe": readiness_probe(ha),
                        "resources": {"requests": dict(resources), "limits": resources},
                        "securityContext": restricted_container_context(),
                        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": f"{names.epp}-config"}}],
            },
        },
    }


def epp_rbac_rules(config: StackConfig) -> list[dict[str, Any]]:
    """What the EPP reads: pods, its pool, objectives and rewrites; its own Lease and events to
    elect a leader. Leader election reads and renews one Lease by name (client-go's LeaseLock:
    get, update); RBAC cannot restrict `create` by name (the name is not known when the request
    is authorised), so creating leases is a rule of its own."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["llm-d.ai", "inference.networking.x-k8s.io"],
            "resources": ["inferenceobjectives", "inferencemodelrewrites"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    if config.router.mode == "active-passive" and config.router.replicas > 1:
        lease = RouterNames(pool=config.serving.name, namespace=config.serving.namespace).leader_lease
        rules += [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [lease],
                "verbs": ["get", "update"],
            },
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        ]
    return rules


def tokenizer_labels(config: StackConfig) -> dict[str, str]:
    """The tokenizer's (vllm-render's) labels (its pods' selector, `tokenizer_selector`, is a subset)."""
    return {**common_labels("tokenizer", config.serving.name), "app.kubernetes.io/name": "vllm-render"}


def tokenizer_deployment_spec(config: StackConfig, hf_token_secret: str | None) -> dict[str, Any]:
    """CPU `vllm launch render` servers: the EPP's token producer posts every prompt to their
    /v1/chat/completions/render so its prefix-block keys come from the engines' own tokenizer
    and chat template. (A `vllm serve` engine answers those routes only with --enable-scale-out.)"""
    model = config.model
    args = [model.id, f"--port={TOKENIZER_PORT}", f"--revision={model.revision}"]
    args += ["--served-model-name", *served_model_names(model)]
    if model.trust_remote_code:
        args.append("--trust-remote-code")
    env: list[dict[str, Any]] = [
        {"name": "HF_HOME", "value": f"{TOKENIZER_CACHE}/huggingface"},
        # Read-only root: HOME (vLLM's ~/.cache and ~/.config) lives in the cache emptyDir too.
        {"name": "HOME", "value": f"{TOKENIZER_CACHE}/home"},
        # getpass() fails for a UID without a passwd entry (vllm-project/vllm#44548).
        {"name": "USER", "value": "llm-d"},
    ]
    if hf_token_secret:
        env.append(
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "HF_TOKEN"}}}
        )
    local = SPECS[config.target.kind].simulated
    # A laptop's kind cluster: one small tokenizer (it only tokenizes the try-out's prompts).
    resources = {"cpu": "1", "memory": "4Gi"} if local else {"cpu": "4", "memory": "12Gi"}
    return {
        "replicas": 1 if local else TOKENIZER_REPLICAS,
        "selector": {"matchLabels": tokenizer_selector(config)},
        "template": {
            "metadata": {"labels": {**tokenizer_labels(config), **shared_inference_labels()}},
            "spec": {
                "automountServiceAccountToken": False,
                # Pod Security `restricted`: the CPU image's Python environment (/opt/venv) is
                # readable by any user, and everything it writes goes to the two emptyDirs.
                "securityContext": restricted_pod_context(),
                "affinity": prefer_separate_nodes(tokenizer_selector(config)),
                "containers": [
                    {
                        "name": "render",
                        "image": versions().image("vllm-cpu").ref,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["vllm", "launch", "render"],
                        "args": args,
                        "env": env,
                        "ports": [{"name": "http", "containerPort": TOKENIZER_PORT, "protocol": "TCP"}],
                        # The tokenizer files download before /health answers: the startup probe
                        # allows that, then liveness restarts a server that stops answering.
                        "startupProbe": {
                            "httpGet": {"path": "/health", "port": "http"},
                            "periodSeconds": 10,
                            "timeoutSeconds": 5,
                            "failureThreshold": 60,
                        },
                        "livenessProbe": {
                            "httpGet": {"path": "/health", "port": "http"},
                            "periodSeconds": 20,
                            "timeoutSeconds": 5,
                            "failureThreshold": 3,
                        },
                        "readinessProbe": {
                            "httpGet": {"path": "/health", "port": "http"},
                            "periodSeconds": 10,
                            "timeoutSeconds": 5,
                            "failureThreshold": 3,
                        },
                        "resources": {"requests": dict(resources), "limits": resources},
                        "securityContext": restricted_container_context(),
                        "volumeMounts": [
                            {"name": "cache", "mountPath": TOKENIZER_CACHE},
                            {"name": "tmp", "mountPath": "/tmp"},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "cache", "emptyDir": {"sizeLimit": "20Gi"}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
                ],
            },
        },
    }


class RouterArgs(TypedDict):
    """Arguments of `Router`."""

    config: StackConfig
    """The validated stack config; names and namespace come from `serving`, the endpoint picker's
    settings from `router`, the tokenizer's model from `model`."""
    plan: FleetPlan
    """The fleet plan; the pool's target ports come from its roles and the endpoint picker is sized
    by its `router` (RouterPlan)."""
    hf_token_secret: str | None
    """Name of the Secret holding HF_TOKEN for the tokenizer's download; the tokenizer gets no
    HF_TOKEN when None."""
    objectives: NotRequired[bool]
    """Declare the InferenceObjectives of `router.priorityClasses` on this pool (default `True`). A
    canary's router has none: objectives are looked up by name, the stable pool's already carry
    those names in the namespace, and a picker keeps only objectives whose poolRef is its own pool
    (llm-d-router at the pinned tag, pkg/epp/controller/inferenceobjective_reconciler.go), so the
    canary's requests run at the default priority."""
    objective_prefix: NotRequired[str]
    """Prefix of the InferenceObjectives' names (default none); with `llmd-fleet:models` the model's
    name and a dash, so each pool's objectives have names of their own in the namespace."""


class Router(pulumi.ComponentResource):
    """EPP Deployment (HA), its Service, RBAC, config, PDB, the InferencePool and objectives."""

    inference_pool: k8s.apiextensions.CustomResource
    deployment: k8s.apps.v1.Deployment
    epp_config_yaml: str

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:router:Router", name, {}, opts)
        config, plan = args["config"], args["plan"]
        names = RouterNames(pool=config.serving.name, namespace=config.serving.namespace)
        child = pulumi.ResourceOptions(parent=self)
        labels = epp_labels(config)

        def meta(object_name: str) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=object_name, namespace=names.namespace, labels=labels)

        tokenizer = k8s.apps.v1.Deployment(
            f"{name}-tokenizer",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names.tokenizer,
                namespace=names.namespace,
                labels=tokenizer_labels(config),
                annotations=skip_annotations(TOKENIZER_SKIPS),
            ),
            spec=tokenizer_deployment_spec(config, args.get("hf_token_secret")),
            opts=child,
        )
        k8s.core.v1.Service(
            f"{name}-tokenizer-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names.tokenizer, namespace=names.namespace, labels=tokenizer_labels(config)
            ),
            spec={
                "selector": tokenizer_selector(config),
                "ports": [{"name": "http", "port": TOKENIZER_PORT, "targetPort": "http", "protocol": "TCP"}],
            },
            opts=child,
        )
        epp_config = build_epp_config(config, plan, names.tokenizer_url)
        self.epp_config_yaml = epp_config.to_yaml()
        experimental = needs_experimental_plugins(epp_config)
        account = k8s.core.v1.ServiceAccount(f"{name}-service-account", metadata=meta(names.epp), opts=child)
        role = k8s.rbac.v1.Role(
            f"{name}-role", metadata=meta(names.epp), rules=epp_rbac_rules(config), opts=child
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-role-binding",
            metadata=meta(names.epp),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.epp},
            subjects=[{"kind": "ServiceAccount", "name": names.epp, "namespace": names.namespace}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account, role]),
        )
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata=meta(f"{names.epp}-config"),
            data={CONFIG_FILE: self.epp_config_yaml},
            opts=child,
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names.epp,
                namespace=names.namespace,
                labels=labels,
                annotations=skip_annotations(EPP_SKIPS),
            ),
            spec=epp_deployment_spec(config, plan, names, experimental),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding, config_map, tokenizer]),
        )
        k8s.core.v1.Service(
            f"{name}-service",
            metadata=meta(names.epp),
            spec={
                "type": "ClusterIP",
                "selector": epp_selector(config),
                "ports": [
                    {
                        "name": "grpc-ext-proc",
                        "port": GRPC_PORT,
                        "targetPort": GRPC_PORT,
                        "protocol": "TCP",
                        "appProtocol": "kubernetes.io/h2c",
                    },
                    {
                        "name": "http-metrics",
                        "port": METRICS_PORT,
                        "targetPort": METRICS_PORT,
                        "protocol": "TCP",
                    },
                ],
            },
            opts=child,
        )
        if config.router.replicas > 1:
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb",
                metadata=meta(names.epp),
                spec={
                    # Never evict the routing replica voluntarily while it is the only Ready one
                    # (with leader election that is the leader); a not-Ready standby may always go.
                    "minAvailable": 1,
                    "unhealthyPodEvictionPolicy": "AlwaysAllow",
                    "selector": {"matchLabels": epp_selector(config)},
                },
                opts=child,
            )
        self.inference_pool = k8s.apiextensions.CustomResource(
            f"{name}-inference-pool",
            api_version=f"{POOL_GROUP}/v1",
            kind="InferencePool",
            metadata=meta(names.pool),
            spec=inference_pool_spec(config, plan, names),
            opts=child,
        )
        for objective in config.router.priority_classes if args.get("objectives", True) else []:
            k8s.apiextensions.CustomResource(
                f"{name}-objective-{objective.name}",
                api_version="llm-d.ai/v1alpha2",
                kind="InferenceObjective",
                metadata=meta(f"{args.get('objective_prefix', '')}{objective.name}"),
                spec={
                    "priority": objective.priority,
                    "poolRef": {"group": POOL_GROUP, "kind": "InferencePool", "name": names.pool},
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.inference_pool]),
            )
        self.register_outputs({"inferencePool": names.pool})


def declare(ctx: Assembly) -> Router:
    """The layer's builder (its registry record's `Declaration`): the endpoint picker of the
    model's pool, after the gateway (which brings the InferencePool and objective CRDs) and its
    model's serving; with several models named by the model, its objectives prefixed by it."""
    args: RouterArgs = {
        "config": ctx.config,
        "plan": ctx.plan,
        "hf_token_secret": HF_TOKEN_SECRET if ctx.args.get("hf_token") is not None else None,
    }
    if ctx.model is not None:
        args["objective_prefix"] = f"{ctx.model}-"
    return Router("router" if ctx.model is None else f"router-{ctx.model}", args, opts=ctx.options())
