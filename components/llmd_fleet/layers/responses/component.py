"""The Responses API with `previous_response_id`: vLLM's agentic API in front of the router, its
connection Secret, the HTTPRoutes that put it ahead of the InferencePool, and on-prem its
PostgreSQL (the CloudNativePG operator and a `Cluster`). Pure builders first, the `ResponsesLayer`
component last. The managed databases of the cloud targets are in responses_db_gke.py and
responses_db_eks.py; this module only receives their address.

The request path (llm-d's agentic-api guide, gateway mode):

    client --/v1/responses--> Gateway --HTTPRoute <name>--> Service <name>:9000 (agentic API)
    agentic API <--> PostgreSQL (DATABASE_URL from the Secret <name>-database)
    agentic API --Host: <upstream host>--> Gateway --HTTPRoute <name>-upstream--> InferencePool

The second hop goes back through the gateway so the endpoint picker routes it. The upstream
route matches on its hostname, which ranks above any path match (Gateway API HTTPRoute
`hostnames` precedence), so the agentic API's own requests never loop back into it. An in-cluster
gateway (agentgateway, istio) is reached through a Service of this layer over the gateway's proxy
pods; GKE's managed gateway through the internal address the stack reserves for it, mapped to the
upstream host with `hostAliases`.

Names derive from `responses.name`, never from serving settings: renaming the serving objects
replaces no part of the response store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict, cast
from urllib.parse import quote

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.pod_context import (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip,
    pod_security_labels,
    restricted_container_context,
    restricted_pod_context,
    skip_annotations,
)
from llmd_fleet.core.problems import PROJECT, Problem
from llmd_fleet.labels import common_labels, prefer_separate_nodes
from llmd_fleet.layers.gateway.component import (
    GKE_POLICY_API_VERSION,
    LOG_EVERY_REQUEST,
    MAX_DRAINING_SECONDS,
    backend_refs,
)
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME, GATEWAY_NAME_LABEL
from llmd_fleet.layers.responses.config import ResponsesConfig, S3BackupConfig, password_problems
from llmd_fleet.layers.responses.specs import (
    AGENTIC_API_HOME,
    AGENTIC_API_PORT,
    CNPG_NAMESPACE,
    POSTGRES_PORT,
    STARTUP_PROBE_PERIOD_SECONDS,
    agentic_api_selector,
    is_managed_gateway,
    max_request_body_bytes,
    startup_probe_failures,
    upstream_ready_timeout_seconds,
)
from llmd_fleet.platform.helm import pinned_release
from llmd_fleet.targets.base import store_settings
from llmd_fleet.targets.declared import ManagedDatabase
from llmd_fleet.targets.specs import SPECS
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig

CNPG_RELEASE = "cnpg"
CNPG_RELOAD_LABEL = "cnpg.io/reload"
"""A Secret with this label is re-read by the operator as soon as it changes (role passwords)."""
# llm-d guides/agentic-api/manifests/gateway/routes.yaml (llm-d/llm-d 72c4967, the external
# route's first rule): the stateful agentic endpoints, Anthropic's Messages API and the model
# list (the Codex catalogue with `?client_version=`) go to the agentic API.
RESPONSES_PATHS = ("/v1/responses", "/v1/conversations", "/v1/messages", "/v1/models")
"""What clients send to the agentic API; everything else goes to the InferencePool as before."""
GKE_UPSTREAM_DOMAIN = "gateway.internal"
"""GKE: the upstream host is `<name>-upstream.gateway.internal`, resolved by `hostAliases` only."""
BACKUP_SCHEDULE = "0 0 3 * * *"
"""Daily base backup at 03:00 (CloudNativePG schedules have a seconds field first)."""
AGENTIC_API_SKIPS = (
    IMAGE_BY_TAG,
    PULL_IF_NOT_PRESENT,
    Skip(
        "CKV_K8S_35",
        "the agentic API reads its connection string from the DATABASE_URL environment variable "
        "only; the value comes from a Secret by reference",
    ),
)


@dataclass(frozen=True)
class ResponsesNames:
    """The layer's object names, from `responses.name` and the serving namespace."""

    name: str
    namespace: str

    @property
    def api(self) -> str:
        """Deployment, Service, PDB and the client-facing HTTPRoute."""
        return self.name

    @property
    def connection_secret(self) -> str:
        """The Secret holding the agentic API's DATABASE_URL (key `database-url`)."""
        return f"{self.name}-database"

    @property
    def upstream(self) -> str:
        """The HTTPRoute of the agentic API's own inference requests (and, with an in-cluster
        gateway, the Service it reaches the gateway through)."""
        return f"{self.name}-upstream"

    @property
    def database(self) -> str:
        """The CloudNativePG Cluster (on-prem)."""
        return f"{self.name}-postgres"

    @property
    def owner_secret(self) -> str:
        """The CloudNativePG owner role's basic-auth Secret (on-prem)."""
        return f"{self.name}-postgres-owner"

    def upstream_host(self, managed_gateway: bool) -> str:
        """The host the agentic API sends its inference requests to (and the upstream route's
        hostname): the Service over the gateway's proxies, or a name only `hostAliases` maps."""
        if managed_gateway:
            return f"{self.upstream}.{GKE_UPSTREAM_DOMAIN}"
        return f"{self.upstream}.{self.namespace}.svc"

    @property
    def database_host(self) -> str:
        """CloudNativePG's read-write Service: always the primary."""
        return f"{self.database}-rw.{self.namespace}.svc"


