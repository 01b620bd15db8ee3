import sys

from devtools.twin.cli import main

sys.exit(main(sys.argv[1:]))
