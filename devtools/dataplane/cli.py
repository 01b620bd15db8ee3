"""The data-plane twin (docs/twin.md).

    python -m devtools.dataplane run STACK [--long] [--broken]

--broken runs with the token producer's render URL on a wrong port (the run must then fail).
"""

from collections.abc import Sequence

from devtools import source_snapshot
from devtools.twin.cluster import PROJECT_ROOT


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if len(args) < 2 or args[0] != "run":
        print(__doc__)
        return 2
    from devtools.dataplane.run import main_run

    try:
        return main_run(args[1], "--long" in args, "--broken" in args, PROJECT_ROOT)
    except source_snapshot.SnapshotMissing as exc:
        print(f"dataplane: not run: {exc}")
        return 0
