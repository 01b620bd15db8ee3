"""Runs inside inference-perf's environment (devtools/bench/env.py), never in the
project's: each workload file through `inference_perf.config.read_config`, the loader of
`inference-perf --config_file`, then a negative control: the same file with one key misspelt
must be refused (the tool's models forbid unknown keys), so an acceptance means something.

    python validate.py JOBS.json RESULT.json

JOBS.json maps a stack to its workload YAML; RESULT.json maps it to None (accepted) or the
tool's error. Standard library, PyYAML and inference-perf only.
"""

import importlib
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any


def _check(text: str) -> str | None:
    import yaml

    # Imported by name: the tool lives only in its own environment, not in the project's.
    read_config = importlib.import_module("inference_perf.config").read_config

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yml"
        path.write_text(text)
        try:
            config = read_config(str(path))
        except Exception as exc:  # the tool's own refusal, whatever its type
            return f"{type(exc).__name__}: {str(exc)[:2000]}"
        # Read back what the tool parsed: the file's keys must have reached its models.
        document: dict[str, Any] = yaml.safe_load(text)
        if config.api.session_id_header_key != document["api"]["session_id_header_key"]:
            return "api.session_id_header_key did not reach the tool's APIConfig"
        if config.data.synthetic_agentic is None:
            return "data.synthetic_agentic did not reach the tool's DataConfig"
        if len(config.load.stages) != len(document["load"]["stages"]):
            return "load.stages did not reach the tool's LoadConfig"
        misspelt = dict(document, api={**document["api"], "session_id_header": "x"})
        path.write_text(yaml.safe_dump(misspelt))
        try:
            read_config(str(path))
        except Exception:
            return None
        return "negative control: a misspelt key (api.session_id_header) was accepted"


def main() -> None:
    logging.disable(logging.CRITICAL)  # read_config logs the whole merged config
    jobs = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps({stack: _check(text) for stack, text in jobs.items()}))


if __name__ == "__main__":
    main()
