"""A stand-in for `pulumi-language-python`, the Python language host the Pulumi CLI starts for a
`runtime: python` project and for a Python policy pack (docs/twin.md, "The quickstart walk").

The Go module proxy refuses the host's module at every version (docs/twin.md, "Modules that could
not be had"), so the CLI the twin builds has none and `pulumi up` of this project could not start.
`make quickstart-twin` puts this one first on PATH instead. It is started by the CLI as the real
host is (`pulumi-language-python [flags] <engine address>`, the port printed on stdout) and serves
the LanguageRuntime gRPC service from the Python SDK's own stubs:

- Run: the program directory's `__main__.py` (Pulumi.yaml `main: infra/`) under the SDK's runtime,
  in this process, the way the SDK's Automation API serves inline programs
  (pulumi.automation._server.LanguageServer, whose Run this reuses);
- RunPlugin: a policy pack as the real host starts one, `<python> -u -m pulumi.policy <args>
  <pack directory>` with the pack's `virtualenv` (PulumiPolicy.yaml) when it names one, its
  stdout and stderr streamed back (the CLI reads the analyzer's port from stdout);
- GetRequiredPlugins/GetRequiredPackages: none (the engine loads the provider each resource
  asks for from PULUMI_HOME, where the walk installs it).

What it does not do that the real host does: the `toolchain` and `typechecker` options of
Pulumi.yaml (no `uv sync`, no mypy run before the program), dependency installation and `pulumi
about`'s details. It is started with the checkout's `.venv` interpreter, the one the
`virtualenv: .venv` option names. It imports only the Pulumi SDK and grpc: it runs by path.
"""

import os
import queue
import runpy
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

from llmd_fleet.cli.children import popen

POLICY_MODULE = "pulumi.policy"


def engine_address(argv: Sequence[str]) -> str:
    """The engine's address: the last argument that is not a flag (the CLI puts its flags, such as
    `-root=...` or `--tracing X`, before it)."""
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:
        raise SystemExit("pulumi-language-python (stand-in): no engine address given")
    return positional[-1]


def pack_python(program_directory: str, options: Mapping[str, Any], default: str = sys.executable) -> str:
    """The interpreter of a policy pack: `<virtualenv>/bin/python` when its runtime options name a
    virtualenv (relative to the pack directory) that exists, else `default`."""
    venv = options.get("virtualenv")
    if isinstance(venv, str) and venv:
        python = (Path(program_directory) / venv / "bin" / "python").absolute()
        if python.is_file():
            return str(python)
    return default


def policy_command(python: str, args: Sequence[str], program_directory: str) -> list[str]:
    """How the Python host starts a policy pack: the SDK's policy module with the CLI's arguments
    (its engine address) and the pack's directory."""
    return [python, "-u", "-m", POLICY_MODULE, *args, program_directory]


def _env(entries: Sequence[str]) -> dict[str, str]:
    env = dict(os.environ)
    for entry in entries:
        key, _, value = entry.partition("=")
        env[key] = value
    return env


def _options(info: Any) -> dict[str, Any]:
    from google.protobuf import json_format  # type: ignore[import-untyped]

    if not info.HasField("options"):
        return {}
    options: dict[str, Any] = json_format.MessageToDict(info.options)
    return options


class StandInHost(LanguageServer):
    """The LanguageRuntime service: Automation's in-process Run for the program on disk, plus the
    plugin launch a policy pack needs."""

    def __init__(self, engine: str) -> None:
        super().__init__(self._program)
        self.engine = engine
        self.program_directory = ""

    def _program(self) -> None:
        directory = self.program_directory
        if directory not in sys.path:
            sys.path.insert(0, directory)
        runpy.run_path(directory, run_name="__main__")

    def Handshake(self, request: Any, context: Any) -> Any:
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo(version="0.0.0-stand-in")

    def Run(self, request: Any, context: Any) -> Any:
        info = request.info
        root = info.root_directory or request.pwd
        directory = info.program_directory or os.path.join(root, request.program or ".")
        entry = info.entry_point or "."
        self.program_directory = os.path.normpath(os.path.join(directory, entry))
        if request.pwd:
            os.chdir(request.pwd)
        # Automation's Run takes the engine's address from the first program argument.
        patched = language_pb2.RunRequest()
        patched.CopyFrom(request)
        del patched.args[:]
        patched.args.append(self.engine)
        return super().Run(patched, context)  # type: ignore[no-untyped-call]

    def RunPlugin(self, request: Any, context: Any) -> Iterator[Any]:
        info = request.info
        directory = info.program_directory or request.program
        command = policy_command(pack_python(directory, _options(info)), list(request.args), directory)
        # No death signal here: this runs in a gRPC server thread, and a preexec_fn (Python run
        # in the child between fork and exec) crashes the child there (SIGSEGV: gRPC skips its
        # fork handlers while other threads are inside it). The RPC's end kills the pack instead,
        # and the CLI that started this host stops the host's whole plugin tree.
        process = popen(
            command,
            cwd=request.pwd or directory,
            env=_env(list(request.env)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            preexec_fn=None,
        )
        context.add_callback(process.kill)
        chunks: queue.Queue[tuple[str, bytes]] = queue.Queue()

        def pump(name: str, stream: Any) -> None:
            for line in iter(stream.readline, b""):
                chunks.put((name, line))
            chunks.put((name, b""))

        threads = [
            threading.Thread(target=pump, args=("stdout", process.stdout), daemon=True),
            threading.Thread(target=pump, args=("stderr", process.stderr), daemon=True),
        ]
        for thread in threads:
            thread.start()
        open_streams = 2
        while open_streams:
            name, data = chunks.get()
            if not data:
                open_streams -= 1
                continue
            if name == "stdout":
                yield language_pb2.RunPluginResponse(stdout=data)
            else:
                yield language_pb2.RunPluginResponse(stderr=data)
        yield language_pb2.RunPluginResponse(exitcode=process.wait())


def main(argv: Sequence[str]) -> int:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(StandInHost(engine_address(argv)), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    # The CLI ends its plugins with a signal once it is done with them: stop without a traceback.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: server.stop(grace=None))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
