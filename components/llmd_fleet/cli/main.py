"""`llmd-fleet`: render, check and plan stacks offline.

STACK is a stack name (stacks/Pulumi.STACK.yaml; Pulumi's stack-name rule) or the path of an
existing .yaml stack file.

    llmd-fleet plan STACK [--json]                  print the fleet plan (100 columns), or as JSON
    llmd-fleet render STACK [--out DIR]             synthesize under mocks into build/STACK/
    llmd-fleet check STACK [--crd-dir DIR]... [--policy-config FILE] [--for-deploy] [--verbose]
                                                    render, validate every manifest, run the policy pack;
                                                    the last line: check STACK: ok|FAILED: ...
    llmd-fleet bench STACK [--out DIR] [--stages N,N...] [--gateway-address IP] [--prometheus-url URL]
                                                    render the agentic benchmark Job into
                                                    build/bench/STACK/ and check it (docs/benchmark.md)
    llmd-fleet bench-summary DIR|LOG|-              summarize a benchmark run's reports
    llmd-fleet status STACK [--kubeconfig FILE] [--request] [--url URL] [--watch] [--timeout S]
                                                    read the deployed fleet: groups ready per role,
                                                    EPP leader, pool endpoints, preflight result;
                                                    exit 0 when every group is ready
    llmd-fleet doctor STACK [--deployed] [--json] [--kubeconfig FILE] [--context NAME]
                                                    check the cluster for what the stack relies on
                                                    (before pulumi up; --deployed: after it); the last
                                                    line: doctor: STACK: N checks, F failed
    llmd-fleet policy-pack-path                     print the directory of the policy pack the
                                                    package ships (for pulumi --policy-pack)

Exit codes (docs/bad-input.md): 0 fine, 1 a check failed (the rendered output, doctor's cluster
checks, a fleet not ready), the environment failed (an unreachable cluster, a full disk, a missing
tool) or the command was interrupted (SIGINT, SIGTERM, SIGHUP), 2 bad input (the stack file, flags,
a kubeconfig's shape).
"""

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmd_fleet.cli import arguments
from llmd_fleet.cli.outdir import OutputDirError, ensure_replaceable
from llmd_fleet.cli.stack_file import StackArgumentError
from llmd_fleet.config.model import client_model_name
from llmd_fleet.core.problems import ConfigError, printable
from llmd_fleet.plan.fleet import PlanError
from llmd_fleet.stack.plans import plan_models
from llmd_fleet.targets.extras import MissingExtraError, require_image_build_extra, require_target_extra
from llmd_fleet.targets.specs import SPECS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from llmd_fleet.cli.check import CrdSchemas
    from llmd_fleet.cli.policy_check import PolicyPackProcess
    from llmd_fleet.cli.stack_file import StackFile
    from llmd_fleet.cli.synth import Synthesis
    from llmd_fleet.plan.fleet import FleetPlan
    from llmd_fleet.stack.model import StackConfig

EXIT_OK, EXIT_INVALID_OUTPUT, EXIT_BAD_INPUT = 0, 1, 2


class InputRefused(Exception):
    """An input other than the stack file refused before anything is written (one line)."""


def _error(exc: Exception) -> None:
    """Print a refusal to stderr: a ConfigError's lines are escaped already (one per problem);
    any other message is one line, its control characters escaped (a path or value it quotes
    cannot forge output lines)."""
    if isinstance(exc, PlanError):
        # One escaped line per problem under the error's own first line, as a ConfigError prints.
        head = printable(str(exc).split("\n", 1)[0])
        lines = [f"{printable(key)}: {printable(message)}" for key, message in exc.problems]
        print("error: " + "\n  ".join([head, *lines]), file=sys.stderr)
        return
    print(f"error: {exc if isinstance(exc, ConfigError) else printable(str(exc))}", file=sys.stderr)


