"""The data-plane twin (docs/twin.md): the rendered router routes replayed agentic traffic to
simulated engines inside network namespaces, and the figures say what each mechanism buys."""