def responses_names(config: StackConfig) -> ResponsesNames:
    assert config.responses is not None, "Responses is off"
    return ResponsesNames(config.responses.name, config.serving.namespace)


def database_url(user: str, password: str, host: str, port: int, database: str) -> str:
    """The libpq connection URI the agentic API reads from DATABASE_URL. The password is
    percent-encoded (it may hold ':', '@', '/', '#'); TLS is required (RDS for PostgreSQL 15+
    and the stack's Cloud SQL instance refuse plain connections; CloudNativePG serves TLS)."""
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
    return f"postgresql://{credentials}@{host}:{port}/{quote(database, safe='')}?sslmode=require"


def agentic_api_labels(responses: ResponsesConfig) -> dict[str, str]:
    return {**common_labels("agentic-api", responses.name), "app.kubernetes.io/name": "agentic-api"}


def upstream_url(config: StackConfig) -> str:
    """`--llm-api-base`: the gateway, by the host the upstream route matches. Port 80 of the
    upstream Service (in-cluster) or the listener port (GKE), so the Host header carries no
    port only when it is 80."""
    names = responses_names(config)
    managed = is_managed_gateway(config)
    port = config.gateway.listener_port if managed else 80
    suffix = "" if port == 80 else f":{port}"
    return f"http://{names.upstream_host(managed)}{suffix}"


def _http_probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def agentic_api_args(config: StackConfig) -> list[str]:
    """The agentic API's flags (each one `agentic-server --help` lists; `make check-responses`):
    its upstream, how long it waits for that upstream's /health before it exits (the model's
    load time), and the request-body limit the declared workload needs."""
    return [
        "--llm-api-base",
        upstream_url(config),
        "--llm-ready-timeout-s",
        str(upstream_ready_timeout_seconds(config)),
        "--max-request-body-size-bytes",
        str(max_request_body_bytes(config)),
    ]


