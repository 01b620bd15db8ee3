"""`python -m infra.vllm_check STACK...` (see infra/vllm_check/cli.py)."""

import sys

from infra.vllm_check.cli import main

sys.exit(main())
