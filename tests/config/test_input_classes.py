"""Hostile input by class (docs/bad-input.md): each class is refused by one grammar or rule, and the
tests generate inputs across the class rather than listing examples."""

import copy
import typing
from typing import Any

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from llmd_fleet.cli.bench.workload import BenchError, BenchOptions, check_options
from llmd_fleet.config.grammar import (
    RESERVED_HEADER_PREFIXES,
    RESERVED_HEADERS,
    RESERVED_NAMESPACES,
    Pattern,
    http_header_problem,
    ipv4_address_problem,
    managed_namespace_problem,
    object_store_endpoint_problem,
    registry_problem,
    service_url_problem,
    url_port,
)
from llmd_fleet.config.parse import parse_config
from llmd_fleet.config.stack import StackConfig
from llmd_fleet.core.problems import ConfigError, Problem
from tests.conftest import stack_raw_config

_FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _problems(raw: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return caught.value.problems


def _flatten(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in typing.get_args(annotation):
        out += _flatten(arg)
    return out


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[type[BaseModel]]:
    if model in seen:
        return []
    seen.add(model)
    found = [model]
    for field in model.model_fields.values():
        for inner in _flatten(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found += _models(inner, seen)
    return found


def _metadata(field: Any) -> list[Any]:
    """Every constraint object on a field, its own and those inside its annotation."""
    found = list(field.metadata)
    for arg in _flatten(field.annotation):
        for meta in getattr(arg, "__metadata__", ()):
            found += [meta, *getattr(meta, "metadata", [])]
    return found


def _patterns() -> dict[str, Pattern]:
    found: dict[str, Pattern] = {}
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            for meta in _metadata(field):
                if isinstance(meta, Pattern):
                    found[f"{model.__name__}.{field.alias or name}"] = meta
    return found


# --- Patterns: ASCII only, the whole value ----------------------------------------------------------


def test_no_config_field_takes_a_pattern_other_than_the_ascii_whole_value_one():
    """pydantic's `Field(pattern=...)` reads `\\d` as any Unicode digit; every pattern is a Pattern."""
    raw_patterns = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            for meta in _metadata(field):
                if not isinstance(meta, Pattern) and isinstance(getattr(meta, "pattern", None), str):
                    raw_patterns.append(f"{model.__name__}.{field.alias or name}")
    assert not raw_patterns
    assert len(_patterns()) >= 15  # the walk reached the patterned fields


# Unicode digits `\d` would take: Arabic-Indic, Devanagari, fullwidth, mathematical bold.
_FOREIGN_DIGITS = (0x0660, 0x0966, 0xFF10, 0x1D7CE)


@_FEW
@given(data=st.data())
def test_every_pattern_refuses_foreign_digits_and_a_trailing_newline(data):
    field, pattern = data.draw(st.sampled_from(sorted(_patterns().items())), label="field")
    ascii_only = st.characters(max_codepoint=127)
    value = data.draw(st.from_regex(pattern.pattern, fullmatch=True, alphabet=ascii_only))
    if pattern.problem(value) is not None:  # the generator's reading of the pattern may differ
        return
    assert pattern.problem(value + "\n"), field
    assert pattern.problem(value + "\r\n"), field
    assert pattern.problem("\n" + value), field
    base = data.draw(st.sampled_from(_FOREIGN_DIGITS))
    for i, char in enumerate(value):
        if char.isdigit():
            foreign = value[:i] + chr(base + int(char)) + value[i + 1 :]
            assert pattern.problem(foreign), (field, foreign)


@pytest.mark.parametrize(
    ("stack", "path", "value"),
    [
        ("onprem-h100", ("target", "kubernetesVersion"), "1.\u0663\u0664.\u0662"),
        ("onprem-h100", ("target", "kubernetesVersion"), "1.0\n"),
        ("eks-h100", ("target", "eks", "region"), "us-east-\uff12"),
        ("eks-h100", ("target", "eks", "adminPrincipalArns"), ["arn:aws:iam::\uff11" + "1" * 11 + ":role/x"]),
        ("eks-h100", ("target", "eks", "adminPrincipalArns"), ["arn:aws:iam::111122223333:role/x $(id)"]),
        ("eks-h100", ("target", "eks", "adminPrincipalArns"), ["arn:aws:iam::111122223333:"]),
        ("gke-h100", ("target", "gke", "systemPool", "machineType"), "n2-standard-32 --x"),
        ("gke-h100", ("target", "gke", "systemPool", "machineType"), "n2-standard-\uff13\uff12"),
        ("onprem-h100", ("images", "registry"), "../../evil"),
        ("onprem-h100", ("images", "registry"), "--insecure-registry.example"),
    ],
)
def test_a_value_outside_its_pattern_is_refused_naming_the_key(stack, path, value):
    raw = copy.deepcopy(stack_raw_config(stack))
    node = raw
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value
    problems = _problems(raw)
    wanted = "llmd-fleet:" + ".".join(path)
    assert any(where.startswith(wanted) for where, _ in problems), problems


def test_a_node_group_name_with_a_trailing_newline_is_refused():
    raw = copy.deepcopy(stack_raw_config())
    raw["fleet"]["nodeGroups"] = {"h100\n": raw["fleet"]["nodeGroups"].pop("h100")}
    for role in raw["serving"]["roles"].values():
        role["nodeGroup"] = "h100\n"
    assert any("DNS-1123 label" in message for _, message in _problems(raw))


_REGISTRY_PART = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)


@_FEW
@given(
    host=st.lists(_REGISTRY_PART, min_size=1, max_size=3).map(".".join),
    port=st.integers(min_value=-1, max_value=10**6),
    path=st.lists(st.sampled_from(["..", ".", "-x", "x-", "llmd", "a.b", "a__b", "", "A"]), max_size=3),
    prefix=st.sampled_from(["", "-", "--", "/", "./", "../"]),
)
def test_a_registry_is_a_host_port_and_path_never_a_flag_or_a_relative_path(host, port, path, prefix):
    value = prefix + host + (f":{port}" if port >= 0 else "") + "".join("/" + p for p in path)
    good_path = all(p in ("llmd", "a.b", "a__b") for p in path)
    should_pass = not prefix and (port < 0 or 1 <= port <= 65535) and good_path
    assert (registry_problem(value) is None) == should_pass, value


# --- URLs and ports: one grammar, ports 1-65535 -----------------------------------------------------


@_FEW
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.sampled_from(["prometheus.monitoring.svc", "10.0.0.1", "otel"]),
    port=st.one_of(st.none(), st.integers(min_value=0, max_value=10**5 - 1)),
)
def test_a_service_url_names_a_port_in_1_to_65535_or_none(scheme, host, port):
    value = f"{scheme}://{host}" + ("" if port is None else f":{port}")
    accepted = service_url_problem(value) is None
    assert accepted == (port is None or 1 <= port <= 65535), value
    if accepted:
        assert url_port(value) == (port or (443 if scheme == "https" else 80))


_URL_FIELDS = [
    ("serving", "autoscaling", "prometheusAddress"),
    ("router", "tracing", "otlpEndpoint"),
]


@pytest.mark.parametrize("path", _URL_FIELDS, ids=".".join)
@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_every_url_field_refuses_a_port_out_of_range(path, port):
    raw = copy.deepcopy(stack_raw_config())
    node = raw
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = f"http://collector.example:{port}"
    problems = _problems(raw)
    wanted = "llmd-fleet:" + ".".join(path)
    assert any(where == wanted and "1-65535" in message for where, message in problems), problems


_URL_SUFFIXES = ("Address", "Endpoint", "Url", "endpoint")


def _grammar_checks(field: Any) -> set[Any]:
    """The grammar functions (grammar._validator's `check`) a field is validated by."""
    checks = set()
    for meta in _metadata(field):
        for cell in getattr(getattr(meta, "func", None), "__closure__", None) or ():
            checks.add(cell.cell_contents)
    return checks


def test_every_url_field_uses_the_service_url_grammar():
    """A field that names a URL or an address is typed with the one URL grammar (or an IPv4
    address), never a pattern of its own."""
    found = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            alias = field.alias or name
            if alias.endswith(_URL_SUFFIXES) and str in _flatten(field.annotation):
                found.append(alias)
                checks = _grammar_checks(field)
                assert checks & {service_url_problem, object_store_endpoint_problem, ipv4_address_problem}, (
                    f"{model.__name__}.{alias}"
                )
    assert {"prometheusAddress", "otlpEndpoint"} <= set(found)


def test_every_port_field_is_bounded_to_1_65535():
    ports = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            alias = field.alias or name
            if alias.endswith("Port") and int in _flatten(field.annotation):
                ports.append(alias)
                lows = [m.ge for m in _metadata(field) if isinstance(m, annotated_types.Ge)]
                highs = [m.le for m in _metadata(field) if isinstance(m, annotated_types.Le)]
                assert lows and lows[0] >= 1 and highs and highs[0] <= 65535, f"{model.__name__}.{alias}"
    assert ports


@pytest.mark.parametrize("url", ["http://prometheus:0", "http://prometheus:65536", "http://prometheus:99999"])
def test_bench_refuses_a_prometheus_url_port_out_of_range(url):
    with pytest.raises(BenchError, match="1-65535"):
        check_options(parse_config(stack_raw_config()), BenchOptions(prometheus_url=url))


# --- Reserved headers: one list, every header field --------------------------------------------------


def _header_fields() -> list[str]:
    found = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            if http_header_problem in _grammar_checks(field):
                found.append(f"{model.__name__}.{field.alias or name}")
    return found


def test_every_header_field_is_typed_with_the_one_header_grammar():
    assert {"SessionAffinityConfig.header", "SessionAffinityConfig.agentHeaders"} <= set(_header_fields())


@_FEW
@given(
    name=st.one_of(
        st.sampled_from(sorted(RESERVED_HEADERS)),
        st.tuples(
            st.sampled_from(RESERVED_HEADER_PREFIXES), st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
        ).map("".join),
    ),
    field=st.sampled_from(["header", "agentHeaders", "tokenHeader"]),
)
def test_a_reserved_header_is_refused_in_every_header_field(name, field):
    raw = copy.deepcopy(stack_raw_config())
    affinity = raw.setdefault("router", {}).setdefault("sessionAffinity", {})
    affinity[field] = [name] if field == "agentHeaders" else name
    problems = _problems(raw)
    assert any(
        where.startswith(f"llmd-fleet:router.sessionAffinity.{field}") and "is reserved" in message
        for where, message in problems
    ), problems


# --- Reserved namespaces: none the stack manages ------------------------------------------------------

_NAMESPACE_FIELDS = [
    ("serving", "namespace"),
    ("observability", "namespace"),
    ("serving", "autoscaling", "kedaNamespace"),
]


def test_every_namespace_field_is_a_managed_namespace():
    found = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            alias = field.alias or name
            if alias == "namespace" or alias.endswith("Namespace"):
                found.append(alias)
                assert managed_namespace_problem in _grammar_checks(field), f"{model.__name__}.{alias}"
    assert len(found) >= len(_NAMESPACE_FIELDS)


@_FEW
@given(
    namespace=st.one_of(
        st.sampled_from(sorted(RESERVED_NAMESPACES)),
        _REGISTRY_PART.map(lambda part: f"kube-{part}"),
    ),
    path=st.sampled_from(_NAMESPACE_FIELDS),
)
def test_a_kubernetes_namespace_is_refused_in_every_namespace_field(namespace, path):
    raw = copy.deepcopy(stack_raw_config())
    node = raw
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = namespace
    problems = _problems(raw)
    wanted = "llmd-fleet:" + ".".join(path)
    assert any(where == wanted and "Kubernetes owns" in message for where, message in problems), problems
