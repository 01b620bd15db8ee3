"""Every leaf input of a rendered cloud resource against the API field it becomes
(devtools/cloud_check/tables.py names the field, devtools/cloud_check/models.py reads the model)."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.cloud_check.documented import DOCUMENTED
from devtools.cloud_check.models import Models
from devtools.cloud_check.tables import TABLES, Api, Entry, Free, Ref, Secret, Table


@dataclass
class Result:
    checked: int = 0
    refused: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def leaves(
    value: Any, fields: Mapping[str, Entry], pattern: str = "", at: str = ""
) -> Iterator[tuple[str, str, Any]]:
    """(pattern, instance path, value) of every leaf: `pattern` is the table's name for it
    (`a[]`, `a{key}`), the instance path names the element (`a[3]`, `a{name}`)."""
    if isinstance(value, dict):
        if f"{pattern}{{key}}" in fields:
            for key, item in value.items():
                yield f"{pattern}{{key}}", f"{at}{{{key}}}", key
                yield from leaves(item, fields, f"{pattern}{{value}}", f"{at}{{{key}}}")
        else:
            for key, item in value.items():
                yield from leaves(item, fields, _join(pattern, key), _join(at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, fields, f"{pattern}[]", f"{at}[{index}]")
    else:
        yield pattern, at, value


def entry_for(table: Table, pattern: str) -> Entry | None:
    return table.fields.get(pattern) or table.fields.get("*")


def check_value(models: Models, entry: Api, value: Any) -> list[str]:
    """The model's (and the documented table's) objections to `value` in `entry`'s field."""
    model, leaf = models.resolve(entry.field)
    found = model.problems(leaf, value)
    if entry.documented and not found:
        documented = DOCUMENTED[entry.documented]
        if value not in documented.values:
            found.append(f"{value!r}: not documented: {' | '.join(documented.values)} ({documented.source})")
    return found


def check_resource(models: Models, rtype: str, name: str, inputs: Mapping[str, Any], result: Result) -> None:
    table = TABLES.get(rtype)
    where = f"{rtype} {name}"
    if table is None:
        result.unmapped.append(f"{where}: no table for the resource type")
        return
    given: dict[tuple[str, str], set[str]] = {}
    for pattern, at, value in leaves(dict(inputs), table.fields):
        entry = entry_for(table, pattern)
        if entry is None:
            result.unmapped.append(f"{where} {pattern}")
            continue
        if isinstance(entry, Free):
            continue
        model, leaf = models.resolve(entry.field)
        for structure, member in leaf.through:
            given.setdefault((entry.field.partition(":")[0], structure), set()).add(member)
        if isinstance(entry, (Ref, Secret)):
            continue
        result.checked += 1
        result.refused += [f"{where} {at} = {value!r}: {p}" for p in check_value(models, entry, value)]
    for (model_name, structure), members in sorted(given.items()):
        model = models.get(model_name)
        for member in model.required(structure):
            if member not in members and f"{model_name}:{structure}.{member}" not in table.supplied:
                result.refused.append(f"{where}: {structure}.{member} is required and not given")


def check_cloud_dir(models: Models, cloud_dir: Path) -> Result:
    """Every cloud/*.yaml of one rendered stack."""
    result = Result()
    for path in sorted(cloud_dir.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        check_resource(models, document["type"], document["name"], document.get("inputs") or {}, result)
    return result


@dataclass(frozen=True)
class Control:
    """A value the model must refuse, in a field the stacks set."""

    resource: str
    path: str
    value: str


CONTROLS = (
    # The AL2 GPU AMI type is AL2_x86_64_GPU; AL2_x86_64_NVIDIA does not exist.
    Control("aws:eks/nodeGroup:NodeGroup", "amiType", "AL2_x86_64_NVIDIA"),
    # A p5 size that does not exist (p5.48xlarge is the only 8-GPU p5).
    Control("aws:ec2/launchTemplate:LaunchTemplate", "instanceType", "p5.96xlarge"),
    # gcloud's spelling (--reservation-affinity=specific) is not the API's SPECIFIC_RESERVATION.
    Control(
        "gcp:container/nodePool:NodePool", "nodeConfig.reservationAffinity.consumeReservationType", "SPECIFIC"
    ),
)


# An enum such as EC2's InstanceType has over 1,000 members: a line names at most this many.
SHOWN_VALUES = 20


def allowed_values(values: list[str]) -> str:
    """The model's allowed values for a line: at most SHOWN_VALUES of them, then how many more."""
    shown = " | ".join(values[:SHOWN_VALUES])
    rest = len(values) - SHOWN_VALUES
    return f"{shown} | ... ({rest} more)" if rest > 0 else shown


def run_control(models: Models, control: Control) -> tuple[str, bool]:
    """(the line's text after `<case>: `, whether the model refused the value)."""
    entry = TABLES[control.resource].fields[control.path]
    assert isinstance(entry, Api)
    model, leaf = models.resolve(entry.field)
    refused = bool(model.problems(leaf, control.value))
    allowed = leaf.constraints.get("enum")
    if refused and allowed:
        return f"refused: {allowed_values(allowed)}", True
    if refused:
        return f"refused: {'; '.join(model.problems(leaf, control.value))}", True
    return f"ACCEPTED (the model allows {control.value!r})", False
