"""Labels shared by every object the fleet creates: app.kubernetes.io/* plus llm-d's llm-d.ai/*."""

import re

PART_OF = "llmd-fleet"


def label_value(text: str) -> str:
    """Turn any text into a valid label value (63 chars, alphanumeric ends, [-_.] inside)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "--", text)
    return value[:63].strip("-_.")


def common_labels(component: str, instance: str) -> dict[str, str]:
    """The app.kubernetes.io labels of one component instance."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": instance,
    }


def serving_labels(
    instance: str, role: str, model_label: str, engine_version: str, engine: str = "vllm"
) -> dict[str, str]:
    """Labels of a serving pod; `llm-d.ai/role` is what the router's prefill/decode filters read,
    `llm-d.ai/model` the engine's first served model name (`served_model_names`), the key llm-d's
    OpenCost recipe joins pods to the model they serve on. A simulator pod (`engine` simulator)
    names itself and carries no accelerator labels."""
    labels = {
        **common_labels("model-server", instance),
        "app.kubernetes.io/name": "vllm" if engine == "vllm" else "llm-d-inference-sim",
        "app.kubernetes.io/version": label_value(engine_version),
        "llm-d.ai/inference-serving": "true",
        "llm-d.ai/role": role,
        "llm-d.ai/model": model_label,
        # The simulator answers as vLLM does: the router treats it as a vLLM engine.
        "llm-d.ai/engine-type": "vllm",
    }
    if engine == "vllm":
        labels |= {"llm-d.ai/accelerator-vendor": "nvidia", "llm-d.ai/accelerator-variant": "h100"}
    return labels


def shared_inference_labels() -> dict[str, str]:
    """What llm-d's OpenCost recipe reads to spread a shared component's cost (the endpoint
    picker, the tokenizer) over the models behind it rather than charge it to none."""
    return {"llm-d.ai/inference-shared": "true"}


def prefer_separate_nodes(selector: dict[str, str]) -> dict[str, object]:
    """Pod affinity that spreads the replicas `selector` matches over nodes where it can (a
    preference: a small cluster still schedules them all)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": selector},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


MODEL_SCOPE_LABEL = "llmd_fleet_model"
"""The series label that tells models sharing a namespace apart (`StackConfig.model_scope`)."""
