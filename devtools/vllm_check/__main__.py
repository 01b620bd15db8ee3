"""`python -m devtools.vllm_check STACK...` (see devtools/vllm_check/cli.py)."""

import sys

from devtools.vllm_check.cli import main

sys.exit(main())
