"""The Responses layer: the agentic API and its response store (`llmd-fleet:responses`)."""
