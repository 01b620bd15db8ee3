"""Command lines of the fleet's containers: `vllm serve` (exec form or inside a `bash -c` launch
script), the routing sidecar's and the endpoint picker's flags, and vLLM's KV connector JSON.

A launch script ends with `exec vllm serve MODEL \\` and one `--flag [value]` per line; words may
hold `${VAR}` references that the script or the pod's env defines. Values that stay symbolic read
as None: rules skip what they cannot know rather than guess.
"""

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from llmd_fleet.policies.rules._k8s import Container, env_literal

# vLLM's short aliases for the flags the rules read (FlexibleArgumentParser also takes _ for -).
_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpr": "--data-parallel-start-rank",
    "-dpp": "--data-parallel-rpc-port",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-dph": "--data-parallel-hybrid-lb",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
}
# Connectors that only move KV between a rank and host memory or storage (not between P and D).
OFFLOAD_CONNECTORS = frozenset({"OffloadingConnector", "SimpleCPUOffloadConnector"})


def _normalize(flag: str) -> str:
    if flag in _ALIASES:
        return _ALIASES[flag]
    return "--" + flag.lstrip("-").replace("_", "-") if flag.startswith("--") else flag


def parse_flags(words: list[str]) -> tuple[list[str], dict[str, list[str | None]]]:
    """Positional words and flags (`--f v`, `--f=v`, or a bare switch) of an argv tail."""
    positional: list[str] = []
    flags: dict[str, list[str | None]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", word):
            name, eq, value = word.partition("=")
            if eq:
                flags.setdefault(_normalize(name), []).append(value)
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                flags.setdefault(_normalize(name), []).append(words[i + 1])
                i += 1
            else:
                flags.setdefault(_normalize(name), []).append(None)
        else:
            positional.append(word)
        i += 1
    return positional, flags


@dataclass(frozen=True)
class Flags:
    """Flags of one container plus what resolves its `${VAR}` references."""

    flags: dict[str, list[str | None]]
    positional: tuple[str, ...] = ()
    script: str = ""
    env: tuple[tuple[str, str], ...] = ()

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def raw(self, flag: str) -> str | None:
        values = self.flags.get(flag)
        return values[-1] if values else None

    def resolve(self, word: str | None) -> str | None:
        """A word with `${VAR}`, `$VAR` (shell) and `$(VAR)` (kubelet) references replaced by
        literal env values or plain script assignments (`VAR=8`); None when something stays
        symbolic."""
        if word is None:
            return None
        env = dict(self.env)

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2) or match.group(3)
            if name in env:
                return env[name]
            assigned = self.assignment(name)
            if assigned is not None and re.fullmatch(r"[\w./:-]*", assigned):
                return assigned
            raise LookupError(name)

        try:
            return re.sub(r"\$\{(\w+)\}|\$\((\w+)\)|\$(\w+)", lookup, word)
        except LookupError:
            return None

    def value(self, flag: str) -> str | None:
        return self.resolve(self.raw(flag))

    def int_value(self, flag: str) -> int | None:
        value = self.value(flag)
        return int(value) if value is not None and re.fullmatch(r"\d+", value) else None

    def bool_value(self, flag: str) -> bool | None:
        """True for a bare switch or a true-ish value, False for a false-ish one, None if unset."""
        if flag not in self.flags:
            return None
        value = self.raw(flag)
        return value is None or value.strip().lower() not in ("false", "0", "no")

    def json_value(self, flag: str) -> dict[str, Any] | None:
        value = self.raw(flag)
        if value is None:
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def assignment(self, variable: str) -> str | None:
        """Right-hand side of `VAR=...` (or `export VAR=...`) in the launch script."""
        match = re.search(rf"^\s*(?:export\s+)?{re.escape(variable)}=(.+?)\s*$", self.script, re.MULTILINE)
        return match.group(1) if match else None


