"""`python -m devtools.agentic_check [STACK...]` (check.py)."""

import sys

from devtools.agentic_check.check import main

sys.exit(main(sys.argv[1:]))