def agentic_api_deployment_spec(config: StackConfig, gateway_address: str | None) -> dict[str, Any]:
    """The agentic API: 2+ replicas spread over nodes, restricted pod (non-root, read-only root,
    RuntimeDefault seccomp, every capability dropped, no service-account token), startup,
    readiness and liveness probes. `gateway_address`: GKE's managed gateway address, which
    `hostAliases` maps the upstream host to.

    It has no /metrics: its metrics and traces go out over OTLP/HTTP only, when the
    OpenTelemetry variables name an exporter; the fleet runs no OTLP collector, so none are set
    and its metrics are not collected (docs/responses.md)."""
    responses = config.responses
    assert responses is not None, "Responses is off"
    names = responses_names(config)
    resources = {"cpu": str(responses.cpus), "memory": f"{responses.memory_gib}Gi"}
    startup = _http_probe("/health", STARTUP_PROBE_PERIOD_SECONDS, startup_probe_failures(config))
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_context(),
        # A turn streams for minutes; a replica being replaced finishes its streams first.
        "terminationGracePeriodSeconds": config.serving.drain_seconds + 60,
        "affinity": prefer_separate_nodes(agentic_api_selector(responses)),
        "containers": [
            {
                "name": "agentic-api",
                "image": versions().image("agentic-api").ref,
                "imagePullPolicy": "IfNotPresent",
                "args": agentic_api_args(config),
                "env": [
                    {
                        "name": "DATABASE_URL",
                        "valueFrom": {
                            "secretKeyRef": {"name": names.connection_secret, "key": "database-url"}
                        },
                    },
                    # It writes config.toml there at every start; the root is read-only.
                    {"name": "AGENTIC_API_HOME", "value": AGENTIC_API_HOME},
                    {"name": "RUST_LOG", "value": "agentic_server=info,agentic_core=info"},
                ],
                "ports": [{"name": "http", "containerPort": AGENTIC_API_PORT, "protocol": "TCP"}],
                # It listens only once the upstream's /health answered and the schema is ready:
                # the startup probe outlasts that wait (the model's load time). Readiness is its
                # own /ready (503 while PostgreSQL is unreachable), liveness /health.
                "startupProbe": startup,
                "readinessProbe": _http_probe("/ready", 5, 3),
                "livenessProbe": _http_probe("/health", 10, 3),
                "resources": {"requests": dict(resources), "limits": resources},
                "securityContext": restricted_container_context(),
                "volumeMounts": [
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "home", "mountPath": AGENTIC_API_HOME},
                ],
            }
        ],
        "volumes": [
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            # config.toml only (a few hundred bytes): the store is PostgreSQL.
            {"name": "home", "emptyDir": {"sizeLimit": "16Mi"}},
        ],
    }
    if gateway_address is not None:
        spec["hostAliases"] = [{"ip": gateway_address, "hostnames": [names.upstream_host(True)]}]
    return {
        "replicas": responses.replicas,
        # Never below the configured replicas during a rollout.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "selector": {"matchLabels": agentic_api_selector(responses)},
        "template": {"metadata": {"labels": agentic_api_labels(responses)}, "spec": spec},
    }


def agentic_api_service_spec(responses: ResponsesConfig) -> dict[str, Any]:
    return {
        "type": "ClusterIP",
        "selector": agentic_api_selector(responses),
        "ports": [{"name": "http", "port": AGENTIC_API_PORT, "targetPort": "http", "protocol": "TCP"}],
    }


def upstream_service_spec(config: StackConfig) -> dict[str, Any]:
    """In-cluster gateways: a Service over the gateway's proxy pods (the label agentgateway and
    Istio put on them, which the NetworkPolicies select too), port 80 to the listener."""
    return {
        "type": "ClusterIP",
        "selector": {GATEWAY_NAME_LABEL: GATEWAY_NAME},
        "ports": [
            {"name": "http", "port": 80, "targetPort": config.gateway.listener_port, "protocol": "TCP"}
        ],
    }


def _parent_refs() -> list[dict[str, str]]:
    return [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}]


def _timeouts(config: StackConfig) -> dict[str, Any]:
    # GKE's gateway implements no HTTPRoute timeouts (llmd_fleet/layers/gateway/component.py): its backend
    # policies carry them.
    if is_managed_gateway(config):
        return {}
    return {"timeouts": {"request": f"{config.gateway.request_timeout_seconds}s"}}


def agentic_route_spec(config: StackConfig) -> dict[str, Any]:
    """Clients' Responses, Conversations, Messages and model-list requests to the agentic API
    (`RESPONSES_PATHS`, as llm-d's agentic-api guide routes them). A longer path prefix
    than the pool route's `/`, so it ranks first (Gateway API: the longest matching prefix)."""
    names = responses_names(config)
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}} for path in RESPONSES_PATHS],
        "backendRefs": [{"group": "", "kind": "Service", "name": names.api, "port": AGENTIC_API_PORT}],
        **_timeouts(config),
    }
    return {"parentRefs": _parent_refs(), "rules": [rule]}


def upstream_route_spec(config: StackConfig, pool_name: str) -> dict[str, Any]:
    """The agentic API's own requests: by their host, straight to the InferencePool (through the
    endpoint picker)."""
    names = responses_names(config)
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
        "backendRefs": backend_refs(config, pool_name),
        **_timeouts(config),
    }
    return {
        "parentRefs": _parent_refs(),
        "hostnames": [names.upstream_host(is_managed_gateway(config))],
        "rules": [rule],
    }


