"""Kind local: an existing kind cluster on a laptop, CPU nodes, the inference simulator."""
