"""`python -m infra.checkov_scan STACK...` (see infra/checkov_scan/cli.py)."""

import sys

from infra.checkov_scan.cli import main

sys.exit(main())