def gke_service_policies(config: StackConfig) -> dict[str, dict[str, Any]]:
    """GKE's HealthCheckPolicy and GCPBackendPolicy of the agentic API's backend service: the
    health check on /health of each endpoint (GKE would check `/` otherwise), the request timeout
    (30 s when unset), draining as long as the pods drain, request logging."""
    names = responses_names(config)
    target = {"group": "", "kind": "Service", "name": names.api}
    return {
        "HealthCheckPolicy": {
            "targetRef": target,
            "default": {
                "checkIntervalSec": 5,
                "timeoutSec": 2,
                "config": {
                    "type": "HTTP",
                    # The endpoints' own port (9000): GKE's CEL rules refuse a `port` without
                    # USE_FIXED_PORT, which llm-d's guide manifest sets.
                    "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/health"},
                },
            },
        },
        "GCPBackendPolicy": {
            "targetRef": target,
            "default": {
                "timeoutSec": config.gateway.request_timeout_seconds,
                "connectionDraining": {
                    "drainingTimeoutSec": min(config.serving.drain_seconds, MAX_DRAINING_SECONDS)
                },
                "logging": {"enabled": True, "sampleRate": LOG_EVERY_REQUEST},
            },
        },
    }


# --- On-prem: CloudNativePG ------------------------------------------------------------------------


def cnpg_operator_values() -> dict[str, Any]:
    """The operator chart's values: its defaults already run it non-root with a read-only root,
    RuntimeDefault seccomp and no capabilities; it watches every namespace."""
    return {"config": {"clusterWide": True}, "crds": {"create": True}}


def _object_store(backup: S3BackupConfig, retention_days: int) -> dict[str, Any]:
    secret = backup.credentials_secret
    return {
        "retentionPolicy": f"{retention_days}d",
        "barmanObjectStore": {
            "destinationPath": f"s3://{backup.bucket}/",
            "endpointURL": backup.endpoint,
            "s3Credentials": {
                "accessKeyId": {"name": secret, "key": "ACCESS_KEY_ID"},
                "secretAccessKey": {"name": secret, "key": "ACCESS_SECRET_KEY"},
            },
            "wal": {"compression": "gzip"},
            "data": {"compression": "gzip"},
        },
    }


class InClusterSettings(Protocol):
    """What the CloudNativePG `Cluster` reads of the section of `responses.database` an in-cluster
    store's kind names (`ResponsesStore.settings`, e.g. llmd_fleet/targets/onprem/config.py)."""

    @property
    def instances(self) -> int: ...
    @property
    def storage_class(self) -> str | None: ...
    @property
    def cpus(self) -> int: ...
    @property
    def memory_gib(self) -> int: ...


def cnpg_cluster_spec(config: StackConfig) -> dict[str, Any]:
    """A CloudNativePG `Cluster`: PostgreSQL 17 on `instances` pods, one per node, the owner role
    and database bootstrapped from the owner Secret and kept in sync with it (managed role, so a
    rotated password reaches the database), WAL archive and base backups on the S3-compatible
    store unless `backup: none`."""
    responses = config.responses
    assert responses is not None, "Responses is off"
    database = responses.database
    store = SPECS[config.target.kind].responses
    assert store is not None and not store.managed, "the kind's response store is not in the cluster"
    settings = cast(InClusterSettings, store_settings(database, store.section, store.settings))
    instances, storage_class = settings.instances, settings.storage_class
    cpus, memory = settings.cpus, settings.memory_gib
    names = responses_names(config)
    resources = {"cpu": str(cpus), "memory": f"{memory}Gi"}
    storage: dict[str, Any] = {"size": f"{database.storage_gib}Gi"}
    if storage_class is not None:
        storage["storageClass"] = storage_class
    spec: dict[str, Any] = {
        "instances": instances,
        "imageName": versions().image("cnpg-postgresql").ref,
        # Rolling updates restart the standbys, then switch the primary over to an updated one.
        "primaryUpdateStrategy": "unsupervised",
        "primaryUpdateMethod": "switchover",
        "storage": storage,
        "resources": {"requests": dict(resources), "limits": resources},
        "affinity": {
            "enablePodAntiAffinity": True,
            "podAntiAffinityType": "required",
            "topologyKey": "kubernetes.io/hostname",
        },
        "bootstrap": {
            "initdb": {
                "database": database.name,
                "owner": database.user,
                "secret": {"name": names.owner_secret},
            }
        },
        "managed": {
            "roles": [
                {
                    "name": database.user,
                    "ensure": "present",
                    "login": True,
                    "passwordSecret": {"name": names.owner_secret},
                }
            ]
        },
        "inheritedMetadata": {"labels": common_labels("response-store", responses.name)},
    }
    if isinstance(responses.backup, S3BackupConfig):
        spec["backup"] = _object_store(responses.backup, database.backup_retention_days)
    return spec


