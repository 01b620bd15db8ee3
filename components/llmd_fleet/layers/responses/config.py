"""`llmd-fleet:responses`: the Responses API with server-side state (`previous_response_id`),
served by vLLM's agentic API in front of the router, on a real PostgreSQL per target.

Pure (pydantic and the standard library). llmd_fleet/config/fleet.py embeds `ResponsesConfig` as
`StackConfig.responses` (absent: off) and runs `responses_problems` among its cross-field rules.
The database per target: GKE Cloud SQL for PostgreSQL (llmd_fleet/targets/gke/database.py), EKS RDS
for PostgreSQL (llmd_fleet/targets/eks/database.py), on-prem a CloudNativePG `Cluster`
(llmd_fleet/layers/responses/component.py). Field names are camelCase in YAML, snake_case in Python.
"""

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import Field, ValidatorFunctionWrapHandler, WrapValidator

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    CloudSqlTier,
    DnsLabel,
    DnsSubdomain,
    Ipv4Address,
    Ipv4Cidr,
    ObjectStoreEndpoint,
    PostgresIdentifier,
    RdsInstanceClass,
    S3BucketName,
)
from llmd_fleet.core.problems import Key, Problem
from llmd_fleet.targets.gke.config import GkeTargetConfig

PASSWORD_KEY = "responsesDbPassword"
"""The secret config key of the database owner's password (`pulumi config set --secret`)."""
CLOUD_SQL_PERF_OPTIMIZED = "db-perf-optimized-N-"
"""Prefix of the Cloud SQL tiers the ENTERPRISE_PLUS edition takes (and the only ones it takes)."""


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class ResponsesGkeDatabaseConfig(_Model):
    """Cloud SQL for PostgreSQL on the gke target: regional (HA), private IP only, in the fleet's
    VPC through Private Service Access."""

    tier: CloudSqlTier = "db-perf-optimized-N-4"
    """Machine tier (default db-perf-optimized-N-4: 4 vCPUs). ENTERPRISE_PLUS takes only the
    `db-perf-optimized-N-*` tiers, ENTERPRISE the others (`db-custom-<vCPUs>-<MiB>`)."""
    edition: Literal["ENTERPRISE_PLUS", "ENTERPRISE"] = "ENTERPRISE_PLUS"
    """Cloud SQL edition (default ENTERPRISE_PLUS, which is also the API's default for PostgreSQL
    16 and later; it is set explicitly so that a changed API default never touches the
    instance)."""
    private_service_cidr: Ipv4Cidr = "10.98.0.0/20"
    """The range Private Service Access reserves in the fleet's VPC for Google-managed services;
    Cloud SQL's private IP comes from it (default 10.98.0.0/20). A /16 to /24 that overlaps no
    range of target.gke.network. The agentic API may reach port 5432 in this range and nowhere
    else outside the cluster."""
    gateway_address: Ipv4Address | None = None
    """The managed gateway's (gke-l7-rilb) internal address, reserved by the stack in the node
    subnet and named on the Gateway: the agentic API sends its inference requests back through
    the gateway to it. Default: the fourth-to-last address of target.gke.network.nodeCidr
    (10.0.15.252 for the default 10.0.0.0/20)."""


class ResponsesEksDatabaseConfig(_Model):
    """RDS for PostgreSQL on the eks target: Multi-AZ, encrypted, in two private subnets of its
    own, reachable only from the cluster's security group."""

    instance_class: RdsInstanceClass = "db.m7g.large"
    """DB instance class (default db.m7g.large: 2 vCPUs, 8 GiB)."""


class ResponsesOnpremDatabaseConfig(_Model):
    """A CloudNativePG `Cluster` on the onprem target, in the serving namespace."""

    instances: Annotated[int, Field(ge=3, le=9)] = 3
    """PostgreSQL instances (default 3, at most 9): one primary and streaming standbys, each on
    its own node. Three keeps a standby after a failover."""
    storage_class: DnsSubdomain | None = None
    """StorageClass of each instance's volume; the cluster's default class when unset. Use a
    class that survives a node loss (replicated or network storage) or local disks with the
    replicas as the redundancy."""
    cpus: Annotated[int, Field(ge=1, le=64)] = 2
    """CPUs per instance (default 2, at most 64), requested and limited."""
    memory_gib: Annotated[int, Field(ge=1, le=512)] = 8
    """Memory per instance in GiB (default 8, at most 512), requested and limited."""


