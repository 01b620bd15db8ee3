"""The command line of `llmd-fleet`: its subcommands, flags and the checks of flag values that
argparse runs (a share, a price), each refused in one line naming the flag (exit 2)."""

import argparse
import math
from pathlib import Path

from llmd_fleet.core.problems import printable

STACK_HELP = "a stack name (stacks/Pulumi.STACK.yaml), or the path of an existing .yaml stack file"


def cache_hit_rate(text: str) -> float:
    """`--cache-hit`: a share from 0 to below 1 (at 1 the prefill would compute nothing)."""
    try:
        rate = float(text) if text == text.strip() else math.nan
    except ValueError:
        rate = math.nan
    if not 0 <= rate < 1:
        raise argparse.ArgumentTypeError(
            f"must be a share from 0 to below 1, e.g. 0.97 (got {printable(text)!r})"
        )
    return rate


def gpu_hour_price(text: str) -> float:
    """`--gpu-hour-usd`: a finite price above 0 and at most 1,000 USD."""
    try:
        if text != text.strip():
            raise ValueError(text)
        price = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a price in USD, e.g. 2.50 (got {printable(text)!r})"
        ) from None
    if not 0 < price <= 1000:
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most 1000 USD per GPU-hour (got {printable(text)!r})"
        )
    return price


def package_version() -> str:
    """The version of the installed distribution (pyproject.toml's, the one place it is set)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llmd-fleet")
    except PackageNotFoundError:
        return "unknown"


def build_parser(description: str) -> argparse.ArgumentParser:
    """The command line of `llmd-fleet` (cli/main.py runs it; `description`: its first line)."""
    parser = argparse.ArgumentParser(prog="llmd-fleet", description=description)
    parser.add_argument(
        "--stacks-dir",
        type=Path,
        default=None,
        help="directory of Pulumi.<stack>.yaml files (default: stacks/)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "policy-pack-path",
        help="print the directory of the policy pack shipped in the package (for pulumi --policy-pack)",
    )
    plan = sub.add_parser("plan", help="print the fleet plan of a stack (fits 100 columns)")
    plan.add_argument("stack", help=STACK_HELP)
    plan.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (schema llmd-fleet.plan/v1, docs/plan-json.md)",
    )
    plan.add_argument(
        "--gpu-hour-usd",
        type=gpu_hour_price,
        metavar="PRICE",
        help="price of one GPU-hour in USD (the node's CPU, memory and NICs included, as GPU "
        "instances are priced): prints the stack's hourly cost; no price, no cost",
    )
    plan.add_argument(
        "--cache-hit",
        type=cache_hit_rate,
        metavar="RATE",
        help="measured prefix-cache hit rate (0 to below 1, e.g. 0.97) for the throughput and P:D "
        "split sections; default: the calibration's assumed rate",
    )
    render = sub.add_parser("render", help="synthesize a stack offline into files")
    render.add_argument("stack", help=STACK_HELP)
    render.add_argument("--out", type=Path, default=None, help="output directory (default: build/STACK)")
    render.add_argument(
        "--reuse",
        action="store_true",
        help="keep the output directory when an earlier render wrote it from the same code and stack "
        "settings (its recorded key; llmd_fleet/cli/render_key.py), else render",
    )
    check = sub.add_parser("check", help="render a stack and validate every manifest")
    check.add_argument("stack", help=STACK_HELP)
    check.add_argument("--out", type=Path, default=None, help="output directory (default: build/STACK)")
    check.add_argument(
        "--crd-dir",
        type=Path,
        action="append",
        default=[],
        help="directory of CRD YAML files (repeatable); the project's schemas/crds is always read too",
    )
    check.add_argument(
        "--policy-config",
        type=Path,
        default=None,
        help="policy pack config, as `pulumi preview --policy-pack-config` takes it "
        "(default: policies/config/STACK.json when it exists; outside a checkout, the one the "
        "package ships)",
    )
    check.add_argument(
        "--for-deploy",
        action="store_true",
        help="also refuse placeholders: documentation accounts, reservation IDs, addresses and domains, "
        "stand-in projects (naming each key), and placeholder secrets (naming each key and its "
        "`pulumi config set --secret` line; `pulumi up` refuses these too)",
    )
    check.add_argument(
        "--verbose", action="store_true", help="list each advisory violation (default: one line per policy)"
    )
    bench = sub.add_parser(
        "bench",
        help="render the agentic benchmark Job of a stack (never part of pulumi up) and check it",
    )
    bench.add_argument("stack", help=STACK_HELP)
    bench.add_argument("--out", type=Path, default=None, help="output directory (default: build/bench/STACK)")
    bench.add_argument(
        "--stages",
        default=None,
        help="concurrent agents per stage, ascending (default: 1/6, 1/3, 2/3 and all of the stack's "
        "workload.agents: 500,1000,2000,3000 for 3,000 agents)",
    )
    bench.add_argument(
        "--gateway-address",
        default=None,
        help="the gateway's IPv4 address; required for a managed gateway (gke-l7-rilb)",
    )
    bench.add_argument(
        "--prometheus-url",
        default=None,
        help="Prometheus to read server metrics from (default: from observability.prometheus)",
    )
    status = sub.add_parser(
        "status", help="read a deployed stack from its cluster: groups, EPP leader, endpoints, preflight"
    )
    status.add_argument("stack", help=STACK_HELP)
    status.add_argument(
        "--kubeconfig", type=Path, default=None, help="kubeconfig (default: KUBECONFIG, else ~/.kube/config)"
    )
    status.add_argument(
        "--context", default=None, help="kubeconfig context (default: target.kubeconfigContext, else current)"
    )
    status.add_argument(
        "--request", action="store_true", help="also send one chat completion through the Gateway"
    )
    status.add_argument("--url", default=None, help="base URL for --request instead of the Gateway's address")
    status.add_argument(
        "--watch", action="store_true", help="poll with a progress line until every group is ready"
    )
    status.add_argument(
        "--timeout", default="3600", metavar="S", help="--watch gives up after S seconds (0 < S <= 86400)"
    )
    status.add_argument(
        "--interval", default="10", metavar="S", help="--watch polls every S seconds (1 <= S <= 3600)"
    )
    doctor = sub.add_parser(
        "doctor",
        help="check the cluster for what the stack relies on but does not create (before pulumi up), "
        "or with --deployed for what it should hold after it (docs/troubleshooting.md)",
    )
    doctor.add_argument("stack", help=STACK_HELP)
    doctor.add_argument(
        "--deployed", action="store_true", help="check after pulumi up (the only mode for gke and eks stacks)"
    )
    doctor.add_argument(
        "--json", action="store_true", help="print the checks as one JSON document (CI gates)"
    )
    doctor.add_argument(
        "--kubeconfig", type=Path, default=None, help="kubeconfig (default: KUBECONFIG, else ~/.kube/config)"
    )
    doctor.add_argument(
        "--context", default=None, help="kubeconfig context (default: target.kubeconfigContext, else current)"
    )
    summary = sub.add_parser("bench-summary", help="summarize a benchmark run's inference-perf reports")
    summary.add_argument("source", help="report directory, the bench Job's log file, or - (stdin)")
    return parser
