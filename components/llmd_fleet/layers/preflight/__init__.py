"""The fabric preflight layer: a probe pair that runs before the serving pods (`serving.preflight`)."""