class ResponsesDatabaseConfig(_Model):
    """The response store: one PostgreSQL database and the role that owns it."""

    name: PostgresIdentifier = "agentic_api"
    """Database name (default agentic_api)."""
    user: PostgresIdentifier = "agentic_api"
    """Owner role the agentic API logs in as (default agentic_api; RDS: the master user). Its
    password is the secret config key `responsesDbPassword`."""
    storage_gib: Annotated[int, Field(ge=10, le=65536)] = 100
    """Storage in GiB (default 100, at most 65,536): the disk (Cloud SQL), allocated storage (RDS)
    or each instance's volume (CloudNativePG)."""
    max_storage_gib: Annotated[int, Field(ge=10, le=65536)] = 1000
    """gke and eks: the managed database grows its storage up to this many GiB (default 1,000);
    CloudNativePG volumes are resized by editing storageGiB."""
    backup_retention_days: Annotated[int, Field(ge=2, le=35)] = 14
    """Days of backups kept (default 14, at least 2, at most 35, RDS's limit): Cloud SQL keeps one
    automated backup per day for this many days and transaction logs for point-in-time recovery
    one day less, at most 7 (it keeps fewer days of logs than backups); RDS keeps automated
    backups and PITR this long; CloudNativePG's retention policy on the object store."""
    gke: ResponsesGkeDatabaseConfig | None = None
    """kind gke: Cloud SQL settings (ResponsesGkeDatabaseConfig's defaults when unset)."""
    eks: ResponsesEksDatabaseConfig | None = None
    """kind eks: RDS settings (ResponsesEksDatabaseConfig's defaults when unset)."""
    onprem: ResponsesOnpremDatabaseConfig | None = None
    """kind onprem: CloudNativePG settings (ResponsesOnpremDatabaseConfig's defaults when unset)."""


class S3BackupConfig(_Model):
    """Where CloudNativePG archives WAL and writes base backups (on-prem)."""

    endpoint: ObjectStoreEndpoint
    """The S3-compatible store's endpoint URL, e.g. https://s3.example.internal:9000. It must lie
    outside the cluster's pod and Service ranges (the database pods may reach its port there and
    nowhere else outside the cluster)."""
    bucket: S3BucketName
    """Bucket of the backups, created before the stack (barman-cloud no longer creates it); the
    database's backups go under s3://<bucket>/<cluster name>/."""
    credentials_secret: DnsSubdomain
    """Secret in the serving namespace holding the store's `ACCESS_KEY_ID` and
    `ACCESS_SECRET_KEY`. You create it; the stack only names it, so the store's credentials never
    pass through Pulumi."""


