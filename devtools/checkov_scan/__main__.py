"""`python -m devtools.checkov_scan STACK...` (see devtools/checkov_scan/cli.py)."""

import sys

from devtools.checkov_scan.cli import main

sys.exit(main())
