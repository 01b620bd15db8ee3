"""Check `vllm serve` command lines with the pinned vLLM's own code, in one process.

Runs inside the isolated parser environment (see `devtools.vllm_check.env`), never in the project's
environment: `checker.run(jobs.json, results.json)`. vLLM is imported once (~15 s) and its parser
built once; each command line then takes milliseconds. Per command line, in this order:

1. `vllm serve`'s own parser (a root parser with a `serve` subparser from `make_arg_parser`, as the
   real CLI builds it): unknown flags, choices (`--all2all-backend`, ...), types, and the JSON
   config flags that become config objects at parse time (`--kv-transfer-config`,
   `--kv-events-config`, `--compilation-config`, ...). A parse error stops the line here.
2. Flags given twice (argparse silently keeps the last value).
3. `validate_parsed_serve_args`, the CLI's own pre-engine checks, including the multi-port
   external load balancing rules (supervisor port, local DP size, start rank).
4. Registries vLLM consults only at server or engine start: `--tool-call-parser`,
   `--reasoning-parser`, and every `kv_connector` in `--kv-transfer-config`, including the children
   of a MultiConnector (`kv_connector_extra_config.connectors[]`, each built into a
   KVTransferConfig the way MultiConnector builds it).
5. `--speculative-config` keys against the SpeculativeConfig fields, `method` against
   SpeculativeMethod, and every other value against its field's type. The parser keeps this flag
   a plain dict; the full object needs the model's HF config and is built only at engine start.
6. Per engine the pod starts (one per local DP rank under the DP supervisor, with the child
   arguments the supervisor derives), the CacheConfig and ParallelConfig vLLM builds at engine
   start: every field EngineArgs sets under the same name (`kv_cache_dtype` -> `cache_dtype`),
   the DP rank, mode and address as `create_engine_config` derives them, and what needs the
   model (attention-free, sliding window, MoE) left at its default. ParallelConfig sees a
   CUDA-like platform: this machine has none, and on the CPU platform vLLM refuses settings such
   as EPLB that are valid on the pods' GPUs.
7. Ports the pod binds (`devtools.vllm_check.ports`), with the NIXL and p2p side-channel bases read
   through vLLM's own env parsing from the environment the script execs vLLM with.

For the engine-configuration check (devtools/vllm_check/engine_config.py) this process also, on the
CPU platform where vLLM's fused-MoE package and model classes import:

- resolves every vendored model's ModelConfig (`trust_remote_code` off), which inspects the model
  class in vLLM's own subprocess and stores vLLM's model-info cache for the H100 process, whose
  stand-in platform cannot import the CUDA-only model layers;
- asks vLLM's MoE kernel oracle for each engine whether it runs the weights' quantization with the
  engine's `--moe-backend`, and the MTP drafter's experts with the drafter's backend:
  `map_unquantized_backend` / `map_fp8_backend`, called as `select_unquantized_moe_backend` /
  `select_fp8_moe_backend` call them at model construction.
"""

import argparse
import contextlib
import dataclasses
import difflib
import importlib
import importlib.metadata
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from devtools.vllm_check import ports
from devtools.vllm_check.lines import CommandLine, Problem, blamed_flag

SPECULATIVE_FILLED_BY_VLLM = frozenset({"target_model_config", "target_parallel_config"})
_PYDANTIC_HINT = "For further information visit"


def clean(message: str) -> str:
    """vLLM's message without pydantic's documentation links."""
    lines = [line for line in message.strip().splitlines() if _PYDANTIC_HINT not in line]
    return "\n".join(lines)


def _errors(exc: Any) -> list[dict[str, Any]]:
    """The errors of a pydantic ValidationError."""
    return list(exc.errors())


