"""The ModelExpress server's names other layers refer to (pure)."""

from llmd_fleet.config.fleet import StackConfig

COMPONENT = "modelexpress"


def server_selector(config: StackConfig) -> dict[str, str]:
    return {"app.kubernetes.io/component": COMPONENT, "app.kubernetes.io/instance": config.serving.name}
