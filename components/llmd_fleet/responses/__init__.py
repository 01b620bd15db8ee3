"""The agentic Responses API and its database (type tokens `llmd-fleet:responses:*`)."""