def _project_root() -> Path:
    """The directory holding Pulumi.yaml: the current one or one of its parents."""
    here = Path.cwd()
    for candidate in (here, *here.parents):
        if (candidate / "Pulumi.yaml").is_file():
            return candidate
    return here


def _read_stack(args: argparse.Namespace, stacks_dir: Path) -> "StackFile":
    """The stack file `args.stack` names (a stack name, or the path of an existing .yaml file;
    cli/stack_file.py `resolve_stack`); `args.stack` becomes the stack's name. Raises
    StackArgumentError or ConfigError."""
    from llmd_fleet.cli.stack_file import read_stack_file, resolve_stack

    args.stack, path = resolve_stack(args.stack, stacks_dir)
    return read_stack_file(stacks_dir, args.stack, path)


def _bench(args: argparse.Namespace, root: Path, stacks_dir: Path) -> int:
    """`llmd-fleet bench`: render the Job, its ConfigMap, NetworkPolicy and gateway Service, and
    validate them like every rendered manifest; the stack program is not run."""
    from llmd_fleet.cli.bench.workload import (
        BenchError,
        BenchOptions,
        bench_files,
        bench_name,
        parse_stages,
    )
    from llmd_fleet.cli.check import check_manifests
    from llmd_fleet.cli.outdir import write_atomically
    from llmd_fleet.cli.stack_file import stack_config

    try:
        config = stack_config(_read_stack(args, stacks_dir))
        plan_models(config)  # a stack that does not plan does not deploy, and is not benchmarked
        options = BenchOptions(gateway_address=args.gateway_address, prometheus_url=args.prometheus_url)
        if args.stages is not None:
            options = BenchOptions(
                stages=parse_stages(args.stages),
                gateway_address=args.gateway_address,
                prometheus_url=args.prometheus_url,
            )
        out = args.out or root / "build" / "bench" / args.stack
        ensure_replaceable(out)
        files = bench_files(config, options)
    except (ConfigError, PlanError, OutputDirError, BenchError, StackArgumentError) as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    write_atomically(files, out)
    count, findings = check_manifests(out / "manifests", config.target.kubernetes_version, [])
    for finding in findings:
        print(f"INVALID {finding}")
    bad = len({(f.file, f.object) for f in findings})
    print(f"rendered the benchmark of {args.stack}: {len(files)} files in {out}")
    print(f"checked {count} objects in {out / 'manifests'}: {count - bad} valid, {bad} invalid")
    name, namespace = bench_name(config), config.serving.namespace
    print(
        f"run it:   kubectl apply -f {out / 'manifests'}\n"
        f"follow:   kubectl logs -n {namespace} -f job/{name} -c inference-perf\n"
        f"summary:  kubectl logs -n {namespace} job/{name} -c inference-perf | llmd-fleet bench-summary -\n"
        f"clean up: kubectl delete -f {out / 'manifests'}"
    )
    return EXIT_INVALID_OUTPUT if findings else EXIT_OK


