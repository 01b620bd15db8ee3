import sys

from llmd_fleet.tools.twin.cli import main

sys.exit(main(sys.argv[1:]))