def cnpg_scheduled_backup_spec(config: StackConfig) -> dict[str, Any]:
    """A daily base backup to the object store (the WAL archive runs continuously); with the
    retention policy they give point-in-time recovery over the retention window."""
    names = responses_names(config)
    return {
        "schedule": BACKUP_SCHEDULE,
        "backupOwnerReference": "self",
        "cluster": {"name": names.database},
        "method": "barmanObjectStore",
        "immediate": True,
    }


# --- The component -----------------------------------------------------------------------------------


class ResponsesLayerArgs(TypedDict):
    """Arguments of `ResponsesLayer`."""

    config: StackConfig
    """The validated stack config; `responses` must be set (ValueError otherwise) and names the
    objects, which live in `serving.namespace`; `gateway` picks the managed-gateway path, the
    listener port and the request timeout."""
    pool_name: str
    """The InferencePool the upstream HTTPRoute sends the agentic API's requests to."""
    password: pulumi.Input[str]
    """The database owner's password (secret config `responsesDbPassword`), wrapped as a secret; it
    goes into the connection Secret (and on-prem the CloudNativePG owner Secret)."""
    database: NotRequired[ManagedDatabase | None]
    """The cloud target's managed database (`ManagedDatabase`); None (the default, on-prem) declares
    the CloudNativePG operator and a Cluster instead."""


