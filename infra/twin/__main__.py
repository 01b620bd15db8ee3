import sys

from infra.twin.cli import main

sys.exit(main(sys.argv[1:]))
