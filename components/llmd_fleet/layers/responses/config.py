"""`llmd-fleet:responses`: the Responses API with server-side state (`previous_response_id`),
served by vLLM's agentic API in front of the router, on a real PostgreSQL per target.

Pure (pydantic and the standard library). llmd_fleet/config/fleet.py embeds `ResponsesConfig` as
`StackConfig.responses` (absent: off) and runs `responses_problems` among its cross-field rules.
The database per target: its kind's `TargetSpec.responses` (llmd_fleet/targets/base.py
`ResponsesStore`) says which `responses.database.<section>` it reads (each section's model is in
its kind's folder, llmd_fleet/targets/<kind>/config.py) and whether its platform runs the database
(GKE Cloud SQL, EKS RDS) or the layer declares a CloudNativePG `Cluster`
(llmd_fleet/layers/responses/component.py). Field names are camelCase in YAML, snake_case in Python.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidatorFunctionWrapHandler, WrapValidator, create_model

from llmd_fleet.config.base import ConfigModel
from llmd_fleet.config.grammar import (
    DnsLabel,
    DnsSubdomain,
    ObjectStoreEndpoint,
    PostgresIdentifier,
    S3BucketName,
)
from llmd_fleet.core.problems import Problem
from llmd_fleet.targets.base import ResponsesStore, TargetSpec
from llmd_fleet.targets.specs import SPECS

PASSWORD_KEY = "responsesDbPassword"
"""The secret config key of the database owner's password (`pulumi config set --secret`)."""


class _Model(ConfigModel):
    """Strict, frozen, unknown keys refused, camelCase in YAML (llmd_fleet/config/base.py)."""


class _StoreConfig(_Model):
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


def _stores(specs: Mapping[str, TargetSpec]) -> list[ResponsesStore]:
    """Each kind's response store, one per `responses.database` section: the managed databases
    first, then those that run in the cluster, each group in registry order."""
    stores = [spec.responses for spec in specs.values() if spec.responses is not None]
    by_section: dict[str, ResponsesStore] = {}
    for store in sorted(stores, key=lambda store: not store.managed):  # stable: registry order kept
        by_section.setdefault(store.section, store)
    return list(by_section.values())


def database_model(specs: Mapping[str, TargetSpec]) -> type[_StoreConfig]:
    """The database section: the keys every store has, then one optional field per kind's
    section (`ResponsesStore.settings`, its model in the kind's folder), named by the registry."""
    sections: dict[str, Any] = {
        store.section: (store.settings | None, Field(default=None, description=store.settings_doc))
        for store in _stores(specs)
    }
    return create_model(
        "ResponsesDatabaseConfig",
        __base__=_StoreConfig,
        __module__=__name__,
        __doc__=_StoreConfig.__doc__,
        **sections,
    )


if TYPE_CHECKING:
    # The type checker sees the keys every store has; a kind reads its own section with
    # llmd_fleet/targets/base.py `store_settings`.
    ResponsesDatabaseConfig = _StoreConfig
else:
    ResponsesDatabaseConfig = database_model(SPECS)


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
