"""The responses section's rules against the rest of the stack: the target kind's store
(`TargetSpec.responses`, llmd_fleet/targets/base.py `ResponsesStore`) decides which database
section applies, whether a backup store is required and the kind's own rules. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmd_fleet.core.problems import Key, Problem, key
from llmd_fleet.layers.responses.config import ResponsesConfig, ResponsesDatabaseConfig
from llmd_fleet.targets.specs import SPECS

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig


def _section_owners() -> dict[str, str]:
    """`responses.database.<section>` -> the kinds that read it ("onprem"), in the database
    model's order of fields."""
    owners: dict[str, list[str]] = {}
    for kind, spec in SPECS.items():
        if spec.responses is not None:
            owners.setdefault(spec.responses.section, []).append(kind)
    return {
        field: " or ".join(owners[field]) for field in ResponsesDatabaseConfig.model_fields if field in owners
    }


DATABASE_SECTIONS = _section_owners()
"""Each kind's section of `responses.database` and the kinds that read it."""
IN_CLUSTER_KINDS = " or ".join(
    kind for kind, spec in SPECS.items() if spec.responses is not None and not spec.responses.managed
)
"""The kinds whose response store runs in the cluster (CloudNativePG, with `responses.backup`)."""


def _store_problems(responses: ResponsesConfig, kind: str, path: Key) -> list[Problem]:
    store = SPECS[kind].responses
    problems = []
    for section, owners in DATABASE_SECTIONS.items():
        if (store is None or section != store.section) and getattr(responses.database, section) is not None:
            problems.append(
                Problem(path.at("database", section), f"only for kind {owners} (the target is {kind})")
            )
    if store is None:
        return problems  # the kind refuses the key itself
    if not store.managed and responses.backup is None:
        problems.append(
            Problem(
                path.at("backup"),
                f"required on kind {kind}: an S3-compatible store {{endpoint, bucket, credentialsSecret}} "
                "for the database's base backups and WAL archive, or `none` to run without backups",
            )
        )
    if store.managed and responses.backup is not None:
        problems.append(
            Problem(
                path.at("backup"),
                f"only for kind {IN_CLUSTER_KINDS}: {kind} uses the managed database's own backups "
                "(responses.database.backupRetentionDays)",
            )
        )
    database = responses.database
    if store.managed and database.max_storage_gib < database.storage_gib:
        problems.append(
            Problem(
                path.at("database", "max_storage_gib"),
                f"must be at least storageGiB ({database.storage_gib} GiB) (got {database.max_storage_gib})",
            )
        )
    return problems


def responses_problems(config: StackConfig) -> list[Problem]:
    """The response store fits the target: its kind's database section, the backup store an
    in-cluster database needs, and the kind's own rules of its database."""
    if config.responses is None:
        return []
    problems = _store_problems(config.responses, config.target.kind, key(config, "responses"))
    store = SPECS[config.target.kind].responses
    if store is not None:
        problems += store.problems(config)
    return problems