def _names(names: list[str], wanted: str) -> str:
    close = difflib.get_close_matches(wanted, names, n=3)
    if close:
        return f"did you mean {', '.join(repr(n) for n in close)}? {len(names)} registered"
    return "registered: " + ", ".join(sorted(names))


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """The pod's environment on top of this process's, restored afterwards (vLLM reads its VLLM_*
    variables lazily). The target device stays CPU: it only decides argparse defaults here."""
    saved = dict(os.environ)
    os.environ.update(values)
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _CudaLike:
    """The CPU platform, except that it calls itself CUDA-like (see the module docstring)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def is_cuda_alike(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Vllm:
    """The parts of vLLM the check uses, imported once."""

    def __init__(self) -> None:
        # Without a target device vLLM cannot infer one on a machine without a GPU, and building
        # the parser fails: the argparse defaults come from default config objects.
        os.environ["VLLM_TARGET_DEVICE"] = "cpu"
        cli_args = importlib.import_module("vllm.entrypoints.common.cli_args")
        argparse_utils = importlib.import_module("vllm.utils.argparse_utils")
        config = importlib.import_module("vllm.config")
        supervisor = importlib.import_module("vllm.entrypoints.launchers.dp_supervisor")
        pydantic = importlib.import_module("pydantic")
        self.version = importlib.metadata.version("vllm")
        self.validate_parsed_serve_args: Callable[[argparse.Namespace], None] = (
            cli_args.validate_parsed_serve_args
        )
        self.tool_parsers = importlib.import_module("vllm.tool_parsers").ToolParserManager
        self.reasoning_parsers = importlib.import_module("vllm.reasoning").ReasoningParserManager
        factory = importlib.import_module("vllm.distributed.kv_transfer.kv_connector.factory")
        self.connectors: Mapping[str, Any] = factory.KVConnectorFactory._registry
        # The load formats vLLM can load with: get_model_loader() looks the value up in this map
        # only when the engine loads weights, after the API server parsed the flag unchecked.
        loaders = importlib.import_module("vllm.model_executor.model_loader")
        self.load_formats: Mapping[str, Any] = loaders._LOAD_FORMAT_TO_MODEL_LOADER
        self.kv_transfer_config = config.KVTransferConfig
        self.cache_config = config.CacheConfig
        self.parallel_config = config.ParallelConfig
        speculative = importlib.import_module("vllm.config.speculative")
        self.speculative_config = speculative.SpeculativeConfig
        self.speculative_method = speculative.SpeculativeMethod
        self.engine_args = importlib.import_module("vllm.engine.arg_utils").EngineArgs
        self.child_args = supervisor._build_vllm_dp_server_args
        self.start_rank = supervisor.infer_multi_port_external_lb_start_rank
        self.publisher = importlib.import_module("vllm.distributed.kv_events").ZmqEventPublisher
        self.envs = importlib.import_module("vllm.envs")
        self.parallel_module: Any = importlib.import_module("vllm.config.parallel")
        self.type_adapter = pydantic.TypeAdapter
        self.validation_error: type[Exception] = pydantic.ValidationError
        # The layout of vLLM's own CLI: a root parser with a `serve` subparser. The parser must see
        # `serve` first (FlexibleArgumentParser rewrites `--model X` only then). The `vllm`
        # console script is not used: it imports every subcommand and the model executor.
        root = argparse_utils.FlexibleArgumentParser(prog="vllm")
        sub = root.add_subparsers(dest="subparser", required=True)
        self.serve = sub.add_parser("serve", usage="vllm serve [model_tag] [options]")
        cli_args.make_arg_parser(self.serve)
        self.parser = root
        self.option_strings = set(self.serve._option_string_actions)

    def flag_for_field(self, field: str) -> str | None:
        """The CLI flag of a config field (`gpu_memory_utilization` -> `--gpu-memory-utilization`)."""
        flag = "--" + {"cache_dtype": "kv_cache_dtype"}.get(field, field).replace("_", "-")
        return flag if flag in self.option_strings else None

    def describe(self, exc: Exception, config: str = "") -> Problem:
        """A Problem from an exception vLLM raised, blaming the flag it names (for pydantic errors,
        the flag of the first failing field)."""
        if isinstance(exc, self.validation_error):
            parts, flag = [], None
            for error in _errors(exc):
                loc = ".".join(str(p) for p in error.get("loc", ()))
                parts.append(f"{loc}: {error['msg']}" if loc else str(error["msg"]))
                if flag is None and error.get("loc"):
                    flag = self.flag_for_field(str(error["loc"][0]))
            message = f"{config}: " * bool(config) + "; ".join(parts)
            return Problem(flag or blamed_flag(message), message)
        message = clean(str(exc)) or type(exc).__name__
        if not isinstance(exc, ValueError | TypeError):
            message = f"{type(exc).__name__}: {message}"
        message = f"{config}: " * bool(config) + message
        return Problem(blamed_flag(message), message)


def parse(vllm: Vllm, argv: list[str]) -> tuple[argparse.Namespace | None, Problem | None]:
    """Parse `serve ...` as the CLI does; argparse errors come back as Problems."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return vllm.parser.parse_args(argv), None
    except SystemExit as exc:
        text = stderr.getvalue()
        marker = text.rfind(": error: ")
        message = (
            clean(text[marker + len(": error: ") :]) if marker >= 0 else f"parser exited with {exc.code}"
        )
        return None, Problem(blamed_flag(message), message)
    except Exception as exc:  # vLLM lets some errors escape argparse (a bad cudagraph_mode: KeyError)
        return None, vllm.describe(exc)


