"""`python -m devtools.version_check` (see devtools/version_check/cli.py)."""

import sys

from devtools.version_check.cli import main

sys.exit(main())
