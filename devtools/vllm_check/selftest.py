"""Deliberately broken command lines the check must reject, each for a stated reason.

They are derived from a real rendered command line (worker 0 of the first stack, which hosts
global DP rank 0), changed in one place each, and checked in the same checker run as the shipped
stacks. If any of them is accepted, or rejected for another reason, the check itself is broken and
`make check-vllm` fails: a check that cannot see these defects proves nothing about the stacks.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from devtools.vllm_check.lines import CommandLine, Finding, Origin
from devtools.vllm_check.ports import NIXL_PORT_ENV

SELF_TEST_STACK = "self-test"


@dataclass(frozen=True)
class BrokenLine:
    """A broken command line and the rejection it must get: a finding that blames `flag` and
    whose message contains `reason`."""

    name: str
    line: CommandLine
    flag: str
    reason: str

    def matched_by(self, finding: Finding) -> bool:
        return finding.problem.flag == self.flag and self.reason in finding.problem.message


def flag_value(argv: tuple[str, ...], flag: str) -> str | None:
    """The value of `--flag VALUE` or `--flag=VALUE` (the last one, as argparse keeps it)."""
    value = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def with_flag(argv: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """argv with `flag` set to `value`: every occurrence replaced, or appended when absent."""
    out: list[str] = []
    found, i = False, 0
    while i < len(argv):
        word = argv[i]
        if word == flag and i + 1 < len(argv):
            out += [flag, value]
            found, i = True, i + 2
            continue
        if word.startswith(flag + "="):
            out.append(f"{flag}={value}")
            found = True
        else:
            out.append(word)
        i += 1
    return tuple(out) if found else (*out, flag, value)


def _json_flag(argv: tuple[str, ...], flag: str) -> dict[str, Any]:
    value = flag_value(argv, flag)
    return dict(json.loads(value)) if value else {}


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def _nixl_connector(transfer: dict[str, Any]) -> dict[str, Any]:
    """The NIXL connector of a KV transfer config: itself, a MultiConnector child, or a default."""
    children = (transfer.get("kv_connector_extra_config") or {}).get("connectors") or []
    for candidate in (transfer, *children):
        if isinstance(candidate, dict) and str(candidate.get("kv_connector", "")).startswith("Nixl"):
            return dict(candidate)
    return {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def broken_lines(base: CommandLine) -> list[BrokenLine]:
    """One broken variant of `base` per defect class the check exists to catch."""
    argv = base.argv
    nixl = _nixl_connector(_json_flag(argv, "--kv-transfer-config"))
    nixl_port = int(base.environ.get(NIXL_PORT_ENV, "5600"))
    speculative = _json_flag(argv, "--speculative-config") or {"method": "mtp", "num_speculative_tokens": 1}
    port = int(flag_value(argv, "--port") or 8000)
    rpc_port = int(flag_value(argv, "--data-parallel-rpc-port") or 29550)
    events = _json_flag(argv, "--kv-events-config") or {"enable_kv_cache_events": True, "publisher": "zmq"}

    def multi(second: dict[str, Any]) -> str:
        connectors = [nixl, {"kv_role": "kv_both", **second}]
        config = {"kv_connector": "MultiConnector", "kv_role": "kv_both"}
        return _compact({**config, "kv_connector_extra_config": {"connectors": connectors}})

    p2p_on_nixl = {
        "kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec",
            "cpu_bytes_to_use": 1 << 30,
            "secondary_tiers": [{"type": "p2p", "port": nixl_port}],
        },
    }
    cases = [
        ("unknown flag", (*argv, "--no-such-flag", "1"), "--no-such-flag", "unrecognized arguments"),
        (
            "bad connector name",
            with_flag(argv, "--kv-transfer-config", _compact({**nixl, "kv_connector": "NixlConector"})),
            "--kv-transfer-config",
            "'NixlConector' is not a registered KV connector",
        ),
        (
            "bad connector name nested in MultiConnector",
            with_flag(argv, "--kv-transfer-config", multi({"kv_connector": "OffloadConnector"})),
            "--kv-transfer-config",
            "connectors[1]: kv_connector 'OffloadConnector' is not a registered KV connector",
        ),
        (
            "bad all2all backend",
            with_flag(argv, "--all2all-backend", "deepep_turbo"),
            "--all2all-backend",
            "invalid choice: 'deepep_turbo'",
        ),
        (
            "bad tool-call parser",
            with_flag(argv, "--tool-call-parser", "glm5x"),
            "--tool-call-parser",
            "'glm5x' is not a registered tool-call parser",
        ),
        (
            "bad reasoning parser",
            with_flag(argv, "--reasoning-parser", "glm5x"),
            "--reasoning-parser",
            "'glm5x' is not a registered reasoning parser",
        ),
        (
            "bad speculative method",
            with_flag(argv, "--speculative-config", _compact({**speculative, "method": "mtp3"})),
            "--speculative-config",
            "method 'mtp3' is not a speculative method",
        ),
        (
            "unknown speculative key",
            with_flag(argv, "--speculative-config", _compact({**speculative, "num_spec_tokens": 3})),
            "--speculative-config",
            "'num_spec_tokens' is not a SpeculativeConfig field",
        ),
        (
            "GPU memory utilization above 1",
            with_flag(argv, "--gpu-memory-utilization", "1.5"),
            "--gpu-memory-utilization",
            "less than or equal to 1",
        ),
        (
            "supervisor port inside the rank ports",
            with_flag(argv, "--data-parallel-supervisor-port", str(port + 1)),
            "--data-parallel-supervisor-port",
            "overlaps with child rank ports",
        ),
        (
            "DP handshake port on a rank's API port",
            with_flag(argv, "--data-parallel-rpc-port", str(port + 1)),
            "--data-parallel-rpc-port",
            f"port {port + 1} is bound twice on the pod",
        ),
        (
            "KV-events port of global rank 1 on the DP handshake port",
            with_flag(
                argv, "--kv-events-config", _compact({**events, "endpoint": f"tcp://*:{rpc_port - 1}"})
            ),
            "--kv-events-config",
            f"port {rpc_port} is bound twice on the pod",
        ),
        (
            "p2p KV tier on the NIXL side channel",
            with_flag(argv, "--kv-transfer-config", multi(p2p_on_nixl)),
            "--kv-transfer-config",
            f"port {nixl_port} is bound twice on the pod",
        ),
        (
            "flag given twice",
            (*argv, "--block-size", "32"),
            "--block-size",
            "given 2 times",
        ),
        (
            # The older ModelExpress reading's source-side format; vLLM registers no such loader.
            "unregistered load format",
            (*argv, "--load-format", "mx-source"),
            "--load-format",
            "is not a registered load format",
        ),
    ]
    out = [
        BrokenLine(name, replace(base, origin=_origin(base, name), argv=broken), flag, reason)
        for name, broken, flag, reason in cases
    ]
    nixl_on_api = "NIXL side channel on the API port"
    env = {**base.environ, NIXL_PORT_ENV: str(port)}
    out.append(
        BrokenLine(
            nixl_on_api,
            replace(base, origin=_origin(base, nixl_on_api), env=tuple(sorted(env.items()))),
            NIXL_PORT_ENV,
            f"port {port} is bound twice on the pod",
        )
    )
    return out


def _origin(base: CommandLine, case: str) -> Origin:
    return Origin(SELF_TEST_STACK, case, base.origin.container, base.origin.worker)


def self_test_base(lines: Iterable[CommandLine]) -> CommandLine | None:
    """The first command line of a worker 0 (it hosts global DP rank 0 and its handshake port)."""
    return next((line for line in lines if line.origin.worker == 0), None)


def verdicts(
    cases: Iterable[BrokenLine], findings: Iterable[Finding]
) -> list[tuple[BrokenLine, Finding | None]]:
    """Each case with the finding that rejects it for the stated reason (None: not rejected so)."""
    by_origin: dict[Origin, list[Finding]] = {}
    for finding in findings:
        by_origin.setdefault(finding.origin, []).append(finding)
    return [
        (case, next((f for f in by_origin.get(case.line.origin, []) if case.matched_by(f)), None))
        for case in cases
    ]
