import sys

from devtools.dataplane.cli import main

sys.exit(main(sys.argv[1:]))
