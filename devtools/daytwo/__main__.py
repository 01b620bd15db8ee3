import sys

from devtools.daytwo.run import main
from llmd_fleet.cli.children import handle_signals, interrupted_line

# SIGTERM and SIGHUP end the run as Ctrl-C does: the `finally` blocks stop every process it started.
handle_signals()
try:
    sys.exit(main(sys.argv[1:]))
except KeyboardInterrupt as exc:
    print(f"day-two: {interrupted_line(exc)}", file=sys.stderr)
    sys.exit(1)
