"""The serving layer: the prefill/decode engines of the DisaggregatedSet."""
