"""The base of every stack-config model: strict, frozen, unknown keys refused, camelCase in YAML."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


def camel_alias(field_name: str) -> str:
    """snake_case -> camelCase, keeping units and names readable (host_memory_gib ->
    hostMemoryGiB, memory_mib_per_rank -> memoryMiBPerRank, all2all_backend -> all2allBackend)."""
    return to_camel(field_name).replace("Gib", "GiB").replace("Mib", "MiB").replace("all2All", "all2all")


class ConfigModel(BaseModel):
    """A section of a stack file: strict types (no coercion from strings), frozen, unknown keys
    refused, camelCase keys in YAML (`camel_alias`) with snake_case attributes in Python, and each
    field's docstring its description in the configuration reference (docs/configuration.md)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        alias_generator=camel_alias,
        populate_by_name=True,
        use_attribute_docstrings=True,
        # YAML's .inf and .nan are floats too; no size, rate or fraction here may be either.
        allow_inf_nan=False,
    )
