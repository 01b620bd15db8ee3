"""`python -m devtools.cloud_check [STACK...]` (see devtools/cloud_check/cli.py)."""

import sys

from devtools.cloud_check.cli import main

sys.exit(main())