def _status(args: argparse.Namespace, stacks_dir: Path) -> int:
    """`llmd-fleet status`: the fleet as its cluster has it (llmd_fleet/cli/status.py); exit 0 when
    every group is ready (and the request, when asked, was answered 2xx), 1 when not (yet) or when
    the cluster cannot be read (llmd_fleet/cluster/client.py), 2 on bad input (the stack file,
    a flag, the kubeconfig's shape)."""
    from llmd_fleet.cli.stack_file import stack_config
    from llmd_fleet.cli.status import (
        Status,
        StatusError,
        chat_request,
        gateway_url,
        interval_seconds,
        read_status,
        timeout_seconds,
        watch,
    )
    from llmd_fleet.cluster.client import ClusterError, load_client

    try:
        timeout, interval = timeout_seconds(args.timeout), interval_seconds(args.interval)
        config = stack_config(_read_stack(args, stacks_dir))
        context = args.context or config.target.kubeconfig_context
        client = load_client(args.kubeconfig, context)
    except (ConfigError, StatusError, StackArgumentError) as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    except ClusterError as exc:
        _error(exc)
        return exc.exit_code
    from llmd_fleet.stack.model import model_views

    try:
        with client:
            # One block of lines per model (`llmd-fleet:models`), in stack order; a single-model
            # stack has one.
            statuses = []
            for view in model_views(config):
                if args.watch:

                    def read_view(view: "StackConfig" = view) -> "Status":
                        return read_status(client.get, view)

                    final = watch(
                        read_view,
                        timeout,
                        interval,
                        lambda line: print(printable(line), flush=True),
                    )
                    if final is None:
                        # Why not: the last state with a line per pod or group that is not ready.
                        for line in read_status(client.get, view).lines():
                            print(printable(line))
                        print(f"status {args.stack}: not every group ready after {timeout:.0f} s")
                        return EXIT_INVALID_OUTPUT
                    statuses.append(final)
                else:
                    statuses.append(read_status(client.get, view))
            for status in statuses:
                for line in status.lines():
                    print(printable(line))
            ok = all(status.all_ready for status in statuses)
            if args.request:
                url = args.url or gateway_url(client.get, config)
                for view in model_views(config):
                    url, answer = chat_request(url, client_model_name(view.model))
                    line = answer.line(url)
                    print(
                        printable(
                            f"{line} (model {client_model_name(view.model)})" if config.models else line
                        )
                    )
                    ok = ok and answer.code is not None and 200 <= answer.code < 300
    except StatusError as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    except ClusterError as exc:
        _error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INVALID_OUTPUT
    print(f"status {args.stack}: {'serving' if ok else 'not ready'}")
    return EXIT_OK if ok else EXIT_INVALID_OUTPUT


def _doctor(args: argparse.Namespace, stacks_dir: Path) -> int:
    """`llmd-fleet doctor`: the stack's render says what it relies on; the cluster is read for it
    (llmd_fleet/cli/doctor.py). Exit 0 when no check failed, 1 when one did or the cluster cannot be
    read, 2 on bad input (the stack file, a stack doctor cannot check in this mode, the kubeconfig)."""
    import json

    from llmd_fleet.cli.doctor import as_json, expectations, run_checks, summary
    from llmd_fleet.cli.stack_file import stack_config
    from llmd_fleet.cluster.client import ClusterError, load_client

    try:
        stack_file = _read_stack(args, stacks_dir)
        config = stack_config(stack_file)
        plan = plan_models(config)[0]
        if SPECS[config.target.kind].creates_cluster and not args.deployed:
            raise InputRefused(
                f"doctor {args.stack}: target.kind {config.target.kind} creates its cluster, so there is "
                f"nothing to check before pulumi up: run llmd-fleet doctor {args.stack} --deployed after it"
            )
        require_target_extra(config.target.kind)
        require_image_build_extra(config.images.build)
    except (ConfigError, PlanError, StackArgumentError, MissingExtraError, InputRefused) as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    from llmd_fleet.cli.render import HELM_TYPE, helm_release, is_kubernetes_object, kubernetes_object
    from llmd_fleet.cli.synth import synthesize_validated

    synthesis = synthesize_validated(stack_file, config, plan)
    objects = [kubernetes_object(r) for r in synthesis.resources if is_kubernetes_object(r)]
    releases = [str(helm_release(r)["name"]) for r in synthesis.resources if r.type == HELM_TYPE]
    wanted = expectations(args.stack, config, objects, releases)
    try:
        with load_client(args.kubeconfig, args.context or config.target.kubeconfig_context) as client:
            results = run_checks(wanted, client.get, args.deployed)
    except ClusterError as exc:
        _error(exc)
        return exc.exit_code
    if args.json:
        print(json.dumps(as_json(args.stack, args.deployed, results), indent=2))
    else:
        for result in results:
            print(printable(result.line()))
        print(printable(summary(args.stack, results)))
    return EXIT_INVALID_OUTPUT if any(r.status == "FAIL" for r in results) else EXIT_OK