class ResponsesLayer(pulumi.ComponentResource):
    """The agentic API (Deployment, Service, PDB, connection Secret), its HTTPRoutes, GKE's backend
    policies for it, and on-prem the CloudNativePG operator and Cluster."""

    deployment: k8s.apps.v1.Deployment
    connection_secret: k8s.core.v1.Secret
    routes: list[k8s.apiextensions.CustomResource]
    database_cluster: k8s.apiextensions.CustomResource | None

    def __init__(self, name: str, args: ResponsesLayerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:responses:ResponsesLayer", name, {}, opts)
        config = args["config"]
        responses = config.responses
        if responses is None:
            raise ValueError("ResponsesLayer needs llmd-fleet:responses")
        names = responses_names(config)
        namespace = names.namespace
        child = pulumi.ResourceOptions(parent=self)
        labels = agentic_api_labels(responses)
        managed = args.get("database")
        password = pulumi.Output.secret(args["password"])
        database = responses.database

        def meta(object_name: str, **extra: Any) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=object_name, namespace=namespace, labels=labels, **extra)

        waits: list[pulumi.Resource] = []
        self.database_cluster = None
        if managed is None:
            self.database_cluster = self._cloudnative_pg(name, config, password)
            waits.append(self.database_cluster)
            host: pulumi.Input[str] = names.database_host
            port = POSTGRES_PORT
        else:
            waits += managed.resources
            host, port = managed.host, managed.port
        # Secret, as everything derived from the password is.
        url = pulumi.Output.all(password, host).apply(
            lambda a: database_url(database.user, a[0], str(a[1]), port, database.name)
        )
        self.connection_secret = k8s.core.v1.Secret(
            f"{name}-connection",
            metadata=meta(names.connection_secret),
            type="Opaque",
            string_data={"database-url": url},
            opts=child,
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(names.api, annotations=skip_annotations(AGENTIC_API_SKIPS)),
            spec=agentic_api_deployment_spec(
                config, managed.gateway_address.address if managed and managed.gateway_address else None
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.connection_secret, *waits]),
        )
        service_annotations = (
            # GKE's gateway reaches the pods through a network endpoint group (llm-d's guide).
            {"cloud.google.com/neg": '{"ingress": true}'} if is_managed_gateway(config) else None
        )
        k8s.core.v1.Service(
            f"{name}-service",
            metadata=meta(names.api, annotations=service_annotations),
            spec=agentic_api_service_spec(responses),
            opts=child,
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta(names.api),
            spec={
                "maxUnavailable": 1,
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
                "selector": {"matchLabels": agentic_api_selector(responses)},
            },
            opts=child,
        )
        if not is_managed_gateway(config):
            k8s.core.v1.Service(
                f"{name}-upstream-service",
                metadata=meta(names.upstream),
                spec=upstream_service_spec(config),
                opts=child,
            )
        self.routes = [
            k8s.apiextensions.CustomResource(
                f"{name}-{suffix}",
                api_version="gateway.networking.k8s.io/v1",
                kind="HTTPRoute",
                metadata=meta(route_name),
                spec=spec,
                opts=child,
            )
            for suffix, route_name, spec in (
                ("route", names.api, agentic_route_spec(config)),
                ("upstream-route", names.upstream, upstream_route_spec(config, args["pool_name"])),
            )
        ]
        if is_managed_gateway(config):
            for kind, spec in gke_service_policies(config).items():
                k8s.apiextensions.CustomResource(
                    f"{name}-{kind.lower()}",
                    api_version=GKE_POLICY_API_VERSION,
                    kind=kind,
                    metadata=meta(names.api),
                    spec=spec,
                    opts=child,
                )
        self.register_outputs({"service": names.api})

    def _cnpg_operator(self, name: str) -> k8s.helm.v3.Release:
        """The CloudNativePG operator's namespace and pinned release."""
        namespace = k8s.core.v1.Namespace(
            f"{name}-cnpg-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=CNPG_NAMESPACE,
                # The chart runs the operator non-root, read-only root, RuntimeDefault seccomp,
                # every capability dropped: `restricted` admits it.
                labels={
                    **common_labels("database-operator", CNPG_RELEASE),
                    **pod_security_labels("restricted"),
                },
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return pinned_release(
            f"{name}-cnpg",
            CNPG_RELEASE,
            versions().chart("cloudnative-pg"),
            CNPG_NAMESPACE,
            cnpg_operator_values(),
            pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
        )

    def _cloudnative_pg(
        self, name: str, config: StackConfig, password: pulumi.Output[str]
    ) -> k8s.apiextensions.CustomResource:
        """The operator (its own namespace, Pod Security `restricted`; not with a preinstalled
        platform), the owner Secret, the Cluster and, with a backup store, its daily
        ScheduledBackup."""
        responses = config.responses
        assert responses is not None
        names = responses_names(config)
        operator = self._cnpg_operator(name) if config.target.installs_platform else None
        labels = common_labels("response-store", responses.name)
        owner = k8s.core.v1.Secret(
            f"{name}-postgres-owner",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names.owner_secret,
                namespace=names.namespace,
                labels={**labels, CNPG_RELOAD_LABEL: "true"},
            ),
            type="kubernetes.io/basic-auth",
            string_data={"username": responses.database.user, "password": password},
            opts=pulumi.ResourceOptions(parent=self),
        )
        cluster = k8s.apiextensions.CustomResource(
            f"{name}-postgres",
            api_version="postgresql.cnpg.io/v1",
            kind="Cluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=names.database, namespace=names.namespace, labels=labels
            ),
            spec=cnpg_cluster_spec(config),
            # The database: a replace would start an empty one.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[owner, *([operator] if operator is not None else [])], protect=True
            ),
        )
        if isinstance(responses.backup, S3BackupConfig):
            k8s.apiextensions.CustomResource(
                f"{name}-postgres-backup",
                api_version="postgresql.cnpg.io/v1",
                kind="ScheduledBackup",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{names.database}-daily", namespace=names.namespace, labels=labels
                ),
                spec=cnpg_scheduled_backup_spec(config),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )
        return cluster


def input_problems(ctx: Assembly) -> list[Problem]:
    """The program's inputs against the section: with `llmd-fleet:responses`, the store owner's
    password is required (`responses_password`)."""
    return password_problems(ctx.config.responses, ctx.args.get("responses_password") is not None, PROJECT)


def declare(ctx: Assembly) -> ResponsesLayer | None:
    """The layer's builder (its registry record's `Declaration`): with `llmd-fleet:responses` and
    its password, the agentic API ahead of the pool's route and its database."""
    password = ctx.args.get("responses_password")
    if ctx.config.responses is None or password is None:
        return None
    args: ResponsesLayerArgs = {
        "config": ctx.config,
        "pool_name": ctx.config.serving.name,
        "password": password,
        "database": ctx.args.get("responses_database"),
    }
    return ResponsesLayer("responses", args, opts=ctx.options())