def _backup_choice(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """`none`, or a store validated as S3BackupConfig, with errors naming the store's own keys
    (a plain union would report every member's errors under its type name)."""
    if isinstance(value, dict):
        return S3BackupConfig.model_validate(value)
    if value == "none":
        return handler(value)
    raise ValueError("must be `none` or a mapping {endpoint, bucket, credentialsSecret}")


BackupChoice = Annotated[S3BackupConfig | Literal["none"], WrapValidator(_backup_choice)]
"""An S3-compatible store, or `none`."""


class ResponsesConfig(_Model):
    """vLLM's agentic API (the Responses API with `previous_response_id`) and its PostgreSQL."""

    name: Annotated[DnsLabel, Field(max_length=40)] = "agentic-api"
    """Name of the agentic API's Deployment, Service and connection Secret (default
    agentic-api); the database is `<name>-postgres`. Not derived from serving settings, so that
    renaming the serving objects never replaces the database."""
    replicas: Annotated[int, Field(ge=2, le=20)] = 2
    """Agentic API replicas (default 2, at most 20); every turn's state is in PostgreSQL, so any
    replica serves any `previous_response_id`."""
    cpus: Annotated[int, Field(ge=1, le=64)] = 2
    """CPUs per replica (default 2, at most 64), requested; the limit is memory only."""
    memory_gib: Annotated[int, Field(ge=1, le=256)] = 4
    """Memory per replica in GiB (default 4, at most 256), requested and limited."""
    database: ResponsesDatabaseConfig = Field(default_factory=ResponsesDatabaseConfig)
    """The response store."""
    backup: BackupChoice | None = None
    """onprem only, and required there: an S3-compatible store for the database's base backups
    and WAL archive, or `none` to run without backups (then a lost cluster loses every stored
    response). gke and eks use the managed database's own backups."""


def default_gateway_address(node_cidr: str) -> str:
    """The fourth-to-last address of the node subnet: GCE reserves the last two addresses of a
    subnet, and nodes take addresses from its start."""
    network = ipaddress.IPv4Network(node_cidr)
    return str(network.broadcast_address - 3)


def gke_gateway_address(responses: ResponsesConfig, gke: GkeTargetConfig) -> str:
    """The managed gateway's internal address on gke (the configured one or the default)."""
    chosen = responses.database.gke.gateway_address if responses.database.gke else None
    return chosen or default_gateway_address(gke.network.node_cidr)


def _target_section_problems(responses: ResponsesConfig, kind: str, path: Key) -> list[Problem]:
    problems = []
    for section in ("gke", "eks", "onprem"):
        if section != kind and getattr(responses.database, section) is not None:
            problems.append(
                Problem(path.at("database", section), f"only for kind {section} (the target is {kind})")
            )
    if kind == "onprem" and responses.backup is None:
        problems.append(
            Problem(
                path.at("backup"),
                "required on kind onprem: an S3-compatible store {endpoint, bucket, credentialsSecret} "
                "for the database's base backups and WAL archive, or `none` to run without backups",
            )
        )
    if kind != "onprem" and responses.backup is not None:
        problems.append(
            Problem(
                path.at("backup"),
                f"only for kind onprem: {kind} uses the managed database's own backups "
                "(responses.database.backupRetentionDays)",
            )
        )
    return problems


def _gke_problems(
    responses: ResponsesConfig, gke: GkeTargetConfig, gateway_implementation: str, path: Key
) -> list[Problem]:
    settings = responses.database.gke or ResponsesGkeDatabaseConfig()
    section = path.at("database", "gke")
    problems = []
    perf_optimized = settings.tier.startswith(CLOUD_SQL_PERF_OPTIMIZED)
    if (settings.edition == "ENTERPRISE_PLUS") != perf_optimized:
        problems.append(
            Problem(
                section.at("tier"),
                f"edition {settings.edition} takes "
                + ("only" if settings.edition == "ENTERPRISE_PLUS" else "no")
                + f" {CLOUD_SQL_PERF_OPTIMIZED}* tiers (got {settings.tier!r})",
            )
        )
    psa = ipaddress.IPv4Network(settings.private_service_cidr)
    if not 16 <= psa.prefixlen <= 24:
        problems.append(Problem(section.at("private_service_cidr"), f"must be a /16 to /24 (got {psa})"))
    net = gke.network
    ranges = {
        "nodeCidr": net.node_cidr,
        "podCidr": net.pod_cidr,
        "serviceCidr": net.service_cidr,
        "proxyOnlyCidr": net.proxy_only_cidr,
        "masterCidr": net.master_cidr,
        **{f"gpuSubnetCidrs[{i}]": c for i, c in enumerate(net.gpu_subnet_cidrs)},
    }
    for key, cidr in ranges.items():
        try:
            other = ipaddress.IPv4Network(cidr)
        except ValueError:
            continue  # reported by the gke section's own rules
        if psa.overlaps(other):
            problems.append(
                Problem(
                    section.at("private_service_cidr"),
                    f"overlaps target.gke.network.{key} ({other}); choose a free range (got {psa})",
                )
            )
    if settings.gateway_address is not None:
        if gateway_implementation != "gke-l7-rilb":
            problems.append(
                Problem(
                    section.at("gateway_address"),
                    "only with gateway.implementation gke-l7-rilb (the managed gateway)",
                )
            )
        try:
            subnet = ipaddress.IPv4Network(net.node_cidr)
        except ValueError:
            return problems
        address = ipaddress.IPv4Address(settings.gateway_address)
        usable = address in subnet and subnet.network_address + 1 < address < subnet.broadcast_address - 1
        if not usable:
            problems.append(
                Problem(
                    section.at("gateway_address"),
                    f"must be an address of target.gke.network.nodeCidr {subnet} other than the four "
                    f"GCE reserves (got {address})",
                )
            )
    return problems


def responses_section_problems(
    responses: ResponsesConfig,
    kind: str,
    gke: GkeTargetConfig | None,
    gateway_implementation: str,
    path: Key,
) -> list[Problem]:
    """Cross-field rules of the responses section; `path` is its key path."""
    problems = _target_section_problems(responses, kind, path)
    database = responses.database
    if kind in ("gke", "eks") and database.max_storage_gib < database.storage_gib:
        problems.append(
            Problem(
                path.at("database", "max_storage_gib"),
                f"must be at least storageGiB ({database.storage_gib} GiB) (got {database.max_storage_gib})",
            )
        )
    if kind == "gke" and gke is not None:
        problems += _gke_problems(responses, gke, gateway_implementation, path)
    return problems


def password_problems(responses: ResponsesConfig | None, has_password: bool, project: str) -> list[Problem]:
    """A stack with Responses on needs the database owner's password as a secret. Checked where a
    whole stack is read (the stack program, `llmd-fleet render/check`), not by `parse_config`,
    which also validates settings without their secrets."""
    if responses is None or has_password:
        return []
    return [
        Problem(
            f"{project}:{PASSWORD_KEY}",
            f"required with {project}:responses: pulumi config set --secret {PASSWORD_KEY} <value> "
            "(16 or more characters; RDS refuses '/', '@', '\"' and spaces)",
        )
    ]


def database_subnet_cidrs(vpc_cidr: str) -> dict[str, str]:
    """eks: the two /24 subnets of the RDS instance, first of the VPC's fourth quarter (the first
    three hold the node and public subnets, llmd_fleet/targets/eks/config.py subnet_cidrs), one in the
    capacity zone and one in the secondary zone (Multi-AZ needs two)."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    quarter = list(vpc.subnets(new_prefix=vpc.prefixlen + 2))[3]
    first, second = list(quarter.subnets(new_prefix=24))[:2]
    return {"database-capacity": str(first), "database-secondary": str(second)}