def _bench_summary(source: str) -> int:
    from llmd_fleet.cli.bench.report import ReportError, read, summarize, table

    try:
        rows = summarize(read(source, sys.stdin.read() if source == "-" else None))
    except (ReportError, OSError) as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    print(table(rows))
    return EXIT_OK


def run(argv: list[str]) -> int:
    args = arguments.build_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    if args.command == "policy-pack-path":
        from llmd_fleet.cli.paths import PACKAGE_DIR

        print(PACKAGE_DIR / "policies")
        return EXIT_OK
    if args.command == "bench-summary":
        return _bench_summary(args.source)
    root = _project_root()
    from llmd_fleet.cli.paths import stacks_dir_for

    # Outside a checkout (an installed wheel, no stacks/ here) the example stacks it ships are used.
    stacks_dir = args.stacks_dir or stacks_dir_for(root)
    if args.command == "bench":
        return _bench(args, root, stacks_dir)
    if args.command == "status":
        return _status(args, stacks_dir)
    if args.command == "doctor":
        return _doctor(args, stacks_dir)
    from llmd_fleet.cli.stack_file import stack_config

    # Everything that can be refused is refused first, with no SDK imported yet: the stack file,
    # its config and plan, the output directory and (for check) the policy config.
    crds, policy_config_path, policy_config = None, None, None
    try:
        stack_file = _read_stack(args, stacks_dir)
        plan = plan_models(config := stack_config(stack_file))[0]
        if args.command in ("plan", "render"):
            _remote_code_advisory(config)
        if args.command == "plan":
            return _plan(args, config, plan)
        require_target_extra(config.target.kind)
        require_image_build_extra(config.images.build)
        if args.command == "check" and args.for_deploy:
            from llmd_fleet.cli.deploy_check import deploy_problems

            if problems := deploy_problems(stack_file, config):
                for key, message in problems:
                    print(f"error: {printable(key)} {printable(message)}", file=sys.stderr)
                return EXIT_BAD_INPUT
        out = args.out or root / "build" / args.stack
        ensure_replaceable(out)
        if args.command == "render" and args.reuse and _reused(stack_file, out):
            return EXIT_OK
        if args.command == "check":
            crds, policy_config_path, policy_config = _check_inputs(args, root)
    except (
        ConfigError,
        PlanError,
        OutputDirError,
        MissingExtraError,
        StackArgumentError,
        InputRefused,
    ) as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    pack = None
    if args.command == "check":
        from llmd_fleet.cli.policy_check import PACK_DIR, PolicyPackProcess

        # The pack starts now and imports its rules while the stack is synthesized.
        pack = PolicyPackProcess(PACK_DIR, args.stack)
    try:
        try:
            synthesis = _render(stack_file, config, plan, out)
        except ConfigError as exc:  # objects declared twice (llmd_fleet/cli/render.py)
            _error(exc)
            return EXIT_BAD_INPUT
        if args.command == "render":
            return EXIT_OK
        return _check(synthesis, out, crds, pack, policy_config_path, policy_config, args.verbose)
    finally:
        if pack is not None:
            pack.stop()


def _check_inputs(
    args: argparse.Namespace, root: Path
) -> "tuple[CrdSchemas, Path | None, dict[str, Any] | None]":
    """Every input of `check` beyond the stack, read and validated before anything is rendered
    or written: the CRDs of `--crd-dir` (each file parsed and converted) and the policy config
    (JSON, then its policy names, enforcement levels and properties against the pack's own
    policies). Raises InputRefused."""
    from llmd_fleet.cli.check import CrdDirError, CrdSchemas, crd_directories
    from llmd_fleet.cli.policy_check import PolicyConfigError, load_policy_config, validate_policy_config

    try:
        crds = CrdSchemas(crd_directories(args.crd_dir))
        policy_config_path = args.policy_config or _default_policy_config(root, args.stack)
        policy_config = None
        if policy_config_path is not None:
            policy_config = load_policy_config(policy_config_path)
            validate_policy_config(policy_config, f"--policy-config {printable(str(policy_config_path))}")
    except (CrdDirError, PolicyConfigError) as exc:
        raise InputRefused(str(exc)) from None
    return crds, policy_config_path, policy_config