def duplicate_flags(vllm: Vllm, argv: list[str]) -> list[Problem]:
    """Options given more than once (aliases and `--no-` forms count as the same option)."""
    seen: dict[str, list[str]] = {}
    for word in argv:
        if not word.startswith("-"):
            continue
        name = word.split("=", 1)[0]
        action = vllm.serve._option_string_actions.get(name) or vllm.serve._option_string_actions.get(
            name[:2] + name[2:].replace("_", "-")
        )
        if action is None or isinstance(action, argparse._AppendAction | argparse._CountAction):
            continue
        seen.setdefault(action.dest, []).append(name)
    return [
        Problem(
            flags[0],
            f"{flags[0]} is given {len(flags)} times ({', '.join(flags)}); vLLM keeps the last value",
        )
        for flags in seen.values()
        if len(flags) > 1
    ]


def parser_names(vllm: Vllm, args: argparse.Namespace) -> list[Problem]:
    """Tool-call and reasoning parser names against vLLM's registries (vLLM itself checks them
    only when the API server starts; a plugin file may register more names, so a plugin skips it)."""
    problems = []
    tool = args.tool_call_parser
    if tool and not getattr(args, "tool_parser_plugin", ""):
        names = list(vllm.tool_parsers.list_registered())
        if tool not in names:
            problems.append(
                Problem(
                    "--tool-call-parser",
                    f"{tool!r} is not a registered tool-call parser ({_names(names, tool)})",
                )
            )
    reasoning = getattr(args, "reasoning_parser", "")
    if reasoning and not getattr(args, "reasoning_parser_plugin", None):
        names = list(vllm.reasoning_parsers.list_registered())
        if reasoning not in names:
            problems.append(
                Problem(
                    "--reasoning-parser",
                    f"{reasoning!r} is not a registered reasoning parser ({_names(names, reasoning)})",
                )
            )
    return problems


def load_format(vllm: Vllm, args: argparse.Namespace) -> list[Problem]:
    """`--load-format` against the loaders vLLM registers (a plugin could register more; the
    fleet loads none, so a name missing here fails at weight loading)."""
    value = str(getattr(args, "load_format", "auto")).lower()
    names = sorted(vllm.load_formats)
    if value in vllm.load_formats:
        return []
    return [Problem("--load-format", f"{value!r} is not a registered load format ({_names(names, value)})")]


