"""Network isolation of the serving namespace (type token `llmd-fleet:security:NetworkIsolation`)."""
