"""The gateway layer: the Gateway, its proxies and its routes to the pool."""
