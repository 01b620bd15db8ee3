"""Pod security contexts and network isolation (type token `llmd-fleet:security:NetworkIsolation`)."""
