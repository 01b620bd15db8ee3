"""The stack config model: the reference stack parses; bad input names the key path."""

import copy
from typing import Any

import pytest

from llmd_fleet.core.problems import ConfigError
from llmd_fleet.stack.parse import parse_config


def test_reference_stack_parses(raw_config):
    config = parse_config(raw_config)
    assert config.target.kind == "onprem"
    assert config.fleet.node_groups["h100"].count == 68
    assert config.model.id == "zai-org/GLM-5.2-FP8"
    assert config.serving.roles.decode.mtp_tokens == 3
    assert config.has_hf_token is False


def _set(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    *parents, leaf = path.split(".")
    node = raw
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return raw


class _Delete:
    """Marks a key to delete; its repr keeps test ids the same in every process (pytest-xdist)."""

    def __repr__(self) -> str:
        return "<delete>"


_DELETE = _Delete()

# (path to change, new value, key path the error must name, words the message must contain)
BAD_INPUTS = [
    ("target.kind", "openstack", "llmd-fleet:target.kind", "'onprem'"),
    ("target.kubernetesVersion", "1.33.4", "llmd-fleet:target.kubernetesVersion", "1.34 or newer"),
    ("target.kubernetesVersion", "latest", "llmd-fleet:target.kubernetesVersion", "pattern"),
    (
        "fleet.nodeGroups.h100.count",
        0,
        "llmd-fleet:fleet.nodeGroups.h100.count",
        "must be >= 1 nodes (got 0)",
    ),
    ("fleet.nodeGroups.h100.count", "68", "llmd-fleet:fleet.nodeGroups.h100.count", "integer"),
    ("fleet.nodeGroups.h100.gpusPerNode", 4, "llmd-fleet:fleet.nodeGroups.h100.gpusPerNode", "8"),
    (
        "fleet.nodeGroups.h100.accelerator",
        "A100",
        "llmd-fleet:fleet.nodeGroups.h100.accelerator",
        "H100-80GB",
    ),
    (
        "fleet.nodeGroups.h100.hostMemoryGiB",
        _DELETE,
        "llmd-fleet:fleet.nodeGroups.h100.hostMemoryGiB",
        "required",
    ),
    ("fleet.nodeGroups.h100.gpuCount", 8, "llmd-fleet:fleet.nodeGroups.h100.gpuCount", "unknown key"),
    ("model.id", "GLM-5.2", "llmd-fleet:model.id", "Hugging Face repository id"),
    ("model.weightDtype", "int4", "llmd-fleet:model.weightDtype", "fp8"),
    ("model.routedExpertParamsB", 800, "llmd-fleet:model.routedExpertParamsB", "smaller than totalParamsB"),
    ("serving.roles.decode.nodeGroup", "b200", "llmd-fleet:serving.roles.decode.nodeGroup", "h100"),
    ("serving.roles.decode.dataParallel", 32, "llmd-fleet:serving.roles.decode.dataParallel", "8 = 64"),
    (
        "serving.roles.decode.expertParallel",
        32,
        "llmd-fleet:serving.roles.decode.expertParallel",
        "must equal",
    ),
    ("serving.roles.prefill.tensorParallel", 3, "llmd-fleet:serving.roles.prefill.tensorParallel", "divide"),
    (
        "serving.roles.prefill.tensorParallel",
        8,
        "llmd-fleet:serving.roles.prefill.tensorParallel",
        "at least two",
    ),
    ("serving.roles.decode.blockSize", 128, "llmd-fleet:serving.roles.decode.blockSize", "prefill's (64)"),
    ("serving.roles.decode.blockSize", 48, "llmd-fleet:serving.roles.decode.blockSize", "16, 32, 64"),
    ("serving.roles.decode.mtpTokens", 1, "llmd-fleet:serving.roles.decode.mtpTokens", "prefill's (3)"),
    (
        "serving.roles.decode.gpuMemoryUtilization",
        1.2,
        "llmd-fleet:serving.roles.decode.gpuMemoryUtilization",
        "0.98",
    ),
    ("serving.roles.prefill.maxModelLen", 2000000, "llmd-fleet:serving.roles.prefill.maxModelLen", "1048576"),
    ("serving.name", "GLM_52", "llmd-fleet:serving.name", "pattern"),
    ("serving.roles.decode", _DELETE, "llmd-fleet:serving.roles.decode", "required"),
    ("serving", _DELETE, "llmd-fleet:serving", "required"),
]


@pytest.mark.parametrize(
    ("path", "value", "key", "words"), BAD_INPUTS, ids=[f"{p}={v!r}" for p, v, *_ in BAD_INPUTS]
)
def test_bad_input_names_the_key(raw_config, path, value, key, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(_set(raw_config, path, value))
    paths = [p for p, _ in caught.value.problems]
    assert key in paths, caught.value
    message = dict(caught.value.problems)[key]
    assert words in message, message


def test_unknown_top_level_key(raw_config):
    raw_config["replicas"] = 3
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems[0][0] == "llmd-fleet:replicas"
    assert "allowed:" in caught.value.problems[0][1]


def test_hf_token_must_be_secret(raw_config):
    raw_config["hfToken"] = "hf_plaintext"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config)
    assert caught.value.problems == [
        ("llmd-fleet:hfToken", "must be a secret: pulumi config set --secret hfToken <value>")
    ]
    assert parse_config(raw_config, frozenset({"hfToken"})).has_hf_token


def test_every_field_is_documented():
    from pydantic import BaseModel

    from llmd_fleet.config import fleet as module

    models = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, module._Model)]
    undocumented = [
        f"{model.__name__}.{name}"
        for model in models
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert models and issubclass(models[0], BaseModel)
    assert undocumented == []