def _remote_code_advisory(config: "StackConfig") -> None:
    """Remote code from a moving revision: an advisory here, refused by `check --for-deploy` and the
    policy pack (llmd_fleet/config/remote_code.py)."""
    from llmd_fleet.config.remote_code import remote_code_problem

    if (problem := remote_code_problem(config.model)) is not None:
        key, message = problem
        print(f"advisory: {printable(key)} {printable(message)}", file=sys.stderr)


def _plan(args: argparse.Namespace, config: "StackConfig", plan: "FleetPlan") -> int:
    """`llmd-fleet plan`: the tables, fitted to 100 columns (llmd_fleet/cli/plan_output.py), or
    with --json the plan as one JSON document."""
    from llmd_fleet.cli.plan_output import cost_line, fit_tables, hourly_cost, plan_json, throughput_json

    if config.models:
        return _plan_models(args, config)
    if args.json:
        import json

        doc = plan_json(args.stack, config, plan)
        if args.gpu_hour_usd is not None:
            doc["cost"] = hourly_cost(plan, args.gpu_hour_usd)
        throughput = throughput_json(config, plan, args.gpu_hour_usd, args.cache_hit)
        if throughput is not None:
            doc["throughput"] = throughput
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    from llmd_fleet.cli.plan_sections import (
        canary_section,
        memory_section,
        preflight_section,
        split_section,
        throughput_section,
        workload_section,
    )
    from llmd_fleet.cli.render import plan_table
    from llmd_fleet.layers.observability.live import live_table

    print(f"# plan of {args.stack}: {plan.gpus} GPUs on {plan.nodes} nodes\n")
    if args.gpu_hour_usd is not None:
        print(cost_line(hourly_cost(plan, args.gpu_hour_usd)) + "\n")
    print(fit_tables(plan_table(plan)))
    sections = (
        memory_section(config, plan),
        workload_section(config, plan),
        throughput_section(config, plan, args.gpu_hour_usd, args.cache_hit),
        split_section(config, plan, args.cache_hit),
        preflight_section(config, plan),
        canary_section(config, plan),
    )
    for section in sections:
        if section:
            print("\n" + fit_tables(section))
    print("\n## What to expect live (llmd_fleet/layers/observability/live.py, docs/observability.md)\n")
    print(fit_tables(live_table(config, plan)))
    return EXIT_OK


