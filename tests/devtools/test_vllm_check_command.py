"""The vLLM argument check's command, without vLLM: a check that did not see the defects never
passes, and the engine-configuration check (devtools/vllm_check/engines.py) with its controls and
the vendored model configs. Both vLLM processes are stand-ins here; `make check-vllm` runs them.
"""

from typing import Any

from devtools.vllm_check import cli, env
from devtools.vllm_check.lines import Finding, Problem
from devtools.vllm_check.selftest import (
    broken_lines,
    flag_value,
    self_test_base,
)
from tests.support import REFERENCE_STACK, REPO, vllm_stacks

# --- The command: a check that did not see the defects never passes ------------------------------


def _accept_engines(python, version, jobs):
    """A stand-in engine-configuration check: every engine accepted, every control refused for
    its reason."""
    return [
        *({"accepted": {"attention_backend": "X"}} for _ in jobs.engines),
        *({"refused": f"vLLM says: {control.expect}"} for control in jobs.controls),
    ]


def _fake_check(monkeypatch, tmp_path, answer, engine_config=_accept_engines, moe=None) -> None:
    """Replace both vLLM processes: `answer(python, version, lines)` gives the argument check's
    findings, `engine_config` the configuration results and `moe(jobs)` the MoE oracle's."""
    monkeypatch.setattr(env, "ensure", lambda version=None: tmp_path / "venv" / "bin" / "python")

    def checker(python, version, lines, jobs=None):
        jobs = jobs or cli.EngineJobs()
        refusals = moe(jobs) if moe is not None else [None] * len(jobs.all)
        return answer(python, version, lines), refusals, {d: None for d in jobs.models()}

    monkeypatch.setattr(cli, "run_checker", checker)
    monkeypatch.setattr(cli, "run_engine_config", engine_config)


def test_check_fails_when_the_self_test_is_accepted(reference_manifests, monkeypatch, tmp_path, capsys):
    _fake_check(monkeypatch, tmp_path, lambda python, version, lines: [])
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert "FAILED  unknown flag: expected --no-such-flag 'unrecognized arguments', got: accepted" in out
    assert "were not rejected for their reason" in out


def _reject_self_test(python, version, lines):
    """A stand-in checker that rejects exactly the self-test's broken lines as vLLM would."""
    base = self_test_base(lines)
    assert base is not None
    cases = {case.line.origin: case for case in broken_lines(base)}
    return [
        Finding(line.origin, Problem(cases[line.origin].flag, cases[line.origin].reason))
        for line in lines
        if line.origin in cases
    ]


def test_check_passes_only_clean_stacks(reference_manifests, reference_lines, monkeypatch, tmp_path, capsys):
    build_dir = reference_manifests.parent.parent
    _fake_check(monkeypatch, tmp_path, _reject_self_test)
    assert cli.check([REFERENCE_STACK], build_dir) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out and "no findings" in out
    assert f"{REFERENCE_STACK}: {len(reference_lines)} command lines" in out

    def one_finding(python, version, lines):
        return [
            *_reject_self_test(python, version, lines),
            Finding(lines[1].origin, Problem("--port", "bad")),
        ]

    _fake_check(monkeypatch, tmp_path, one_finding)
    assert cli.check([REFERENCE_STACK], build_dir) == 1
    assert f"FINDING {reference_lines[1].origin}: --port: bad" in capsys.readouterr().out


def test_check_fails_when_the_checker_cannot_run(reference_manifests, monkeypatch, tmp_path, capsys):
    def broken(python, version, lines):
        raise cli.CheckerError("the checker failed (exit 1)")

    _fake_check(monkeypatch, tmp_path, broken)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    assert "error: the checker failed" in capsys.readouterr().out


def test_check_fails_when_the_committed_parser_names_differ_from_vllms(
    reference_manifests, monkeypatch, tmp_path, capsys
):
    def answer(python, version, lines):
        stale = Finding(
            cli.REGISTRY_ORIGIN, Problem(None, "TOOL_CALL_PARSERS lacks names vLLM registers: new1")
        )
        return [stale, *_reject_self_test(python, version, lines)]

    _fake_check(monkeypatch, tmp_path, answer)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        "differ from vLLM" in out
        and "FINDING llmd_fleet/config/vllm_registry.py: (command line): TOOL_CALL_PARSERS" in out
    )


# --- The engine-configuration check (devtools/vllm_check/engines.py) -----------------------------


