"""Vendored `config.json` of each model the shipped stacks serve, one folder per model card.

`make check-vllm` builds vLLM's own engine configuration from these (devtools/vllm_check/
engine_config.py): no weights, no hub. Each folder holds the `config.json` vLLM reads and a
`source.json` naming where it comes from (repository, path, commit) and, where the checkpoint's
own file could not be read, every key that was rebuilt and from what.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# Model id (the stack's `model.id`) -> folder.
FOLDERS: dict[str, str] = {
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-v2-lite-chat",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "zai-org/GLM-5.2-FP8": "glm-5.2-fp8",
}

# Models with a card (plan/model_card.py) but no vendored config.json, and why: the
# engine-configuration check (`make check-vllm`) lists them as not checked with this reason.
NOT_VENDORED: dict[str, str] = {
    "deepseek-ai/DeepSeek-R1": (
        "no copy of the checkpoint's config.json was found to read (the repository is not "
        "reachable from the build machines); its card is DeepSeek-V3's architecture, which is "
        "checked"
    ),
    "moonshotai/Kimi-K2-Instruct": (
        "no copy of the checkpoint's config.json was found to read (the repository is not "
        "reachable from the build machines); its card is entered from the Kimi K2 report"
    ),
}


@dataclass(frozen=True)
class VendoredConfig:
    """One model's vendored config.json and its provenance."""

    model_id: str
    directory: Path
    source: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.directory / "config.json").read_text(encoding="utf-8"))
        return data

    @property
    def rebuilt(self) -> tuple[str, ...]:
        """Keys whose value is not the checkpoint's own file (empty when the file was read)."""
        return tuple(sorted(self.source.get("rebuilt") or {}))


def vendored_config(model_id: str) -> VendoredConfig | None:
    """The vendored config of a model id, None when the project vendors none."""
    folder = FOLDERS.get(model_id)
    if folder is None:
        return None
    directory = HERE / folder
    source = json.loads((directory / "source.json").read_text(encoding="utf-8"))
    return VendoredConfig(model_id, directory, source)
