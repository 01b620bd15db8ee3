"""`python -m llmd_fleet.tools.vllm_check STACK...` (see llmd_fleet/tools/vllm_check/cli.py)."""

import sys

from llmd_fleet.tools.vllm_check.cli import main

sys.exit(main())
