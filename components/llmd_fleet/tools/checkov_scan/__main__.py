"""`python -m llmd_fleet.tools.checkov_scan STACK...` (see llmd_fleet/tools/checkov_scan/cli.py)."""

import sys

from llmd_fleet.tools.checkov_scan.cli import main

sys.exit(main())