def _container_env(spec: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for env in spec.get("env") or []:
        name = env.get("name") if isinstance(env, dict) else None
        if isinstance(name, str):
            value = env_literal(spec, name)
            if value is not None:
                pairs.append((name, value))
    return tuple(pairs)


def _script_command(script: str) -> list[str] | None:
    """The `vllm serve ...` words of a bash script (continuation lines joined)."""
    joined = re.sub(r"\\\n", " ", script)
    for line in joined.splitlines():
        if re.search(r"(^|[\s;&|])vllm\s+serve(\s|$)", line):
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                return None
            for i in range(len(words) - 1):
                if words[i].endswith("vllm") and words[i + 1] == "serve":
                    return words[i:]
    return None


@dataclass(frozen=True)
class ServeArgs(Flags):
    """`vllm serve` of one container."""

    container_name: str = ""

    @property
    def model(self) -> str | None:
        return self.positional[0] if self.positional else None


def serve_args(c: Container) -> ServeArgs | None:
    """The `vllm serve` command of a container, or None when it does not run one."""
    spec = c.spec
    argv = [str(w) for w in (spec.get("command") or []) + (spec.get("args") or [])]
    words: list[str] | None = None
    script = ""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("bash", "sh") and argv[1] in ("-c", "-ec", "-lc"):
        script = argv[2]
        words = _script_command(script)
    elif len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "vllm" and argv[1] == "serve":
        words = argv
    if not words:
        return None
    positional, flags = parse_flags(words[2:])
    return ServeArgs(
        flags=flags,
        positional=tuple(positional),
        script=script,
        env=_container_env(spec),
        container_name=c.name,
    )


def container_flags(c: Container) -> Flags:
    """Flags of a non-vLLM container (command + args), e.g. the sidecar or the endpoint picker."""
    argv = [str(w) for w in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
    positional, flags = parse_flags(argv)
    return Flags(flags=flags, positional=tuple(positional), env=_container_env(c.spec))


@dataclass(frozen=True)
class Connector:
    """One KV connector of `--kv-transfer-config` (MultiConnector children flattened)."""

    name: str
    role: str | None
    config: dict[str, Any]


def kv_connectors(args: ServeArgs) -> list[Connector]:
    config = args.json_value("--kv-transfer-config")
    if config is None:
        return []
    found: list[Connector] = []

    def walk(cfg: dict[str, Any]) -> None:
        name = str(cfg.get("kv_connector") or "")
        extra = cfg.get("kv_connector_extra_config") or {}
        if name == "MultiConnector" and isinstance(extra.get("connectors"), list):
            for child in extra["connectors"]:
                if isinstance(child, dict):
                    walk(child)
        elif name:
            found.append(Connector(name, cfg.get("kv_role"), cfg))

    walk(config)
    return found


def pd_connectors(args: ServeArgs) -> list[Connector]:
    """The connectors that move KV between prefill and decode (offload-only ones left out)."""
    return [c for c in kv_connectors(args) if c.name not in OFFLOAD_CONNECTORS]


def data_parallel_local(args: ServeArgs, group_size: int) -> int | None:
    """Engines (DP ranks) one pod runs."""
    local = args.int_value("--data-parallel-size-local")
    if local is not None:
        return local
    dp = args.int_value("--data-parallel-size")
    if group_size == 1:
        return dp if dp is not None else 1
    return None


def engine_ports(args: ServeArgs, group_size: int) -> list[int] | None:
    """API ports of a pod's vLLM: one per local DP rank with multi-port external load balancing."""
    port = args.int_value("--port")
    port = 8000 if port is None and not args.has("--port") else port
    if port is None:
        return None
    if args.has("--data-parallel-multi-port-external-lb"):
        local = data_parallel_local(args, group_size)
        if local is None:
            return None
        return [port + i for i in range(local)]
    return [port]


@dataclass(frozen=True)
class KvEvents:
    """Where and under which topic a pod's vLLM publishes KV-cache events."""

    base_port: int | None
    """Port of the pod's first local rank (rank i publishes on base + i); None if unknown."""
    shifts_with_rank: bool
    """True when the port is a constant, so vLLM's global-rank offset moves it from pod to pod."""
    topic: str
    endpoint: str


def kv_events(args: ServeArgs, multi_pod: bool) -> KvEvents | None:
    """KV events of a vLLM command (None when it publishes none)."""
    config = args.json_value("--kv-events-config")
    if not config or not config.get("enable_kv_cache_events") or config.get("publisher", "null") == "null":
        return None
    endpoint = str(config.get("endpoint") or "tcp://*:5557")
    topic = str(config.get("topic") or "")
    port_text = endpoint.rsplit(":", 1)[-1]
    base: int | None = None
    shifts = False
    if re.fullmatch(r"\d+", port_text):
        base, shifts = int(port_text), multi_pod
    else:
        ref = re.fullmatch(r"\$\{?(\w+)\}?", port_text)
        if ref:
            assigned = args.assignment(ref.group(1)) or dict(args.env).get(ref.group(1)) or ""
            compensated = re.fullmatch(r"\$\(\(\s*(\d+)\s*-\s*\$?\{?START_RANK\}?\s*\)\)", assigned)
            if compensated:
                base = int(compensated.group(1))
            elif re.fullmatch(r"\d+", assigned):
                base, shifts = int(assigned), multi_pod
    return KvEvents(base, shifts, topic, endpoint)
