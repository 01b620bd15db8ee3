"""The router and gateway (type tokens `llmd-fleet:router:*`, `llmd-fleet:gateway:*`): the
endpoint picker, its EndpointPickerConfig, and the Gateway with its routes."""
