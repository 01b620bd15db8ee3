"""Model serving (type token `llmd-fleet:serving:ModelServing`): vLLM command lines, pods and the
prefill/decode DisaggregatedSet."""
