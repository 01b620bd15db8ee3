"""The ModelExpress layer: peer-to-peer weight loading (`serving.weightLoading: modelexpress`)."""