def _plan_models(args: argparse.Namespace, config: "StackConfig") -> int:
    """`llmd-fleet plan` of a stack with `llmd-fleet:models`: the budget across the models (GPUs,
    nodes, cost), then each model's plan as a single-model stack's, on its share of the nodes."""
    from llmd_fleet.cli.plan_output import cost_line, fit_tables, hourly_cost, plan_json, throughput_json
    from llmd_fleet.cli.plan_sections import memory_section, workload_section
    from llmd_fleet.cli.render import plan_table
    from llmd_fleet.stack.model import model_views
    from llmd_fleet.stack.plans import plan_model_shares

    shares = plan_model_shares(config)
    views = model_views(config)
    gpus = sum(s.plan.gpus for s in shares)
    nodes = sum(s.plan.nodes for s in shares)
    if args.json:
        import json

        def model_doc(view: "StackConfig", plan: "FleetPlan") -> dict[str, Any]:
            doc = plan_json(args.stack, view, plan)
            if args.gpu_hour_usd is not None:
                doc["cost"] = hourly_cost(plan, args.gpu_hour_usd)
            throughput = throughput_json(view, plan, args.gpu_hour_usd, args.cache_hit)
            if throughput is not None:
                doc["throughput"] = throughput
            return doc

        # The first model's plan at the top (a v1 reader sees a whole plan), then every model's.
        doc = model_doc(views[0], shares[0].plan)
        doc["totalGpus"], doc["totalNodes"] = gpus, nodes
        doc["models"] = [
            {
                "name": share.name,
                "servedName": share.client_name,
                "adapters": list(share.adapters),
                "plan": model_doc(view, share.plan),
            }
            for share, view in zip(shares, views, strict=True)
        ]
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(f"# plan of {args.stack}: {gpus} GPUs on {nodes} nodes, {len(shares)} models\n")
    rows = [("model", "served as", "LoRA adapters", "node groups", "nodes", "GPUs")]
    for share in shares:
        groups = ", ".join(f"{u.name} {u.used}" for u in share.plan.node_groups if u.used)
        rows.append(
            (
                share.name,
                share.client_name,
                ", ".join(share.adapters) or "none",
                groups,
                str(share.plan.nodes),
                str(share.plan.gpus),
            )
        )
    print(fit_tables(_markdown_table(rows)))
    if args.gpu_hour_usd is not None:
        for share in shares:
            print(f"{share.name}: " + cost_line(hourly_cost(share.plan, args.gpu_hour_usd)))
        print()
    for share, view in zip(shares, views, strict=True):
        print(f"\n## model {share.name}: `{view.model.id}` @ `{view.model.revision}`\n")
        print(fit_tables(plan_table(share.plan)))
        lora = max((r.memory.lora_gib for r in share.plan.roles), default=0.0)
        if share.adapters:
            print(
                f"\nLoRA: {len(share.adapters)} adapter slot(s) of rank "
                f"{max(a.rank for a in view.model.lora_adapters)} take {lora:.2f} GiB of HBM per rank, "
                "before KV (plan/lora.py)"
            )
        for section in (memory_section(view, share.plan), workload_section(view, share.plan)):
            if section:
                print("\n" + fit_tables(section))
    return EXIT_OK


def _markdown_table(rows: "Sequence[tuple[str, ...]]") -> str:
    header, *body = rows
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _reused(stack_file: "StackFile", out: Path) -> bool:
    """`render --reuse`: whether `out` holds a render of this code and these settings (then it
    is kept, and said so)."""
    from llmd_fleet.cli.outdir import recorded_key
    from llmd_fleet.cli.render_key import render_key

    key = render_key(stack_file)
    if recorded_key(out) != key:
        return False
    print(f"rendered {stack_file.stack}: reused {out} (key {key}: same code and settings)")
    return True


def _render(stack_file: "StackFile", config: "StackConfig", plan: "FleetPlan", out: Path) -> "Synthesis":
    from llmd_fleet.cli.outdir import write_atomically
    from llmd_fleet.cli.render import render_files
    from llmd_fleet.cli.render_key import render_key
    from llmd_fleet.cli.synth import synthesize_validated

    synthesis = synthesize_validated(stack_file, config, plan)
    files = render_files(synthesis)
    write_atomically(files, out, key=render_key(stack_file))
    print(f"rendered {stack_file.stack}: {len(files)} files in {out}")
    return synthesis


def _check(
    synthesis: "Synthesis",
    out: Path,
    crds: "CrdSchemas | None",
    pack: "PolicyPackProcess | None",
    policy_config_path: Path | None,
    policy_config: dict[str, Any] | None,
    verbose: bool = False,
) -> int:
    """Validate the rendered manifests, then run the policy pack over the same synthesis; the last
    line is the stack's summary (`check STACK: ok|FAILED: ...`)."""
    from llmd_fleet.cli.check import check_manifests

    try:
        count, findings = check_manifests(
            out / "manifests", synthesis.config.target.kubernetes_version, crds or []
        )
    except ValueError as exc:
        _error(exc)
        return EXIT_BAD_INPUT
    for finding in findings:
        print(f"INVALID {finding}")
    bad = len({(f.file, f.object) for f in findings})
    print(f"checked {count} objects in {out / 'manifests'}: {count - bad} valid, {bad} invalid")
    policy_result = _check_policies(synthesis, policy_config_path, policy_config, pack, verbose)
    if policy_result is None:
        return EXIT_BAD_INPUT
    failed, (mandatory, advisory, not_run) = bool(findings or policy_result[0]), policy_result[1]
    print(
        f"check {synthesis.stack}: {'FAILED' if failed else 'ok'}: {count - bad} of {count} objects valid; "
        f"policies: {mandatory} mandatory, {advisory} advisory" + (f", {not_run} not run" if not_run else "")
    )
    return EXIT_INVALID_OUTPUT if failed else EXIT_OK