def test_every_engine_line_is_printed_and_a_refused_engine_fails(
    reference_manifests, reference_lines, monkeypatch, tmp_path, capsys
):
    build_dir = reference_manifests.parent.parent
    _fake_check(monkeypatch, tmp_path, _reject_self_test)
    assert cli.check([REFERENCE_STACK], build_dir) == 0
    out = capsys.readouterr().out.splitlines()
    n = len(reference_lines)
    assert (
        f"engine config: {REFERENCE_STACK}: {n} of {n} engines accepted by vLLM {env.vllm_version()}'s "
        "configuration "
        "(config.json partly rebuilt: quantization_config)"
    ) in out
    controls = [line for line in out if line.startswith("engine config (negative control): ")]
    assert len(controls) == 6 and all(": refused: vLLM says: " in line for line in controls)
    assert any(line.startswith("engine config (not checked): ") for line in out)

    def refuse_decode(python, version, jobs):
        results = _accept_engines(python, version, jobs)
        results[-len(jobs.controls) - 1] = {"refused": "ParallelConfig: no"}
        return results

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=refuse_decode)
    assert cli.check([REFERENCE_STACK], build_dir) == 1
    out = capsys.readouterr().out
    assert f"engine config: {REFERENCE_STACK}: {n - 1} of {n} engines accepted" in out
    assert f"FINDING {reference_lines[-1].origin}: engine config: ParallelConfig: no" in out


def test_the_moe_oracle_refuses_an_engine_the_configuration_accepts(
    reference_manifests, reference_lines, monkeypatch, tmp_path, capsys
):
    def moe(jobs):
        return ["moe_backend='deep_gemm' is not supported for unquantized MoE."] + [None] * (
            len(jobs.all) - 1
        )

    _fake_check(monkeypatch, tmp_path, _reject_self_test, moe=moe)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        f"FINDING {reference_lines[0].origin}: engine config: moe_backend='deep_gemm' is not supported "
        "for unquantized MoE." in out
    )


def test_a_control_vllm_accepts_or_refuses_for_another_reason_fails(
    reference_manifests, monkeypatch, tmp_path, capsys
):
    def accept_all(python, version, jobs):
        return [{"accepted": {}} for _ in jobs.all]

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=accept_all)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    out = capsys.readouterr().out
    assert (
        "engine config (negative control): MTP on a model without next-token layers: ACCEPTED, expected a "
        "refusal containing \"Unsupported speculative method: 'mtp'\"" in out
    )

    def other_reason(python, version, jobs):
        return [{"accepted": {}} for _ in jobs.engines] + [
            {"refused": "something else"} for _ in jobs.controls
        ]

    _fake_check(monkeypatch, tmp_path, _reject_self_test, engine_config=other_reason)
    assert cli.check([REFERENCE_STACK], reference_manifests.parent.parent) == 1
    assert "refused: something else (FAILED: expected a refusal containing" in capsys.readouterr().out


def test_negative_controls_change_one_thing_each(reference_lines):
    from devtools.vllm_check.engines import BF16_MODEL, FP8_MODEL, negative_controls, with_flag

    base = reference_lines[0]
    assert with_flag(("vllm", "serve", "m", "--a", "1", "--b"), "--a", "2") == (
        "vllm",
        "serve",
        "m",
        "--b",
        "--a",
        "2",
    )
    assert with_flag(("vllm", "serve", "m", "--b", "--a", "1"), "--b", None) == (
        "vllm",
        "serve",
        "m",
        "--a",
        "1",
    )
    controls = negative_controls(base)
    assert len({c.case for c in controls}) == len(controls) == 6
    by_case = {c.case: c for c in controls}
    deep_gemm = by_case["deep_gemm on bf16 weights"].engine.line.argv
    assert deep_gemm[2] == BF16_MODEL and flag_value(deep_gemm, "--moe-backend") == "deep_gemm"
    assert "--speculative-config" not in deep_gemm
    block = by_case["a block size FlashMLA refuses"].engine.line.argv
    assert block[2] == FP8_MODEL and flag_value(block, "--block-size") == "16"
    spares = by_case["redundant experts without expert-parallel load balancing"].engine.line.argv
    assert (
        "--enable-eplb" not in spares
        and flag_value(spares, "--eplb-config") == '{"num_redundant_experts":32}'
    )
    for control in controls:
        assert control.engine.line.argv[3:] != base.argv[3:]
        assert control.engine.model_dir.endswith(("deepseek-v2-lite-chat", "glm-5.2-fp8"))


