"""What the day-two replay's phases share (devtools/daytwo/run.py and the canary, faults and
scaling phases: canary_phase.py, faults_phase.py, scale_phase.py): the stack rendered, the serving
set's nodes and pods and when the set has settled, the gateway stand-in's results, and the
timings the phases run by.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.dataplane import replay, topology
from devtools.dataplane import run as dataplane
from devtools.twin import lws_checks, nodes
from devtools.twin.kube import Kube
from llmd_fleet.cli.outdir import OUTPUT_MARKER

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# Traffic inside each upgrade's measured window: at least LEAD_S of it against the old revision
# alone before the new one serves (run.py `lead_problem`), and TAIL_S after the rollout ends.
LEAD_S = 8.0
TAIL_S = 5.0
# The longest a rollout may take before the run fails (every step waits a load).
ROLLOUT_TIMEOUT_S = 600.0
# The longest a lost group may take to come back (one simulated load plus scheduling), and the
# canary's pods to be gone once it is rolled back.
RECOVERY_TIMEOUT_S = 240.0


def rendered_into(stacks_dir: Path, stack: str, out: Path) -> None:
    """`llmd-fleet render` of `stack` into `out`, unless this run rendered it there already:
    `Replay.prepare` renders what the later phases read while the machine is idle (mid-replay a
    render shares the two cores with every process of the run: 9 s of wall time against 1.5).
    The CLI writes a render into a new folder and renames it into place (llmd_fleet/cli/outdir.py),
    so `out` with its marker is a whole render, and the run's folder starts empty."""
    if (out / OUTPUT_MARKER).is_file():
        return
    subprocess.run(
        [
            str(Path(sys.executable).with_name("llmd-fleet")),
            "--stacks-dir",
            str(stacks_dir),
            "render",
            stack,
            "--out",
            str(out),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def render(stacks_dir: Path, stack: str, out: Path) -> list[dict[str, Any]]:
    """`rendered_into`, then the render's objects."""
    rendered_into(stacks_dir, stack, out)
    return topology.load_manifests(out)


def serving_nodes(stacks_dir: Path, stack: str) -> list[str]:
    """The nodes of the node groups the serving roles run on (the process kubelet's)."""
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    config = stack_config(read_stack_file(stacks_dir, stack))
    groups = {config.serving.roles.prefill.node_group, config.serving.roles.decode.node_group}
    return [n for g in sorted(groups) for n in nodes.node_names(g, config.fleet.node_groups[g].count)]


def serving_pods(kube: Kube, namespace: str, set_name: str) -> list[dict[str, Any]]:
    return kube.list("v1", "Pod", namespace, f"{topology.DS_NAME}={set_name}")


def settled(pods: list[dict[str, Any]], revision_count: dict[str, int]) -> str | None:
    """The one revision every pod has when the set is settled (the expected number of pods per
    role, all Ready, none terminating), else None. Pure."""
    if any(p["metadata"].get("deletionTimestamp") for p in pods):
        return None
    revisions = {p["metadata"]["labels"].get(topology.DS_REVISION) for p in pods}
    roles: dict[str, int] = {}
    for p in pods:
        roles[p["metadata"]["labels"].get(topology.DS_ROLE, "")] = (
            roles.get(p["metadata"]["labels"].get(topology.DS_ROLE, ""), 0) + 1
        )
    if len(revisions) != 1 or roles != revision_count or not all(lws_checks.is_ready(p) for p in pods):
        return None
    return next(iter(revisions)) or None


def read_results(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # the line being written when the stand-in stopped
            continue
    return rows


def replay_gateway(
    run: "Replay", tag: str, pickers: list[str], entries: list[dict[str, Any]]
) -> tuple[list[str], Path]:
    """The gateway stand-in's command line for `entries` (written to replay-<tag>.jsonl) through
    `pickers`, with its results in the run's <tag>/ folder (created), and that folder."""
    replay_file = run.run_dir / f"replay-{tag}.jsonl"
    replay_file.write_text(replay.write(entries))
    out = run.run_dir / tag
    out.mkdir(parents=True, exist_ok=True)
    argv = dataplane.gateway_argv(
        run.bins,
        pickers,
        run.topo.picker,
        f"--replay={replay_file}",
        f"--out={out}",
        "--pick-deadline=15s",
    )
    return argv, out
