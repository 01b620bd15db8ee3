"""`check_settings`: the checks of `llmd-fleet check` for settings a program of one's own holds.

A platform team's program (examples/existing_cluster.py) holds the llmd-fleet settings itself
rather than in a stack file. `check_settings` runs on them what `llmd-fleet check` runs on a
stack: the config rules (`ConfigError`, naming each bad key), the plan (`PlanError`), then the
stack program under Pulumi's mock engine, each rendered Kubernetes object validated against the
cluster version's OpenAPI schema and the vendored CRDs. It returns the findings (empty when every
object is valid). It starts Pulumi's mock engine, so call it from a test or a CI step, not from
inside the program `pulumi up` runs (there, `parse_config` and `plan_fleet` refuse bad settings
before anything is declared).
"""

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmd_fleet.core.problems import PROJECT

# What a secret's value is replaced with when the checks render (never a real secret).
_SECRET_STANDIN = "check-settings-secret"


def check_settings(settings: Mapping[str, Any], secrets: tuple[str, ...] = ()) -> list[str]:
    """Validate, plan, render and schema-check `settings` (the keys of a stack file without the
    `llmd-fleet:` prefix: target, fleet, model, serving, ...). `secrets` names the secret keys the
    program will pass (`hfToken`, `responsesDbPassword`); their values are never needed.
    Raises ConfigError or PlanError for bad settings; returns one line per invalid object field
    (`<file>: <Kind>/<name>: <message>`)."""
    from llmd_fleet.cli.check import check_manifests
    from llmd_fleet.cli.outdir import write_atomically
    from llmd_fleet.cli.render import render_files
    from llmd_fleet.cli.stack_file import StackFile, stack_config
    from llmd_fleet.cli.synth import synthesize_validated
    from llmd_fleet.stack.plans import plan_models

    values = {f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in settings.items()}
    values.update({f"{PROJECT}:{k}": _SECRET_STANDIN for k in secrets})
    stack_file = StackFile(
        stack="own-program", values=values, secret_keys=frozenset(f"{PROJECT}:{k}" for k in secrets)
    )
    config = stack_config(stack_file)
    synthesis = synthesize_validated(stack_file, config, plan_models(config)[0])
    with tempfile.TemporaryDirectory(prefix="llmd-fleet-check-") as tmp:
        out = Path(tmp) / "out"
        write_atomically(render_files(synthesis), out)
        _, findings = check_manifests(out / "manifests", config.target.kubernetes_version, [])
    return [str(f) for f in findings]