def kv_connectors(vllm: Vllm, config: Any, path: str = "") -> list[Problem]:
    """Every connector name in a KVTransferConfig, MultiConnector children included, against
    `KVConnectorFactory._registry` (a `kv_connector_module_path` loads the class from that module
    instead, which is out of reach here)."""
    flag = "--kv-transfer-config"
    if config is None or not config.kv_connector:
        return []
    problems = []
    name = config.kv_connector
    if name not in vllm.connectors and not config.kv_connector_module_path:
        problems.append(
            Problem(
                flag,
                f"{path}kv_connector {name!r} is not a registered KV connector "
                f"({_names(list(vllm.connectors), name)})",
            )
        )
    if name == "MultiConnector":
        children = (config.kv_connector_extra_config or {}).get("connectors")
        if not children:
            problems.append(Problem(flag, f"{path}MultiConnector needs kv_connector_extra_config.connectors"))
        for i, child in enumerate(children or []):
            where = f"{path}kv_connector_extra_config.connectors[{i}]: "
            if not isinstance(child, dict):
                problems.append(Problem(flag, f"{where}expected a KVTransferConfig object, got {child!r}"))
                continue
            try:  # as MultiConnector builds its children at engine start
                built = vllm.kv_transfer_config(**child, engine_id=child.get("engine_id", config.engine_id))
            except Exception as exc:
                problem = vllm.describe(exc)
                problems.append(Problem(flag, where + problem.message))
                continue
            problems += kv_connectors(vllm, built, where)
    return problems


def speculative(vllm: Vllm, args: argparse.Namespace) -> list[Problem]:
    """The shallow SpeculativeConfig check, after merging `--spec-*` as `create_speculative_config`."""
    flag = "--speculative-config"
    raw = args.speculative_config
    if raw is not None and not isinstance(raw, dict):
        return [Problem(flag, f"expected a JSON object, got {raw!r}")]
    config = dict(raw or {})
    problems = []
    for option, key in (
        ("--spec-method", "method"),
        ("--spec-model", "model"),
        ("--spec-tokens", "num_speculative_tokens"),
    ):
        value = getattr(args, option[2:].replace("-", "_"), None)
        if value is None:
            continue
        if key in config:
            problems.append(
                Problem(option, f"{option} and --speculative-config['{key}'] are mutually exclusive")
            )
        config[key] = value
    if not config and raw is None:
        return problems
    fields = {f.name: f for f in dataclasses.fields(vllm.speculative_config) if f.init}
    for key, value in {k.replace("-", "_"): v for k, v in config.items()}.items():
        if key in SPECULATIVE_FILLED_BY_VLLM or key not in fields:
            problems.append(Problem(flag, f"{key!r} is not a SpeculativeConfig field a command line can set"))
            continue
        expected = vllm.speculative_method if key == "method" else fields[key].type
        try:
            adapter = vllm.type_adapter(expected)
        except Exception:
            continue  # a type pydantic cannot check on its own; vLLM checks it at engine start
        try:
            adapter.validate_python(value)
        except vllm.validation_error as exc:
            message = "; ".join(str(e["msg"]) for e in _errors(exc))
            if key == "method":
                problems.append(Problem(flag, f"method {value!r} is not a speculative method: {message}"))
            else:
                problems.append(Problem(flag, f"{key}: {message}"))
    return problems


def _engine_commands(vllm: Vllm, args: argparse.Namespace) -> list[argparse.Namespace]:
    """The arguments of each engine the command starts: one per local rank under the DP
    supervisor (its own derivation), else the command's own."""
    if args.data_parallel_multi_port_external_lb:
        return [vllm.child_args(args, i) for i in range(args.data_parallel_size_local)]
    return [args]


