"""The data-plane twin (docs/twin.md).

    python -m devtools.dataplane run STACK [--long] [--broken] [--kv-events] [--broken-kv-events]
                                           [--scaled] [--ranks-per-pod=N] [--without-responses]

--broken runs with the token producer's render URL on a wrong port (the run must then fail).
--kv-events runs each engine rank as a simulator of its own publishing KV events through a relay
to the picker's precise prefix producer (stacks with precise prefix routing); --broken-kv-events
does so with the producer's socket port wrong. --scaled runs a copy of STACK with one instance per
role (devtools/dataplane/scaled.py); --ranks-per-pod=N runs N data-parallel ranks per pod.
--without-responses leaves out the Responses phase of a stack that renders the agentic API (CI:
`make day-two` runs it on the replay's own deployment, devtools/daytwo/responses_phase.py).
"""

import sys
from collections.abc import Sequence

from devtools import source_snapshot
from devtools.dataplane.build import BuildError as DataplaneBuildError
from devtools.twin.build import BuildError
from devtools.twin.cluster import PROJECT_ROOT, TwinError
from llmd_fleet.cli.stack_file import stack_file_path, stack_names


def _has_models(stack: str) -> bool:
    """Whether the stack file sets `llmd-fleet:models` (an unreadable one is left to the run)."""
    import yaml

    try:
        document = yaml.safe_load((PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return False
    config = document.get("config") if isinstance(document, dict) else None
    return isinstance(config, dict) and "llmd-fleet:models" in config


FLAGS = (
    "--long",
    "--broken",
    "--kv-events",
    "--broken-kv-events",
    "--scaled",
    "--ranks-per-pod=N",
    "--without-responses",
)


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if len(args) < 2 or args[0] != "run":
        print(__doc__)
        return 2
    unknown = [a for a in args[2:] if a not in FLAGS and not a.startswith("--ranks-per-pod=")]
    if unknown:
        print(f"dataplane: unknown argument(s) {' '.join(unknown)}; flags: {' '.join(FLAGS)}")
        return 2
    ranks = None
    for a in args[2:]:
        if a.startswith("--ranks-per-pod="):
            value = a.split("=", 1)[1]
            if not value.isdigit() or int(value) < 1:
                print(f"dataplane: --ranks-per-pod needs a positive whole number, got {value!r}")
                return 2
            ranks = int(value)
    stacks = PROJECT_ROOT / "stacks"
    if not stack_file_path(stacks, args[1]).is_file():
        known = ", ".join(stack_names(stacks))
        print(f"dataplane: error: no stack file stacks/Pulumi.{args[1]}.yaml (stacks: {known})")
        return 2
    from devtools.dataplane.phases import main_run

    models = _has_models(args[1])
    if models and {"--long", "--broken", "--broken-kv-events"} & set(args):
        print(
            f"dataplane: {args[1]} sets llmd-fleet:models: its run takes --scaled, --ranks-per-pod=N "
            "and --kv-events only (the replay's figures and failover are the single-model runs')"
        )
        return 2
    if models and "--kv-events" in args:
        # `make dataplane-reference` passes it to whichever stack it runs.
        print(
            "dataplane: --kv-events: the multi-model run does not relay KV events "
            "(the single-model reference run proves them)"
        )
    try:
        if models:
            # One pool per model behind the body-based router (devtools/dataplane/multimodel.py).
            from devtools.dataplane import multimodel

            return multimodel.main_run(args[1], PROJECT_ROOT, "--scaled" in args, ranks)
        return main_run(
            args[1],
            "--long" in args,
            "--broken" in args,
            PROJECT_ROOT,
            kv_events="--kv-events" in args,
            broken_kv_events="--broken-kv-events" in args,
            scaled_down="--scaled" in args,
            ranks_per_pod=ranks,
            with_responses="--without-responses" not in args,
        )
    except source_snapshot.SnapshotMissing as exc:
        print(f"dataplane: not run: {exc}")
        return 0
    except ValueError as exc:  # a rendering the run cannot take (topology.MappingError too)
        print(f"dataplane: error: {exc}")
        return 2
    except (
        TwinError,
        TimeoutError,
        BuildError,
        DataplaneBuildError,
    ) as exc:  # the twin or a build, not the rendering
        print(f"dataplane: failed: {exc}", file=sys.stderr)
        return 1
