"""The component provider of `llmd-fleet:index:Fleet` (docs/components.md), run by the Python
language host; its schema is inferred from the component's types."""

from pulumi.provider.experimental import component_provider_host

from llmd_fleet.facade.component import PACKAGE, Fleet

if __name__ == "__main__":
    component_provider_host(name=PACKAGE, components=[Fleet])