def _fields_from(cls: Any, source: Any, rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The init fields of config class `cls` that `source` (EngineArgs) sets, None left to defaults."""
    out = {}
    for field in dataclasses.fields(cls):
        name = (rename or {}).get(field.name, field.name)
        if field.init and getattr(source, name, None) is not None:
            out[field.name] = getattr(source, name)
    return out


def engine_configs(vllm: Vllm, args: argparse.Namespace) -> list[Problem]:
    """CacheConfig and ParallelConfig of every engine, as vLLM builds them at engine start."""
    problems: list[Problem] = []
    try:
        commands = _engine_commands(vllm, args)
    except Exception as exc:
        return [vllm.describe(exc)]
    parallel = vllm.parallel_config
    for command in commands:
        try:
            engine = vllm.engine_args.from_cli_args(command)
        except Exception as exc:
            problems.append(vllm.describe(exc, "EngineArgs"))
            continue
        try:
            vllm.cache_config(**_fields_from(vllm.cache_config, engine, {"cache_dtype": "kv_cache_dtype"}))
        except Exception as exc:
            problems.append(vllm.describe(exc, "CacheConfig"))
        external = bool(engine.data_parallel_external_lb) or engine.data_parallel_rank is not None
        kwargs = _fields_from(parallel, engine)
        kwargs.update(
            data_parallel_rank=(engine.data_parallel_rank if external else engine.data_parallel_start_rank)
            or 0,
            data_parallel_external_lb=external,
            data_parallel_size_local=1
            if external
            else engine.data_parallel_size_local or engine.data_parallel_size,
            data_parallel_master_ip=engine.data_parallel_address or parallel.data_parallel_master_ip,
            data_parallel_rpc_port=engine.data_parallel_rpc_port or parallel.data_parallel_rpc_port,
            # Without this ParallelConfig reserves free ports on this machine; the values do not matter.
            _data_parallel_master_port_list=[parallel.data_parallel_master_port] * 5,
        )
        real = vllm.parallel_module.current_platform
        vllm.parallel_module.current_platform = _CudaLike(real)
        try:
            parallel(**kwargs)
        except Exception as exc:
            problems.append(vllm.describe(exc, "ParallelConfig"))
        finally:
            vllm.parallel_module.current_platform = real
    unique: list[Problem] = []
    for problem in problems:  # the same defect shows in every engine of the pod: report it once
        if problem not in unique:
            unique.append(problem)
    return unique


def _connectors(config: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, kv_connector_extra_config) of the connector and of every MultiConnector child."""
    if config is None or not config.kv_connector:
        return []
    found = [(str(config.kv_connector), dict(config.kv_connector_extra_config or {}))]
    pending = list(found[0][1].get("connectors") or []) if config.kv_connector == "MultiConnector" else []
    while pending:
        child = pending.pop(0)
        if isinstance(child, dict) and child.get("kv_connector"):
            extra = dict(child.get("kv_connector_extra_config") or {})
            found.append((str(child["kv_connector"]), extra))
            if child["kv_connector"] == "MultiConnector":
                pending += list(extra.get("connectors") or [])
    return found


def side_channels(vllm: Vllm, config: Any) -> tuple[ports.SideChannel, ...]:
    """The per-rank sockets of the KV connectors: each NIXL connector's handshake listener, and
    the p2p tier of each OffloadingConnector (its `port`, else the environment's default)."""
    channels = []
    for name, extra in _connectors(config):
        if name.startswith("Nixl"):
            base = int(vllm.envs.VLLM_NIXL_SIDE_CHANNEL_PORT)
            channels.append(ports.SideChannel(base, ports.NIXL_PORT_ENV, f"{name} side channel"))
        for tier in extra.get("secondary_tiers") or []:
            if isinstance(tier, dict) and tier.get("type") == "p2p":
                base = int(tier.get("port") or vllm.envs.VLLM_P2P_SIDE_CHANNEL_PORT)
                source = "--kv-transfer-config" if tier.get("port") else ports.P2P_PORT_ENV
                channels.append(ports.SideChannel(base, source, f"{name} p2p tier"))
    return tuple(channels)


def pod_launch(vllm: Vllm, args: argparse.Namespace, line: CommandLine) -> ports.PodLaunch:
    """The port-relevant facts of the pod, from the parsed arguments and its environment."""
    dp_size = int(args.data_parallel_size)
    if args.data_parallel_multi_port_external_lb:
        start, local = vllm.start_rank(args), int(args.data_parallel_size_local)
    elif args.data_parallel_rank is not None:
        start, local = int(args.data_parallel_rank), 1
    else:
        start, local = int(args.data_parallel_start_rank or 0), int(args.data_parallel_size_local or dp_size)
    events = args.kv_events_config
    endpoints: tuple[str, ...] = ()
    if events is not None and events.enable_kv_cache_events and events.publisher == "zmq":
        endpoints = tuple(e for e in (events.endpoint, events.replay_endpoint) if e)
    rpc = args.data_parallel_rpc_port
    return ports.PodLaunch(
        port=int(args.port),
        ranks=tuple(range(start, start + local)),
        multi_port=bool(args.data_parallel_multi_port_external_lb),
        supervisor_port=args.data_parallel_supervisor_port,
        dp_size=dp_size,
        dp_rpc_port=int(rpc if rpc is not None else vllm.parallel_config.data_parallel_rpc_port),
        kv_events_endpoints=endpoints,
        side_channels=side_channels(vllm, args.kv_transfer_config),
        pod_ports=line.pod_ports,
    )


def port_check(vllm: Vllm, args: argparse.Namespace, line: CommandLine) -> list[Problem]:
    launch = pod_launch(vllm, args, line)
    for endpoint in launch.kv_events_endpoints:  # the port model must agree with vLLM's code
        for rank in launch.ranks:
            ours, theirs = (
                ports.offset_endpoint_port(endpoint, rank),
                vllm.publisher.offset_endpoint_port(endpoint, rank),
            )
            if ours != theirs or ports.is_bind_endpoint(ours) != vllm.publisher._is_bind_endpoint(theirs):
                return [
                    Problem(
                        "--kv-events-config", f"port model out of date: vLLM binds {theirs}, expected {ours}"
                    )
                ]
    return ports.port_problems(ports.bindings(launch))


def check_line(vllm: Vllm, line: CommandLine) -> list[Problem]:
    """Everything wrong with one command line."""
    argv = list(line.argv)
    if argv[:2] != ["vllm", "serve"]:
        return [Problem(None, f"expected `vllm serve ...`, got {' '.join(argv[:2])!r}")]
    with environ(line.environ):
        args, problem = parse(vllm, argv[1:])
        if args is None:
            return [problem] if problem else []
        problems = duplicate_flags(vllm, argv[2:])
        try:
            vllm.validate_parsed_serve_args(args)
        except Exception as exc:
            problems.append(vllm.describe(exc))
        problems += parser_names(vllm, args)
        problems += load_format(vllm, args)
        problems += kv_connectors(vllm, args.kv_transfer_config)
        problems += speculative(vllm, args)
        problems += engine_configs(vllm, args)
        problems += port_check(vllm, args, line)
    return problems


def _drafter_quantizations(hf: Mapping[str, Any], method: str | None) -> tuple[str | None, ...]:
    """The quantizations the MTP drafter's experts (DeepSeek layout: layer `num_hidden_layers`) may
    have, from config.json's quantization_config: both when its unconverted modules are not listed."""
    if method is None:
        return (None,)
    quant = hf.get("quantization_config") or {}
    skipped = quant.get("modules_to_not_convert", quant.get("ignored_layers"))
    if skipped is None:
        return (method, None)
    module = f"model.layers.{hf['num_hidden_layers']}.mlp.experts"
    return (None,) if any(module == p or module.startswith(f"{p}.") for p in skipped) else (method,)


def moe_oracle(vllm: Vllm, backend: str, quantization: str | None) -> None:
    """Raise vLLM's own error when its MoE oracle for `quantization` (None: unquantized) refuses
    `backend`, exactly as the select functions call the map functions."""
    if quantization is None:
        oracle = importlib.import_module("vllm.model_executor.layers.fused_moe.oracle.unquantized")
        if backend not in ("auto", "humming", "marlin"):  # these fall through to auto there
            oracle.map_unquantized_backend(backend)
    elif quantization == "fp8":
        oracle = importlib.import_module("vllm.model_executor.layers.fused_moe.oracle.fp8")
        if backend != "auto":
            oracle.map_fp8_backend(backend)
    else:
        raise ValueError(f"the check calls no MoE oracle for quantization {quantization!r}")


def engine_moe(vllm: Vllm, engine: Mapping[str, Any]) -> str | None:
    """vLLM's refusal of an engine's MoE backends for the vendored model's weights, or None."""
    hf = json.loads((Path(engine["model_dir"]) / "config.json").read_text())
    method = (hf.get("quantization_config") or {}).get("quant_method")
    with environ(dict((str(k), str(v)) for k, v in engine["env"])):
        args, problem = parse(vllm, list(engine["argv"])[1:])
    if args is None:
        return f"the parser refused the command line: {problem.message if problem else '?'}"
    backend = str(getattr(args, "moe_backend", "auto") or "auto")
    try:
        moe_oracle(vllm, backend, method)
        spec = args.speculative_config
        if isinstance(spec, dict) and spec:
            drafter = str(spec.get("moe_backend") or backend)
            for quantization in _drafter_quantizations(hf, method):
                moe_oracle(vllm, drafter, quantization)
    except Exception as exc:
        return clean(str(exc)) or type(exc).__name__
    return None


def model_inspection(vllm: Vllm, model_dir: str) -> str | None:
    """Resolve a vendored model's ModelConfig as vLLM does at engine start (None when it resolves):
    the architecture from config.json with trust_remote_code off, the model class inspected."""
    config = importlib.import_module("vllm.config")
    try:
        config.ModelConfig(model=model_dir, skip_tokenizer_init=True, trust_remote_code=False)
    except Exception as exc:
        return clean(str(exc)) or type(exc).__name__
    return None


def run(jobs_path: Path, results_path: Path) -> int:
    """Check every command line of the jobs file; write one result per line. Exit 0 even with
    findings (the caller reports them); non-zero only if the check itself could not run."""
    jobs = json.loads(jobs_path.read_text())
    vllm = Vllm()
    if vllm.version != jobs["vllm_version"]:
        print(
            f"the parser environment has vLLM {vllm.version}, the version matrix pins {jobs['vllm_version']}"
        )
        return 3
    results = []
    for data in jobs["lines"]:
        line = CommandLine.from_json(data)
        try:
            problems = check_line(vllm, line)
        except Exception as exc:  # a defect of the check must fail it, never pass a line
            problems = [Problem(None, f"internal error of the check: {type(exc).__name__}: {exc}")]
        results.append([p.to_json() for p in problems])
    models = {d: model_inspection(vllm, d) for d in jobs.get("models", [])}
    moe = []
    for engine in jobs.get("engine_moe", []):
        try:
            moe.append(engine_moe(vllm, engine))
        except Exception as exc:  # a defect of the check must fail it, never pass an engine
            moe.append(f"internal error of the check: {type(exc).__name__}: {exc}")
    results_path.write_text(
        json.dumps(
            {
                "vllm_version": vllm.version,
                "results": results,
                "registry_problems": registry_problems(vllm),
                "models": models,
                "engine_moe": moe,
            }
        )
    )
    return 0


def registry_problems(vllm: Vllm) -> list[str]:
    """Where the parser names the config accepts (llmd_fleet/config/vllm_registry.py) differ from the
    registries of the vLLM installed here."""
    committed = importlib.import_module("llmd_fleet.config.vllm_registry")
    problems = []
    for name, manager, listed in (
        ("TOOL_CALL_PARSERS", vllm.tool_parsers, committed.TOOL_CALL_PARSERS),
        ("REASONING_PARSERS", vllm.reasoning_parsers, committed.REASONING_PARSERS),
    ):
        registered = set(manager.list_registered())
        if missing := sorted(registered - listed):
            problems.append(f"{name} lacks names vLLM {vllm.version} registers: {', '.join(missing)}")
        if extra := sorted(listed - registered):
            problems.append(f"{name} lists names vLLM {vllm.version} does not register: {', '.join(extra)}")
    return problems


def smoke() -> int:
    """Import vLLM and build the parser: the environment is usable."""
    vllm = Vllm()
    print(f"vLLM {vllm.version}: serve parser with {len(vllm.option_strings)} option strings")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--smoke"]:
        return smoke()
    if len(argv) != 2:
        print("usage: checker JOBS.json RESULTS.json | --smoke", file=sys.stderr)
        return 2
    return run(Path(argv[0]), Path(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