def _default_policy_config(root: Path, stack: str) -> Path | None:
    from llmd_fleet.cli.paths import policy_config_for

    return policy_config_for(root, stack)


def _check_policies(
    synthesis: "Synthesis",
    config_path: Path | None,
    config: dict[str, Any] | None,
    pack: "PolicyPackProcess | None" = None,
    verbose: bool = False,
) -> tuple[bool, tuple[int, int, int]] | None:
    """Run the policy pack over the synthesized resources and print its violations the way a
    preview lists them (advisories grouped per policy unless `verbose`); (True when a mandatory
    policy failed or a policy could not run, (mandatory, advisory, not run) counts), None when
    the policy config does not fit the pack's schemas."""
    from llmd_fleet.cli.policy_check import PolicyConfigError, PolicyPackError, report_lines, run_policy_pack

    try:
        report = run_policy_pack(synthesis.resources, synthesis.stack, policy_config=config, started=pack)
    except PolicyConfigError as exc:
        _error(exc)
        return None
    except PolicyPackError as exc:
        _error(exc)
        return True, (0, 0, 0)
    for line in report_lines(report.violations, verbose):
        print(line)
    shown = config_path
    if config_path is not None and config_path.is_absolute() and config_path.is_relative_to(Path.cwd()):
        shown = config_path.relative_to(Path.cwd())
    source = f" (config {shown})" if shown is not None else ""
    print(report.summary() + source)
    # A policy that did not run fails the check like a mandatory violation: nothing was checked.
    return bool(report.mandatory or report.not_run), (
        len(report.mandatory),
        len(report.advisory),
        len(report.not_run),
    )


def guarded_run(argv: list[str]) -> int:
    """`run`, with the two ways a command ends that are no one's bad input: an interrupt (Ctrl-C,
    SIGTERM, SIGHUP: cli/children.py) and the environment failing under it (a full disk, a
    directory that turned read-only, a file that vanished). Each prints one line and exits 1, with
    no traceback; a partly written output directory is recovered by the next run (docs/bad-input.md)."""
    from llmd_fleet.cli.children import interrupted_line

    try:
        return run(argv)
    except KeyboardInterrupt as exc:
        print(f"llmd-fleet: {interrupted_line(exc)}", file=sys.stderr)
    except BrokenPipeError:
        raise
    except OSError as exc:
        where = f"{printable(os.fsdecode(exc.filename))}: " if exc.filename is not None else ""
        reason = exc.strerror or type(exc).__name__
        print(
            f"error: {where}{printable(reason)} (the environment failed; no input was refused)",
            file=sys.stderr,
        )
    return EXIT_INVALID_OUTPUT


def main() -> None:
    from llmd_fleet.cli.children import handle_signals

    # SIGTERM and SIGHUP end the command as Ctrl-C does: every `finally` stops the children it
    # started (each also dies with this process: cli/children.py), then one line, exit 1.
    handle_signals()
    # A path or name that is not UTF-8 (kept by Python as surrogate escapes) is written with
    # backslash escapes instead of failing to print.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        code = guarded_run(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`llmd-fleet plan ... | head`): nothing more to say, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(EXIT_OK)
    # The mock engine leaves its event loop and some RPC tasks behind; collecting them at
    # interpreter exit prints asyncio's "Task was destroyed but it is pending!". Everything is
    # written: flush and leave directly, running no finalizer.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