def test_pydantic_wrapping_is_stripped_from_vllms_message():
    from devtools.vllm_check.engine_config import clean

    message = (
        "1 validation error for ParallelConfig\n  Value error, World size (16) is larger than the number of "
        "available GPUs (8) in this node. [type=value_error, input_value=ArgsKwargs((), {}), "
        "input_type=ArgsKwargs]\n    For further information visit https://errors.pydantic.dev/2.14/v/value_error"
    )
    assert clean(message) == (
        "ParallelConfig: World size (16) is larger than the number of available GPUs (8) in this node."
    )


def test_the_drafter_may_be_unquantized_unless_the_config_lists_it():
    from devtools.vllm_check.checker import _drafter_quantizations

    hf: dict[str, Any] = {"num_hidden_layers": 78, "quantization_config": {"quant_method": "fp8"}}
    assert _drafter_quantizations(hf, "fp8") == ("fp8", None)
    assert _drafter_quantizations({**hf, "quantization_config": {"modules_to_not_convert": []}}, "fp8") == (
        "fp8",
    )
    skipped = {"modules_to_not_convert": ["model.layers.78"]}
    assert _drafter_quantizations({**hf, "quantization_config": skipped}, "fp8") == (None,)
    assert _drafter_quantizations(hf, None) == (None,)


def test_vendored_configs_agree_with_the_model_cards_and_name_every_source():
    from dataclasses import fields

    from llmd_fleet.models import FOLDERS, ModelDescription, description_for, vendored_config

    card_keys = {f.name for f in fields(ModelDescription)}
    for model_id in FOLDERS:
        vendored = vendored_config(model_id)
        card = description_for(model_id)
        assert vendored is not None and card is not None
        config = vendored.config
        source = vendored.source
        assert source["model"] == model_id and source["path"] == "config.json"
        assert set(config) == set(source["fields"]) | set(source["rebuilt"]), model_id
        # Read at a commit, read from a copy at a commit (mirror), or rebuilt key by key.
        mirror = source.get("mirror") or {}
        assert (
            source["commit"] is not None
            or (source["read"] is True and mirror.get("commit") and not source["rebuilt"])
            or (source["read"] is False and source["rebuilt"])
        ), model_id
        for key in card_keys & set(config):
            assert config[key] == getattr(card, key), (model_id, key)
        quantization = config.get("quantization_config") or {}
        assert quantization.get("quant_method") == card.quantization.method
        if card.quantization.weight_block_size is not None:
            assert tuple(quantization["weight_block_size"]) == card.quantization.weight_block_size
        assert ("modules_to_not_convert" in quantization) == (
            card.quantization.not_converted not in (None, ())
        )
        assert config.get("num_nextn_predict_layers", 0) == card.num_nextn_predict_layers


def test_every_card_is_vendored_or_says_why_not():
    from llmd_fleet.models import CARDS as DESCRIPTIONS
    from llmd_fleet.models import FOLDERS, NOT_VENDORED

    assert set(DESCRIPTIONS) == set(FOLDERS) | set(NOT_VENDORED)
    assert not set(FOLDERS) & set(NOT_VENDORED)
    assert all(reason for reason in NOT_VENDORED.values())


def test_every_shipped_vllm_stack_serves_a_vendored_model():
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config
    from llmd_fleet.models import vendored_config

    for stack in vllm_stacks():
        config = stack_config(read_stack_file(REPO / "stacks", stack))
        assert vendored_config(config.model.id) is not None, stack


def test_cards_no_stack_serves_are_resolved_or_listed_as_not_checked():
    dirs = cli.vendored_dirs()
    v3 = dirs["deepseek-ai/DeepSeek-V3"]
    lines = cli.card_lines({"zai-org/GLM-5.2-FP8"}, {d: None for d in dirs.values()}, "1.2.3")
    assert (
        "engine config: model deepseek-ai/DeepSeek-V3: vLLM 1.2.3's ModelConfig resolves its vendored "
        "config.json; no checked stack serves it, so no engine is built"
    ) in lines
    assert not any("GLM-5.2-FP8" in line for line in lines)  # served: its engines are the check
    assert any(
        line.startswith("engine config (not checked): model deepseek-ai/DeepSeek-R1: ") for line in lines
    )
    assert any(
        line.startswith("engine config (not checked): model moonshotai/Kimi-K2-Instruct: ") for line in lines
    )
    refused = cli.card_lines(set(), {v3: "ModelConfig: no"}, "1.2.3")
    assert not any("model deepseek-ai/DeepSeek-V3:" in line for line in refused)  # a FINDING instead
    assert v3 in cli.EngineJobs().models()
