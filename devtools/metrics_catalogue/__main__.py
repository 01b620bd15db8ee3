"""`python -m devtools.metrics_catalogue vllm [--write] [STACK...]` (vllm.py) and
`python -m devtools.metrics_catalogue router --source DIR [--commit SHA] [--write]` (router.py)."""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from devtools.metrics_catalogue import router, vllm
from devtools.metrics_catalogue.catalogue import CATALOGUE
from llmd_fleet.cli.stack_file import stack_names


def _write(families: dict[str, Any], source: str, note: dict[str, Any] | None = None) -> None:
    data = json.loads(CATALOGUE.read_text())
    kept = {n: e for n, e in data["families"].items() if e.get("source") != source}
    data["families"] = dict(sorted({**kept, **families}.items()))
    if note:
        data["sources"][source].update(note)
    CATALOGUE.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.metrics_catalogue")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("vllm")
    v.add_argument("--write", action="store_true")
    v.add_argument("stacks", nargs="*")
    r = sub.add_parser("router")
    r.add_argument("--source", type=Path, required=True)
    r.add_argument("--commit", default=None)
    r.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    committed = json.loads(CATALOGUE.read_text())["families"]
    if args.command == "vllm":
        stacks_dir = Path("stacks")
        stacks = args.stacks or stack_names(stacks_dir)
        simulated = vllm.simulator_stacks(stacks_dir, stacks)
        for stack in simulated:
            print(f"{stack}: skipped: serving.engine is simulator, no vLLM registers metrics there")
        stacks = [s for s in stacks if s not in simulated]
        configs = vllm.engine_configs(stacks_dir, stacks)
        try:
            extracted = vllm.extract(configs)
        except RuntimeError as exc:
            print(f"error: {exc}")
            return 1
        if args.write:
            _write(extracted, vllm.SOURCE)
            print(f"wrote {len(extracted)} vLLM metric families to {CATALOGUE}")
            return 0
        lines = vllm.differences(committed, extracted)
        for line in lines:
            print(f"DIFFERS {line}")
        print(
            f"vLLM metric catalogue: {len(extracted)} families for {len(configs)} engine configurations of "
            f"{', '.join(stacks)}: "
            f"{'matches' if not lines else f'{len(lines)} difference(s)'} ({CATALOGUE.name})"
        )
        return 1 if lines else 0
    entries, problems = router.extract(args.source)
    for problem in problems:
        print(f"NOTE {problem}")
    if args.write:
        _write(entries, "llm-d-router", {"commit": args.commit} if args.commit else None)
        print(f"wrote {len(entries)} llm-d-router metric families to {CATALOGUE}")
        return 0
    mine = {n: e for n, e in committed.items() if e.get("source") == "llm-d-router"}
    same = mine == entries
    print(f"llm-d-router metric catalogue: {len(entries)} families: {'matches' if same else 'DIFFERS'}")
    return 0 if same else 1


sys.exit(main(sys.argv[1:]))
