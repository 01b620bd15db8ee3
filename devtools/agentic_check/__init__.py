"""vLLM's agentic API checked against the pinned binary (docs/responses.md)."""
