"""`python -m devtools.cloud_check [STACK...]`: every rendered GKE and EKS input against the clouds'
own API models.

Without STACK it takes every stack under stacks/ whose `llmd-fleet:target` kind is gke or eks (a
new stack file joins by itself). Each is rendered first (`llmd-fleet render <stack> --reuse`, which
reuses a current render; its lines go to stderr), then every leaf input of build/<stack>/cloud/*.yaml
is checked (devtools/cloud_check/check.py). One line per stack, in stack order, then the negative
controls:

    cloud api: <stack>: <N> values checked against <models>, <F> refused, <U> unmapped
    cloud api (negative control): <case>: refused: <the model's allowed values>

each refusal and unmapped input indented under its stack's line. Exit 0 when every stack has F = 0
and U = 0 and every control is refused; 1 otherwise or when the models' environment cannot be
built; 2 for a stack that does not exist or is not a GKE or EKS stack.

    python -m devtools.cloud_check --docs      write docs/cloud-check.md from the tables
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from devtools.cloud_check import env
from devtools.cloud_check.check import CONTROLS, check_cloud_dir, run_control
from devtools.cloud_check.docs import DOCS_PATH, render_docs
from devtools.cloud_check.models import ModelError, Models
from devtools.vllm_check.env import EnvError
from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.cli.stack_file import read_stack_file, stack_names
from llmd_fleet.core.problems import ConfigError
from llmd_fleet.targets.specs import kinds_where

CLOUD_KINDS = kinds_where(lambda spec: spec.sdk_extra is not None)
"""The kinds whose stacks this check renders: those a cloud SDK serves (`TargetSpec.sdk_extra`)."""
TARGET_KEY = "llmd-fleet:target"


def target_kind(stacks_dir: Path, stack: str) -> str:
    """The stack's `llmd-fleet:target` kind (raises ConfigError for a missing stack file)."""
    raw = read_stack_file(stacks_dir, stack).values.get(TARGET_KEY, "{}")
    try:
        target = json.loads(raw)
    except ValueError:
        return ""
    kind = target.get("kind") if isinstance(target, dict) else None
    return kind if isinstance(kind, str) else ""


def cloud_stacks(stacks_dir: Path) -> list[str]:
    return [s for s in stack_names(stacks_dir) if target_kind(stacks_dir, s) in CLOUD_KINDS]


class RenderError(Exception):
    """The render failed; `code` is its exit status (2: the stack's config is bad input)."""

    def __init__(self, stack: str, code: int) -> None:
        super().__init__(f"`llmd-fleet render {stack} --reuse` exited {code}")
        self.code = code


def render(stack: str) -> None:
    """`llmd-fleet render <stack> --reuse`, its output (and its error) on stderr."""
    command = [str(Path(sys.executable).with_name("llmd-fleet")), "render", stack, "--reuse"]
    proc = subprocess.run(command, cwd=CHECKOUT, stdout=sys.stderr, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        raise RenderError(stack, proc.returncode)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.cloud_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("stacks", nargs="*", metavar="STACK")
    parser.add_argument("--stacks-dir", type=Path, default=CHECKOUT / "stacks")
    parser.add_argument("--build-dir", type=Path, default=CHECKOUT / "build")
    parser.add_argument("--docs", action="store_true", help="write docs/cloud-check.md and exit")
    args = parser.parse_args(argv)
    if args.docs:
        DOCS_PATH.write_text(render_docs(), encoding="utf-8")
        print(f"wrote {DOCS_PATH.relative_to(CHECKOUT)}")
        return 0
    try:
        kinds = {s: target_kind(args.stacks_dir, s) for s in args.stacks or cloud_stacks(args.stacks_dir)}
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if wrong := [f"{s} ({k or 'no kind'})" for s, k in kinds.items() if k not in CLOUD_KINDS]:
        print(
            f"error: {TARGET_KEY}.kind: `make check-cloud` checks {' and '.join(CLOUD_KINDS)} stacks, "
            f"not {', '.join(wrong)}",
            file=sys.stderr,
        )
        return 2
    botocore, google = env.pins()
    against = {
        "eks": f"botocore {botocore}",
        "gke": f"google-api-python-client {google} discovery documents",
    }
    try:
        models = Models(env.ensure((botocore, google)))
        failed = False
        for stack, kind in kinds.items():
            render(stack)
            result = check_cloud_dir(models, args.build_dir / stack / "cloud")
            print(
                f"cloud api: {stack}: {result.checked} values checked against {against[kind]}, "
                f"{len(result.refused)} refused, {len(result.unmapped)} unmapped"
            )
            for line in result.refused:
                print(f"  REFUSED {line}")
            for line in result.unmapped:
                print(f"  UNMAPPED {line} (map it in devtools/cloud_check/tables.py)")
            failed = failed or bool(result.refused or result.unmapped)
        for control in CONTROLS:
            text, refused = run_control(models, control)
            print(
                f"cloud api (negative control): {control.resource} {control.path} = {control.value}: {text}"
            )
            failed = failed or not refused
    except RenderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if exc.code == 2 else 1
    except (EnvError, ModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 1 if failed else 0
