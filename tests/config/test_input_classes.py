"""Hostile input by class (docs/bad-input.md): each class is refused by one grammar or rule, and the
tests generate inputs across the class rather than listing examples."""

import contextlib
import copy
import datetime
import json
import os
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from llmd_fleet.cli.bench.report import MAX_DEPTH, MAX_INT_DIGITS
from llmd_fleet.cli.bench.workload import BenchError, BenchOptions, check_options
from llmd_fleet.cli.main import run
from llmd_fleet.cli.outdir import OUTPUT_MARKER, OutputDirError, recover, write_atomically
from llmd_fleet.cli.stack_file import MAX_ALIASES, MAX_EXPANDED_NODES, StackFile, read_stack_file
from llmd_fleet.config.grammar import (
    HOST_DATA_PARENTS,
    RESERVED_HEADER_PREFIXES,
    RESERVED_HEADERS,
    RESERVED_NAMESPACES,
    Pattern,
    host_data_root_problem,
    host_path_problem,
    http_header_problem,
    ipv4_address_problem,
    managed_namespace_problem,
    object_store_endpoint_problem,
    registry_problem,
    service_url_problem,
    url_port,
)
from llmd_fleet.core.problems import PROJECT, ConfigError, Problem, printable
from llmd_fleet.stack.model import StackConfig
from llmd_fleet.stack.parse import near_project, parse_config, read_pulumi_config
from llmd_fleet.stack.registry import KNOWN_KEYS
from tests.support import REFERENCE_STACK, STACKS_DIR, config_problems, stack_raw_config

_FEW = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


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
    problems = config_problems(raw)
    wanted = "llmd-fleet:" + ".".join(path)
    assert any(where.startswith(wanted) for where, _ in problems), problems


def test_a_node_group_name_with_a_trailing_newline_is_refused():
    raw = copy.deepcopy(stack_raw_config())
    raw["fleet"]["nodeGroups"] = {"h100\n": raw["fleet"]["nodeGroups"].pop("h100")}
    for role in raw["serving"]["roles"].values():
        role["nodeGroup"] = "h100\n"
    assert any("DNS-1123 label" in message for _, message in config_problems(raw))


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
    problems = config_problems(raw)
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
    problems = config_problems(raw)
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
    problems = config_problems(raw)
    wanted = "llmd-fleet:" + ".".join(path)
    assert any(where == wanted and "Kubernetes owns" in message for where, message in problems), problems


# --- YAML: the stack reader takes what the Pulumi CLI takes, within bounds ---------------------------


def _read_text(tmp_path: Path, text: str) -> StackFile:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    (stacks / "Pulumi.t.yaml").write_text(text)
    return read_stack_file(stacks, "t")


