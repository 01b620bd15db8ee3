import sys

from devtools.twin.cli import main
from llmd_fleet.cli.children import handle_signals, interrupted_line

# SIGTERM and SIGHUP end the run as Ctrl-C does: the `finally` blocks stop every process it started.
handle_signals()
try:
    sys.exit(main(sys.argv[1:]))
except KeyboardInterrupt as exc:
    print(f"twin: {interrupted_line(exc)}", file=sys.stderr)
    sys.exit(1)
