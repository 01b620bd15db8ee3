"""Build vLLM's own engine configuration for every rendered engine, offline, as an H100 would.

Runs inside the parser environment (devtools/vllm_check/env.py), in its own process:
`python -m devtools.vllm_check.engine_config JOBS.json RESULT.json`. The process imports vLLM on
its CPU platform (some modules run CUDA-only code at import on a CUDA platform: compiled-op
capability queries, Triton kernels), then presents the platform as an H100 (SM90, 8 GPUs of
80 GiB): vLLM's CUDA platform class with the device queries answered here, set as
`current_platform` in `vllm.platforms` and in every vLLM module that imported it, the way vLLM's
tests monkeypatch it. vLLM's compiled CUDA extensions (STUBBED_EXTENSIONS) cannot load without a
driver (`libcuda.so.1`); they register kernels and report which exist, so empty modules stand in
for them. No kernel runs and no GPU memory is touched. vLLM's model-info cache (VLLM_CACHE_ROOT)
comes filled from the checker process, which inspected each model class on the CPU platform.

Per engine (one `vllm serve` argv + env as the extraction renders it; the DP supervisor's first
child, whose arguments vLLM derives itself):

1. the serve parser and `EngineArgs.from_cli_args`, the model replaced by the vendored
   `config.json` directory (components/llmd_fleet/models/<family>/<model>/), the tokenizer not loaded and
   the reasoning parser left out (its token ids need the tokenizer);
2. `EngineArgs.create_engine_config()`: ModelConfig (architecture resolved with
   trust_remote_code as rendered), CacheConfig, ParallelConfig, SchedulerConfig,
   SpeculativeConfig (MTP reads the model's `num_nextn_predict_layers`), KV-transfer and
   KV-events configs, and the platform's `check_and_update_config`;
3. the attention backend vLLM's selector (`vllm.v1.attention.selector.get_attn_backend`) picks
   for the model's MLA layers with the engine's KV dtype and block size, with the reasons it gave
   for each backend it passed over.

The MoE kernel oracle for the weights' quantization runs in the checker process
(devtools/vllm_check/checker.py), where vLLM's fused-MoE package imports.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

H100_CAPABILITY = (9, 0)
H100_NAME = "NVIDIA H100 80GB HBM3"
H100_MEMORY_BYTES = 80 * 2**30
GPUS_PER_NODE = 8
# vLLM's compiled CUDA extensions (in the wheel, loadable on the pods) that cannot load without a
# driver: they register kernels and report which exist, nothing the configuration reads.
STUBBED_EXTENSIONS = (
    "vllm._C_stable_libtorch",
    "vllm.vllm_flash_attn._vllm_fa2_C",
    "vllm.vllm_flash_attn._vllm_fa3_C",
    "vllm._flashmla_C",
    "vllm._flashmla_extension_C",
)


# Modules whose import runs CUDA-only code when the platform is CUDA (compiled-op capability
# queries, Triton kernels): imported first, on the CPU platform, so that only calls see the H100.
PRELOADED = (
    "vllm.config",
    "vllm.engine.arg_utils",
    "vllm.model_executor.layers.quantization",
    "vllm.model_executor.layers.quantization.fp8",
    "vllm.model_executor.layers.fused_moe",
    "vllm.v1.attention.selector",
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.launchers.dp_supervisor",
    "vllm.v1.worker.utils",
)
# The KV connectors the rendered engines name (their modules import CUDA-only kernels when the
# platform is CUDA); VllmConfig loads each connector class it is given.
PRELOADED_CONNECTORS = ("NixlConnector", "OffloadingConnector", "MultiConnector")


def _h100_class() -> Any:
    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")
    capability = interface.DeviceCapability(*H100_CAPABILITY)

    class H100(cuda.NonNvmlCudaPlatform):  # type: ignore[misc,name-defined]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return capability

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return H100_NAME

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return H100_MEMORY_BYTES

        @classmethod
        def device_count(cls) -> int:
            return GPUS_PER_NODE

    return H100


def present_h100() -> Any:
    """Import vLLM on its CPU platform, then replace `current_platform` with the H100 in vLLM's
    platform module and in every vLLM module that imported it (as vLLM's tests monkeypatch it per
    module); returns the H100."""
    for name in STUBBED_EXTENSIONS:
        sys.modules.setdefault(name, types.ModuleType(name))
    platforms: Any = importlib.import_module("vllm.platforms")
    cpu = platforms.current_platform
    for preloaded in PRELOADED:
        importlib.import_module(preloaded)
    factory = importlib.import_module("vllm.distributed.kv_transfer.kv_connector.factory")
    for connector in PRELOADED_CONNECTORS:
        factory.KVConnectorFactory._registry[connector]()
    # Imports every quantization config (ModelConfig does the same on its first lookup).
    importlib.import_module("vllm.model_executor.layers.quantization").get_quantization_config("fp8")
    platform = _h100_class()()
    platforms.current_platform = platform
    platforms._current_platform = platform
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.") and getattr(module, "current_platform", None) is cpu:
            setattr(module, "current_platform", platform)  # noqa: B010
    return platform


# The pod's paths (caches, HOME) stay this process's: vLLM's model-info cache is shared with the
# checker process that filled it, and nothing is written under the pod's mount points here.
_KEPT = frozenset({"VLLM_CACHE_ROOT"})


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """The pod's VLLM_* variables (the ones vLLM's configuration reads) on top of this process's
    environment, restored afterwards."""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in values.items() if k.startswith("VLLM_") and k not in _KEPT})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def clean(message: str) -> str:
    """vLLM's message on one line, without pydantic's wrapping (error count, input echo, links)."""
    lines = [
        line.strip()
        for line in message.strip().splitlines()
        if line.strip() and "For further information visit" not in line
    ]
    text = " ".join(lines)
    text = re.sub(r"^\d+ validation errors? for (\w+) (?:Value error, )?", r"\1: ", text)
    return re.sub(r"\s*\[type=[^\]]*(?:\]|$).*$", "", text)


class Vllm:
    """The parts of vLLM the check calls, imported once, after the platform is presented."""

    def __init__(self) -> None:
        self.platform = present_h100()
        cli_args = importlib.import_module("vllm.entrypoints.common.cli_args")
        argparse_utils = importlib.import_module("vllm.utils.argparse_utils")
        supervisor = importlib.import_module("vllm.entrypoints.launchers.dp_supervisor")
        self.version = importlib.metadata.version("vllm")
        self.engine_args = importlib.import_module("vllm.engine.arg_utils").EngineArgs
        self.child_args = supervisor._build_vllm_dp_server_args
        config = importlib.import_module("vllm.config")
        self.set_current_vllm_config = config.set_current_vllm_config
        self.selector = importlib.import_module("vllm.v1.attention.selector")
        root = argparse_utils.FlexibleArgumentParser(prog="vllm")
        sub = root.add_subparsers(dest="subparser", required=True)
        serve = sub.add_parser("serve", usage="vllm serve [model_tag] [options]")
        cli_args.make_arg_parser(serve)
        self.parser = root

    def parse(self, argv: list[str]) -> argparse.Namespace:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                args: argparse.Namespace = self.parser.parse_args(argv)
                return args
        except SystemExit:
            text = stderr.getvalue()
            marker = text.rfind(": error: ")
            raise ValueError(text[marker + len(": error: ") :] if marker >= 0 else text) from None


def engine_config(vllm: Vllm, line: Mapping[str, Any], model_dir: str) -> dict[str, Any]:
    """Build one engine's configuration; {'refused': message} or what vLLM chose."""
    argv = list(line["argv"])
    env = {str(k): str(v) for k, v in line["env"]}
    hf = json.loads((Path(model_dir) / "config.json").read_text())
    with environ(env):
        try:
            args = vllm.parse(argv[1:])
            if args.data_parallel_multi_port_external_lb:
                args = vllm.child_args(args, 0)
            # The vendored config.json instead of the hub repository (no weights, no tokenizer).
            args.model = args.model_tag = model_dir
            args.revision = args.tokenizer = args.tokenizer_revision = None
            args.skip_tokenizer_init = True
            # The reasoning parser's token ids come from the tokenizer, which is not vendored.
            args.reasoning_parser = None
            engine = vllm.engine_args.from_cli_args(args)
            config = engine.create_engine_config()
        except Exception as exc:
            return {"refused": clean(str(exc)) or type(exc).__name__, "stage": "create_engine_config"}
        model = config.model_config
        chosen: dict[str, Any] = {
            "architecture": model.architectures[0],
            "block_size": config.cache_config.block_size,
            "kv_cache_dtype": str(config.cache_config.cache_dtype),
            "moe_backend": config.kernel_config.moe_backend,
            "data_parallel": config.parallel_config.data_parallel_size,
            "expert_parallel": bool(config.parallel_config.enable_expert_parallel),
            "speculative": None,
            "kv_transfer": getattr(config.kv_transfer_config, "kv_connector", None),
            "kv_events": bool(config.kv_events_config and config.kv_events_config.enable_kv_cache_events),
        }
        passed_over: dict[str, list[str]] = {}
        platform_cls = type(vllm.platform)  # the H100 class: it inherits get_valid_backends
        real = platform_cls.get_valid_backends

        def recording(cls: Any, *args: Any, **kwargs: Any) -> Any:
            valid, invalid = real(*args, **kwargs)
            passed_over.update({b.name: list(reasons) for b, (_, reasons) in invalid.items()})
            return valid, invalid

        platform_cls.get_valid_backends = classmethod(recording)
        try:
            with vllm.set_current_vllm_config(config):
                backend = vllm.selector.get_attn_backend(
                    head_size=model.get_head_size(),
                    dtype=model.dtype,
                    kv_cache_dtype=config.cache_config.cache_dtype,
                    use_mla=model.use_mla,
                    use_sparse=bool(hf.get("index_topk")),
                )
            chosen["attention_backend"] = backend.get_name()
            chosen["attention_passed_over"] = passed_over
        except Exception as exc:
            return {"refused": clean(str(exc)) or type(exc).__name__, "stage": "get_attn_backend"}
        finally:
            del platform_cls.get_valid_backends
        spec = config.speculative_config
        if spec is not None:
            chosen["speculative"] = f"{spec.method} x{spec.num_speculative_tokens}"
            chosen["drafter_moe_backend"] = spec.moe_backend or config.kernel_config.moe_backend
    return {"accepted": chosen}


def run(jobs_path: Path, results_path: Path) -> int:
    jobs = json.loads(jobs_path.read_text())
    vllm = Vllm()
    if vllm.version != jobs["vllm_version"]:
        print(f"the environment has vLLM {vllm.version}, the version matrix pins {jobs['vllm_version']}")
        return 3
    results = []
    for job in jobs["engines"]:
        try:
            results.append(engine_config(vllm, job["line"], job["model_dir"]))
        except Exception as exc:  # a defect of the check fails it, never passes an engine
            results.append({"error": f"internal error of the check: {type(exc).__name__}: {exc}"})
    results_path.write_text(json.dumps({"vllm_version": vllm.version, "results": results}))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: engine_config JOBS.json RESULTS.json", file=sys.stderr)
        return 2
    return run(Path(argv[0]), Path(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