def _refused_text(tmp_path: Path, text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        _read_text(tmp_path, text)
    for problem in caught.value.problems:
        assert "\n" not in problem.key + problem.message
    return caught.value.problems


_REFERENCE_TEXT = (STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text()


def _bomb(width: int, depth: int, leaf: str) -> str:
    """Nested aliases: each level lists the one below `width` times (width**depth leaves)."""
    lines = [f"l0: &l0 [{', '.join([leaf] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth + 1)]
    return "\n".join(lines) + "\n"


@_FEW
@given(
    width=st.integers(2, 12),
    depth=st.integers(2, 12),
    where=st.sampled_from(["top", "ignored", "config"]),
)
def test_an_alias_bomb_is_refused_wherever_it_sits(tmp_path_factory, width, depth, where):
    """However the aliases nest, and under a key the program ignores too, the reader refuses more
    than MAX_ALIASES aliases or an expansion beyond MAX_EXPANDED_NODES, without expanding it."""
    if width**depth <= MAX_EXPANDED_NODES and width * depth <= MAX_ALIASES:
        return  # a small, legitimate use of aliases
    bomb = _bomb(width, depth, '"lol"')
    if where == "top":
        text = bomb + _REFERENCE_TEXT
    elif where == "ignored":
        text = (
            _REFERENCE_TEXT
            + "  kubernetes:ignored:\n"
            + "".join(f"    {line}\n" for line in bomb.splitlines())
        )
    else:
        text = (
            _REFERENCE_TEXT
            + "  llmd-fleet:router:\n"
            + "".join(f"    {line}\n" for line in bomb.splitlines())
        )
    (problem,) = _refused_text(tmp_path_factory.mktemp("bomb"), text)
    assert "aliases" in problem.message


def test_an_expansion_within_the_alias_bound_is_still_bounded(tmp_path):
    # 16 aliases, each doubling a list of 1000 values: 2**8 * 1000 values once expanded.
    text = _bomb(2, 8, ", ".join(["x"] * 500)) + _REFERENCE_TEXT
    (problem,) = _refused_text(tmp_path, text)
    assert f"expand to more than {MAX_EXPANDED_NODES:,} values" in problem.message


def test_a_few_aliases_and_a_merge_key_read_as_yaml_means(tmp_path):
    text = _REFERENCE_TEXT + "  kubernetes:a: &base {x: 1}\n  kubernetes:b:\n    <<: *base\n    y: 2\n"
    assert json.loads(_read_text(tmp_path, text).values["kubernetes:b"]) == {"x": 1, "y": 2}


@_FEW
@given(
    tag=st.sampled_from(
        [
            *("!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]"),
            *("!!timestamp 2026-12-02", "!!python/object/apply:os.system [ls]"),
            *("!!python/name:os.system", "!local x", "!<tag:x,1:y> z"),
        ]
    ),
    where=st.sampled_from(["  llmd-fleet:router: {}\n", "  llmd-fleet:router:\n    mode: {}\n", "x: {}\n"]),
)
def test_a_tag_other_than_the_plain_ones_is_refused(tmp_path_factory, tag, where):
    placed = where.format(tag)
    text = placed + _REFERENCE_TEXT if placed.startswith("x") else _REFERENCE_TEXT + placed
    (problem,) = _refused_text(tmp_path_factory.mktemp("tag"), text)
    assert "is not allowed: a stack file holds plain" in problem.message


@_FEW
@given(
    day=st.dates(min_value=datetime.date(1000, 1, 1)),
    form=st.sampled_from(["{}", "{}T10:20:30Z", "{} 10:20:30"]),
)
def test_an_unquoted_date_reads_as_the_string_written(tmp_path_factory, day, form):
    """As the Pulumi CLI reads it: a string (never a date object, which no JSON holds)."""
    written = form.format(day.isoformat())
    text = _REFERENCE_TEXT.replace("revision: main", f"revision: {written}") + f"  kubernetes:d: {written}\n"
    stack_file = _read_text(tmp_path_factory.mktemp("date"), text)
    assert json.loads(stack_file.values["llmd-fleet:model"])["revision"] == written
    assert stack_file.values["kubernetes:d"] == written


@pytest.mark.parametrize(
    ("written", "value"), [("yes", "yes"), ("on", "on"), ("1:20", "1:20"), ("true", True)]
)
def test_plain_scalars_follow_yaml_1_2_as_the_pulumi_cli_does(tmp_path, written, value):
    text = _REFERENCE_TEXT + f"  kubernetes:obj:\n    v: {written}\n"
    assert json.loads(_read_text(tmp_path, text).values["kubernetes:obj"]) == {"v": value}


def _near_misses(project: str) -> st.SearchStrategy[str]:
    separators = st.sampled_from(["_", "", ".", "--", " "]).map(lambda sep: project.replace("-", sep))
    cased = st.sampled_from([project.upper(), project.title(), project.replace("-", "_").upper()])
    dropped = st.integers(0, len(project) - 1).map(lambda i: project[:i] + project[i + 1 :])
    swapped = st.integers(0, len(project) - 2).map(
        lambda i: project[:i] + project[i + 1] + project[i] + project[i + 2 :]
    )
    return st.one_of(separators, cased, dropped, swapped).filter(lambda p: p != project and ":" not in p)


@_FEW
@given(prefix=_near_misses(PROJECT), key=st.sampled_from(sorted(KNOWN_KEYS)))
def test_a_near_miss_project_prefix_is_refused_with_a_suggestion(prefix, key):
    with pytest.raises(ConfigError) as caught:
        read_pulumi_config(lambda _: "x", [f"{PROJECT}:model", f"{prefix}:{key}"], lambda _: False)
    ((where, message),) = caught.value.problems
    assert where == f"{prefix}:{key}" and message.endswith(f"did you mean {PROJECT}:{key}?")


@pytest.mark.parametrize("other", ["kubernetes", "gcp", "aws", "docker-build", "pulumi", "llm", "fleet"])
def test_other_providers_settings_are_not_near_misses(other):
    assert not near_project(other)


@pytest.mark.parametrize("key", sorted(KNOWN_KEYS))
def test_a_key_given_both_bare_and_with_the_project_prefix_is_refused(tmp_path, key):
    text = _REFERENCE_TEXT + f"  {key}: x\n"
    if f"\n  {PROJECT}:{key}:" not in _REFERENCE_TEXT:
        text += f"  {PROJECT}:{key}: y\n"
    problems = _refused_text(tmp_path, text)
    assert any(p.key == f"{PROJECT}:{key}" and "given twice" in p.message for p in problems)


# --- Messages: what a stack file holds cannot forge output lines -------------------------------------

# Characters that end, rewrite or reorder a terminal line: controls, separators, bidi overrides.
_FORGING = st.text(
    alphabet=st.one_of(
        st.characters(categories=["Cc", "Cf", "Zl", "Zp"]),
        st.sampled_from(["\n", "\r", "\x1b", "\u2028", "\u202e", "\x85"]),
    ),
    min_size=1,
    max_size=4,
)
_PRINTABLE = st.text(alphabet="abcdefghijklmnop-_.: ", min_size=0, max_size=6)


def _assert_one_line_each(error: ConfigError) -> None:
    lines = str(error).split("\n")
    assert len(lines) == 1 + len(error.problems)
    assert all(line.isprintable() for line in lines)


@_FEW
@given(
    key=st.builds(lambda a, b, c: a + b + c, _PRINTABLE, _FORGING, _PRINTABLE),
    where=st.sampled_from(["top", "section", "node group", "node label"]),
)
def test_a_key_with_control_characters_is_printed_escaped_on_one_line(key, where):
    raw = copy.deepcopy(stack_raw_config())
    if where == "top":
        raw[key] = {}
    elif where == "section":
        raw["router"] = {**raw.get("router", {}), key: 1}
    elif where == "node group":
        raw["fleet"]["nodeGroups"][key] = next(iter(raw["fleet"]["nodeGroups"].values()))
    else:
        group = next(iter(raw["fleet"]["nodeGroups"].values()))
        group["nodeLabels"] = {key: "x"}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    _assert_one_line_each(caught.value)
    assert any(printable(key) in f"{p.key} {p.message}" for p in caught.value.problems)


@_FEW
@given(text=st.text(max_size=40))
def test_printable_is_one_printable_line_and_keeps_printable_text(text):
    shown = printable(text)
    assert shown.isprintable() and "\n" not in shown
    if text.isprintable():
        assert shown == text


def test_the_command_line_prints_a_forged_key_on_one_escaped_line(tmp_path, capsys):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    forged = '"x\\nerror: all good\\r\\u001b[2K"'
    (stacks / "Pulumi.t.yaml").write_text(f"{_REFERENCE_TEXT}  llmd-fleet:router:\n    {forged}: 1\n")
    assert run(["--stacks-dir", str(stacks), "plan", "t"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "x\\nerror: all good\\r\\x1b[2K" in err


# --- bench-summary: any report JSON is read within bounds or refused on one line ---------------------


def _summary_of(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (tmp_path / "summary_lifecycle_metrics.json").write_text(text)
    code = run(["bench-summary", str(tmp_path)])
    return code, capsys.readouterr().err


@_FEW
@given(
    digits=st.integers(MAX_INT_DIGITS + 1, 20_000),
    sign=st.sampled_from(["", "-"]),
    where=st.sampled_from(['{"successes": {"count": %s}}', "[%s]", '{"load_summary": {"concurrency": %s}}']),
)
def test_bench_summary_refuses_a_huge_integer_on_one_line(tmp_path_factory, capsys, digits, sign, where):
    tmp_path = tmp_path_factory.mktemp("huge")
    code, err = _summary_of(tmp_path, where % (sign + "9" * digits), capsys)
    assert code == 2 and err.count("\n") == 1 and f"at most {MAX_INT_DIGITS}" in err


@_FEW
@given(depth=st.integers(MAX_DEPTH + 1, 200_000), kind=st.sampled_from(["[]", '{"a":}']))
def test_bench_summary_refuses_deep_nesting_on_one_line(tmp_path_factory, capsys, depth, kind):
    tmp_path = tmp_path_factory.mktemp("deep")
    opening, closing = (kind[0], kind[1]) if kind == "[]" else ('{"a":', "}")
    code, err = _summary_of(tmp_path, opening * depth + "1" + closing * depth, capsys)
    assert code == 2 and err.count("\n") == 1 and "nested deeper than" in err


def test_bench_summary_still_reads_ordinary_numbers(tmp_path, capsys):
    report = {"successes": {"count": 10**MAX_INT_DIGITS - 1}, "load_summary": {"concurrency": 500}}
    code, _ = _summary_of(tmp_path, json.dumps(report), capsys)
    assert code == 0


# --- --out: ownership by marker only, a recoverable swap, writability checked first ------------------

_RENDER_NAMES = ["summary.md", "manifests", "helm", "cloud", "remote", "urns.txt"]


@_FEW
@given(names=st.sets(st.sampled_from(_RENDER_NAMES), min_size=1))
def test_out_without_the_marker_is_never_taken_for_an_earlier_render(tmp_path_factory, names):
    out = tmp_path_factory.mktemp("out") / "build"
    out.mkdir()
    for name in names:
        if "." in name:
            (out / name).write_text("mine")
        else:
            (out / name).mkdir()
    with pytest.raises(OutputDirError, match="not a directory this command wrote"):
        write_atomically({"summary.md": "new"}, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(names)


def _tree_of(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


class _Interrupt(BaseException):
    pass


@_FEW
@given(cut=st.integers(0, 40))
def test_an_interrupt_at_any_point_of_the_swap_leaves_old_or_new_output_whole(tmp_path_factory, cut):
    out = tmp_path_factory.mktemp("swap") / "build"
    old_files = {"summary.md": "old", "manifests/a.yaml": "a: 1\n"}
    new_files = {"summary.md": "new", "manifests/b.yaml": "b: 2\n", "helm/x.yaml": "x\n"}
    write_atomically(old_files, out)
    steps = [0]
    real = {name: getattr(Path, name) for name in ("rename", "write_text", "mkdir")}

    def counting(name: str) -> Any:
        def step(self: Path, *args: Any, **kwargs: Any) -> Any:
            steps[0] += 1
            if steps[0] == cut:
                raise _Interrupt
            return real[name](self, *args, **kwargs)

        return step

    with pytest.MonkeyPatch.context() as patch:
        for name in real:
            patch.setattr(Path, name, counting(name))
        with contextlib.suppress(_Interrupt):
            write_atomically(new_files, out)
    recover(out)
    after = _tree_of(out)
    after.pop(OUTPUT_MARKER)
    assert after in (old_files, new_files)
    assert sorted(p.name for p in out.parent.iterdir()) == ["build"]


@pytest.mark.parametrize("case", ["read-only parent", "current directory", "under a file", "mount point"])
def test_out_that_cannot_be_written_is_refused_before_rendering(tmp_path, monkeypatch, capsys, case):
    if case == "read-only parent":
        parent = tmp_path / "ro"
        parent.mkdir(mode=0o500)
        out = parent / "build"
        if os.geteuid() == 0:  # root writes through permissions: the check asks os.access
            monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != parent)
    elif case == "current directory":
        monkeypatch.chdir(tmp_path)
        out = Path(".")
    elif case == "under a file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "build"
    else:
        out = Path("/")
    assert run(["--stacks-dir", str(STACKS_DIR), "render", REFERENCE_STACK, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing was changed" in err


# --- Host paths: an allow-list, a dedicated directory below a configured data root ------------------


def test_every_host_path_field_uses_the_host_path_grammar():
    """A field that names a host directory (`path`, `...Path`, `hostRoot`) is typed HostPath or
    HostDataRoot: the allow-list, never a pattern or deny list of its own."""
    found = []
    for model in _models(StackConfig, set()):
        for name, field in model.model_fields.items():
            alias = field.alias or name
            if (alias == "path" or alias.endswith(("Path", "Root"))) and str in _flatten(field.annotation):
                found.append(alias)
                assert _grammar_checks(field) & {host_path_problem, host_data_root_problem}, (
                    f"{model.__name__}.{alias}"
                )
    assert {"path", "hostRoot"} <= set(found)


# Where a node keeps what a pod must never write: the OS, runtimes, CNI, distributions' state, homes.
_NODE_PATHS = [
    *("/var/lib", "/var/lib/containers/storage", "/opt/cni/bin", "/var/lib/rancher", "/var/snap/microk8s"),
    *("/home/ubuntu", "/root", "/etc", "/usr/local", "/opt", "/tmp", "/var/lib/kubelet", "/run", "/boot"),
    *("/", "/mnt", "/srv", "/data", "/scratch", "/var", "/nix/store", "/lib/modules", "/snap"),
]
_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=8).filter(
    lambda s: s not in {".", ".."}
)


def _secondary(raw: dict[str, Any], **secondary: str) -> dict[str, Any]:
    raw["serving"].setdefault("kvTier", {})["cpuOffload"] = True
    raw["serving"]["kvTier"]["secondary"] = {"type": "local-nvme", **secondary}
    return raw


@_FEW
@given(base=st.sampled_from(_NODE_PATHS), tail=st.lists(_SEGMENT, max_size=3))
def test_a_host_path_outside_the_data_roots_is_refused(base, tail):
    path = "/".join([base.rstrip("/"), *tail]) or "/"
    if any(path.startswith(f"{p}/") for p in HOST_DATA_PARENTS) and path.count("/") >= 3:
        return  # e.g. /mnt/a/b: below a data root
    assert host_path_problem(path) is not None
    problems = config_problems(_secondary(copy.deepcopy(stack_raw_config()), path=path))
    assert any(p.key == "llmd-fleet:serving.kvTier.secondary.path" for p in problems)


def _data_parent_of(path: str) -> bool:
    return any(path.startswith(f"{p}/") for p in HOST_DATA_PARENTS)


@_FEW
@given(
    parent=st.sampled_from(HOST_DATA_PARENTS),
    root=st.lists(_SEGMENT, min_size=1, max_size=2),
    below=st.lists(_SEGMENT, min_size=1, max_size=2),
    other=_SEGMENT,
)
def test_a_dedicated_directory_below_the_configured_root_is_the_only_host_path(parent, root, below, other):
    host_root = "/".join([parent, *root])
    path = "/".join([host_root, *below])
    raw = _secondary(copy.deepcopy(stack_raw_config()), hostRoot=host_root, path=path)
    assert parse_config(raw).serving.kv_tier.secondary is not None
    # The root itself, or a directory beside it (/mnt/local -> /mnt/localx/x), is not below it.
    for outside in (host_root, f"{host_root}{other}/x"):
        problems = config_problems(
            _secondary(copy.deepcopy(stack_raw_config()), hostRoot=host_root, path=outside)
        )
        assert {p.key for p in problems} == {"llmd-fleet:serving.kvTier.secondary.path"}, problems
        assert all("must be a dedicated directory below" in p.message for p in problems)


@_FEW
@given(base=st.sampled_from(_NODE_PATHS), tail=st.lists(_SEGMENT, min_size=1, max_size=2))
def test_a_data_root_outside_the_data_parents_is_refused(base, tail):
    root = "/".join([base.rstrip("/"), *tail])
    if _data_parent_of(root):
        return
    problems = config_problems(
        _secondary(copy.deepcopy(stack_raw_config()), hostRoot=root, path=f"{root}/kv")
    )
    assert "llmd-fleet:serving.kvTier.secondary.hostRoot" in [p.key for p in problems]


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_a_swap_sibling_the_command_did_not_write_is_never_touched(tmp_path, kind):
    out = tmp_path / "build"
    sibling = tmp_path / ".build.llmd-new"
    if kind == "file":
        sibling.write_text("mine")
    elif kind == "directory":
        sibling.mkdir()
        (sibling / "notes.txt").write_text("mine")
    else:
        (tmp_path / "elsewhere").mkdir()
        sibling.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputDirError, match="was not written by this command"):
        write_atomically({"summary.md": "new"}, out)
    assert not out.exists() and (sibling.exists() or sibling.is_symlink())
