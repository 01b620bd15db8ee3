"""The endpoint picker's and the tokenizer's ports and selectors (pure)."""

from llmd_fleet.config.fleet import StackConfig

TOKENIZER_PORT = 8000
GRPC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090


def epp_selector(config: StackConfig) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": "endpoint-picker",
        "app.kubernetes.io/instance": config.serving.name,
    }


def tokenizer_selector(config: StackConfig) -> dict[str, str]:
    return {"app.kubernetes.io/component": "tokenizer", "app.kubernetes.io/instance": config.serving.name}
